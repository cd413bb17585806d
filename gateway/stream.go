package gateway

import (
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
)

// Relay buffering: a reader goroutine fills up to relayBufs buffers ahead of the writer.
const (
	relayBufs    = 4
	relayBufSize = 8 << 10
)

type piece struct {
	b   []byte
	err error
}

// relay streams an upstream SSE answer to the client. A reader goroutine reads the upstream
// body; the writer (fasthttp's connection goroutine, through WriteTo) writes each piece as one
// flushed chunk, first gathering any pieces already read. So an event that stands alone is
// flushed at once, and only events that arrived together share a write. If the upstream fails
// after the status was sent, the stream ends with an SSE error event carrying code 502.
//
// The relay is the answer's body stream: fasthttp calls WriteTo and then Close. The call is
// finished when both the writer side (Close) and the reader goroutine are done.
type relay struct {
	c     *call
	w     *pool.Worker
	resp  *fasthttp.Response
	body  io.Reader
	full  chan piece  // read pieces, in order; capacity relayBufs so the reader never blocks on it
	free  chan []byte // empty buffers
	quit  chan struct{}
	refs  atomic.Int32
	cut   atomic.Bool // the upstream failed mid-stream
	out   []byte
	close sync.Once
}

func newRelay(c *call, w *pool.Worker, resp *fasthttp.Response) *relay {
	r := &relay{
		c: c, w: w, resp: resp, body: resp.BodyStream(),
		full: make(chan piece, relayBufs), free: make(chan []byte, relayBufs), quit: make(chan struct{}),
	}
	bufs := make([]byte, relayBufs*relayBufSize)
	for i := range relayBufs {
		r.free <- bufs[i*relayBufSize : (i+1)*relayBufSize : (i+1)*relayBufSize]
	}
	r.refs.Store(2)
	go r.read()
	return r
}

// read moves the upstream body into pieces until it ends, fails or the writer quits.
func (r *relay) read() {
	defer r.release()
	defer func() {
		if p := recover(); p != nil {
			r.c.g.log.Error("stream relay panicked", "panic", p, "stack", string(debug.Stack()))
			r.full <- piece{err: io.ErrUnexpectedEOF}
		}
	}()
	for {
		var b []byte
		select {
		case b = <-r.free:
		case <-r.quit:
			return
		}
		n, err := r.body.Read(b[:cap(b)])
		if n == 0 && err == nil {
			r.free <- b
			continue
		}
		r.full <- piece{b: b[:n], err: err}
		if err != nil {
			return
		}
	}
}

// SupportsBodyWriteTo tells fasthttp to hand its chunk writer to WriteTo.
func (r *relay) SupportsBodyWriteTo() bool { return true }

// Read is never used by fasthttp (it prefers WriteTo); it exists to satisfy io.Reader.
func (r *relay) Read(p []byte) (int, error) {
	pc := <-r.full
	n := copy(p, pc.b)
	r.free <- pc.b
	if pc.err == nil || pc.err == io.EOF {
		return n, pc.err
	}
	r.cut.Store(true)
	return n, io.EOF
}

// WriteTo writes the stream to dst: each Write there is one chunk, flushed.
func (r *relay) WriteTo(dst io.Writer) (int64, error) {
	var total int64
	for {
		p := <-r.full
		out := append(r.out[:0], p.b...)
		err := p.err
		r.free <- p.b
	gather:
		for err == nil {
			select {
			case q := <-r.full:
				out = append(out, q.b...)
				err = q.err
				r.free <- q.b
			default:
				break gather
			}
		}
		if err != nil && err != io.EOF {
			r.cut.Store(true)
			out = append(out, sseUpstreamError...)
		}
		r.out = out
		if len(out) > 0 {
			n, werr := dst.Write(out)
			total += int64(n)
			if werr != nil {
				return total, werr
			}
		}
		if err != nil {
			return total, nil
		}
	}
}

// Close ends the relay from the writer side: it stops the reader (interrupting a blocked
// upstream read when the client went away) and releases the writer's reference.
func (r *relay) Close() error {
	r.close.Do(func() {
		close(r.quit)
		_ = r.resp.CloseBodyStream()
		r.release()
	})
	return nil
}

// release drops one reference; the last one returns the upstream answer, the worker's in-flight
// count, and finishes the call.
func (r *relay) release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cut.Load() {
		r.c.touch(r.w, 0, true)
	}
	fasthttp.ReleaseResponse(r.resp)
	r.w.Release()
	r.c.finish()
}
