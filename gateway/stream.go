package gateway

import (
	"errors"
	"io"
	"runtime/debug"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
)

// relay streams an upstream SSE answer to the client. A reader goroutine reads the upstream
// body into a relayPipe; the writer (fasthttp's connection goroutine, through WriteTo) takes all
// that is pending and writes it as one flushed chunk. So an event that stands alone is written
// at once, and events that arrived while the previous write was under way share the next write,
// as a proxy that reads all that is buffered would send them. If the upstream fails after the
// status was sent, the stream ends with an SSE error event carrying code 502; the answer is
// never retried then.
//
// The relay is the answer's body stream: fasthttp calls WriteTo and then Close. Close stops the
// reader, interrupting a blocked upstream read when the client went away mid-stream; a client
// that leaves while the upstream is silent is noticed by a clientWatch. The call
// is finished when both sides are done. A relay lives inside its pooled call and draws its
// buffers from relayBufs, so a stream allocates little of its own.
type relay struct {
	c     *call
	w     *pool.Worker
	resp  *fasthttp.Response
	body  io.Reader
	refs  atomic.Int32 // the reader and the writer; the last one out finishes the call
	pipe  relayPipe
	watch clientWatch
	rest  []byte // Read only: the part of the last take not yet returned
}

// errClientGone ends a relay whose client closed its connection while the upstream was silent.
var errClientGone = errors.New("the client closed its connection mid-stream")

// startRelay makes resp's body the client's answer body, read by a new reader goroutine.
func (c *call) startRelay(w *pool.Worker, resp *fasthttp.Response) {
	r := &c.relay
	r.c, r.w, r.resp, r.body, r.rest = c, w, resp, resp.BodyStream(), nil
	r.pipe.open()
	c.tail.Reset()
	r.refs.Store(2)
	r.watch.arm(c.ctx.Conn(), c.g.cfg.clientWatchAfter, &r.pipe, c.g.log)
	c.ctx.Response.ImmediateHeaderFlush = true
	c.ctx.Response.SetBodyStream(r, -1)
	c.streaming = true
	go r.read()
}

// read moves the upstream body into the pipe until it ends, fails or the writer quits. Each
// read is also kept in the call's tail once the writer has it, and at the upstream's end the
// tail's usage report is counted, so reading it adds nothing to the time an event takes.
func (r *relay) read() {
	defer r.release()
	buf := getRelayBuf()[:relayReadSize]
	defer func() { putRelayBuf(buf) }()
	defer func() {
		if p := recover(); p != nil {
			r.c.g.log.Error("stream relay panicked", "panic", p, "stack", string(debug.Stack()))
			r.pipe.add(nil, io.ErrUnexpectedEOF)
		}
	}()
	for {
		n, err := r.body.Read(buf)
		if n == 0 && err == nil {
			continue
		}
		more := r.pipe.add(buf[:n], err)
		r.c.tail.Write(buf[:n])
		if err == io.EOF {
			observeUsage(r.w, r.c.tail.Bytes())
		}
		if !more || !r.pipe.waitSpace() {
			return
		}
	}
}

// SupportsBodyWriteTo tells fasthttp to hand its chunk writer to WriteTo.
func (r *relay) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the stream to dst: each Write there is one chunk, flushed.
func (r *relay) WriteTo(dst io.Writer) (int64, error) {
	var total int64
	for {
		b, ended := r.pipe.take()
		if len(b) > 0 {
			n, err := dst.Write(b)
			total += int64(n)
			if err != nil {
				return total, err
			}
		}
		if ended {
			return total, nil
		}
		if len(b) == 0 {
			return total, errClientGone
		}
	}
}

// Read is fasthttp's fallback when it does not use WriteTo: the same stream, through p.
func (r *relay) Read(p []byte) (int, error) {
	for len(r.rest) == 0 {
		b, ended := r.pipe.take()
		r.rest = b
		switch {
		case len(b) > 0:
		case ended:
			return 0, io.EOF
		default:
			return 0, errClientGone
		}
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// Close ends the relay from the writer side: it stops the reader (interrupting a blocked
// upstream read when the client went away) and releases the writer's reference. fasthttp
// calls it once, after WriteTo.
func (r *relay) Close() error {
	r.watch.stop()
	if r.pipe.stop() {
		_ = r.resp.CloseBodyStream()
	}
	r.release()
	return nil
}

// release drops one reference; the last one closes the upstream answer, returns the worker's
// in-flight count and the buffers, and finishes the call.
func (r *relay) release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	c, w, resp, cut := r.c, r.w, r.resp, r.pipe.cut
	r.pipe.free()
	r.c, r.w, r.resp, r.body, r.rest = nil, nil, nil, nil, nil
	_ = resp.CloseBodyStream()
	fasthttp.ReleaseResponse(resp)
	w.Release()
	if cut {
		c.touch(w, 0, true)
	}
	c.finish()
}
