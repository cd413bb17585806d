package gateway

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
)

// rpcTransport carries model requests to a worker that does not speak HTTP (gRPC, ZMQ): the
// same OpenAI-style JSON, answered by a stream of chunks.
type rpcTransport interface {
	// open sends req; the answer ends when ctx does.
	open(ctx context.Context, req *rpcRequest) (rpcStream, error)
	// statusOf is the HTTP status an error of open or next stands for (a gRPC status mapped by
	// breaker.HTTPStatusFromGRPC, an engine error's status), or 0 when the worker gave no
	// answer at all.
	statusOf(err error) int
	// close releases the worker's connection once the requests in flight on it have ended.
	close()
}

// rpcRequest is one model request as a non-HTTP worker receives it.
type rpcRequest struct {
	route     string
	body      []byte
	stream    bool
	requestID string
	gateway   string
	auth      string // "Bearer <key>": the worker's key, else the client's Authorization
}

// rpcStream is one answer: its first chunk carries the status and the content type. For an SSE
// answer each chunk is the payload of one event; otherwise the chunks concatenate to the body.
type rpcStream interface {
	next() (rpcChunk, error) // io.EOF after the last chunk
	close()
}

type rpcChunk struct {
	status      int
	contentType string
	data        []byte
}

// tryRPC makes one attempt on a gRPC or ZMQ worker. Nothing reaches the client before the first
// chunk has been judged, so an attempt that fails before it may be retried; a streamed answer is
// relayed event by event, and one that breaks after that ends with an SSE error event.
func (c *call) tryRPC(w *pool.Worker, up *upstream, attempt int, final bool) result {
	ctx, cancel := context.WithTimeout(context.Background(), c.g.cfg.RequestTimeout)
	w.Acquire()
	st, first, err := c.openRPC(ctx, up)
	if err != nil {
		cancel()
		w.Release()
		return c.rpcFailed(w, up, attempt, final, err, errors.Is(ctx.Err(), context.DeadlineExceeded))
	}
	status := first.status
	if status == 0 {
		status = fasthttp.StatusOK
	}
	c.touch(w, status, false)
	if !final && retryableStatus(status) {
		st.close()
		cancel()
		w.Release()
		return result{status: status}
	}
	ct := first.contentType
	if ct == "" {
		ct = "application/json"
	}
	resp := &c.ctx.Response
	if c.meta.Stream && isEventStream([]byte(ct)) {
		resp.Reset()
		resp.SetStatusCode(status)
		resp.Header.SetContentType(ct)
		resp.Header.Set(fasthttp.HeaderCacheControl, "no-cache")
		c.commit(w, attempt, status)
		c.tail.Reset()
		c.tail.Write(first.data)
		resp.ImmediateHeaderFlush = true
		resp.SetBodyStream(&rpcRelay{c: c, w: w, st: st, cancel: cancel, pending: sseEvent(nil, first.data)}, -1)
		c.streaming = true
		return result{status: status, done: true}
	}
	body, err := collect(st, first.data)
	st.close()
	cancel()
	w.Release()
	if err != nil { // the answer broke before anything was sent: retry as if there were none
		c.touch(w, 0, true)
		return result{connErr: true}
	}
	resp.Reset()
	resp.SetStatusCode(status)
	resp.Header.SetContentType(ct)
	resp.SetBodyRaw(body)
	c.commit(w, attempt, status)
	observeUsage(w, body)
	return result{status: status, done: true}
}

// openRPC sends the request and waits for the first chunk.
func (c *call) openRPC(ctx context.Context, up *upstream) (rpcStream, rpcChunk, error) {
	req := &rpcRequest{route: string(c.ctx.Path()), body: c.ctx.Request.Body(), stream: c.meta.Stream,
		requestID: string(c.reqID), gateway: c.g.cfg.NodeID}
	switch {
	case up.auth != nil:
		req.auth = string(up.auth)
	case c.hasAuth:
		req.auth = string(c.clientAuth)
	}
	st, err := up.rpc.open(ctx, req)
	if err != nil {
		return nil, rpcChunk{}, err
	}
	first, err := st.next()
	if err != nil {
		st.close()
		if errors.Is(err, io.EOF) {
			err = errEmptyAnswer
		}
		return nil, rpcChunk{}, err
	}
	return st, first, nil
}

var (
	errEmptyAnswer     = errors.New("the worker ended its answer before sending anything")
	errTransportClosed = errors.New("the worker's connection is closed")
)

// drainClose closes a worker's connection (closeFn) once it is closed and the requests in flight
// on it have ended, so that a worker replaced by a PATCH or removed lets its answers finish.
type drainClose struct {
	closeFn func()
	mu      sync.Mutex
	inUse   int
	closing bool
}

// acquire counts a request on the connection; false once it is closing.
func (d *drainClose) acquire() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	d.inUse++
	return true
}

// release ends a request counted by acquire.
func (d *drainClose) release() {
	d.mu.Lock()
	d.inUse--
	last := d.closing && d.inUse == 0
	d.mu.Unlock()
	if last {
		d.closeFn()
	}
}

func (d *drainClose) close() {
	d.mu.Lock()
	already := d.closing
	d.closing = true
	idle := d.inUse == 0
	d.mu.Unlock()
	if !already && idle {
		d.closeFn()
	}
}

// rpcFailed judges an attempt whose answer never started: no answer at all, or an error status
// (passed to the client on the last attempt).
// timeout says the attempt ran past the request timeout.
func (c *call) rpcFailed(w *pool.Worker, up *upstream, attempt int, final bool, err error, timeout bool) result {
	status := up.rpc.statusOf(err)
	if status == 0 || timeout {
		return c.noAnswer(w, timeout)
	}
	c.touch(w, status, false)
	if !final && retryableStatus(status) {
		return result{status: status}
	}
	writeError(c.ctx, status, envelope(status, typeUpstream, "upstream answered "+strconv.Itoa(status)))
	c.commit(w, attempt, status)
	return result{status: status, done: true}
}

// collect reads the rest of a non-streamed answer after its first chunk.
func collect(st rpcStream, first []byte) ([]byte, error) {
	body := append([]byte(nil), first...)
	for {
		ch, err := st.next()
		if errors.Is(err, io.EOF) {
			return body, nil
		}
		if err != nil {
			return nil, err
		}
		body = append(body, ch.data...)
	}
}

// sseEvent appends "data: <payload>\n\n" to dst.
func sseEvent(dst, payload []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, payload...)
	return append(dst, "\n\n"...)
}

// rpcRelay is the body stream of a streamed RPC answer: each chunk becomes one SSE event, written
// (and flushed by fasthttp) as one chunk of the client's answer. fasthttp calls WriteTo, then
// Close, which ends the RPC, releases the worker and finishes the call.
type rpcRelay struct {
	c       *call
	w       *pool.Worker
	st      rpcStream
	cancel  context.CancelFunc
	pending []byte // the event not yet handed over
	done    bool   // the answer has ended (io.EOF, or a cut)
	cut     bool   // the upstream failed mid-stream
	once    sync.Once
}

// SupportsBodyWriteTo tells fasthttp to hand its chunk writer to WriteTo.
func (r *rpcRelay) SupportsBodyWriteTo() bool { return true }

// fill makes pending the next event to write; false when the answer has ended.
func (r *rpcRelay) fill() bool {
	if len(r.pending) > 0 {
		return true
	}
	if r.done {
		return false
	}
	ch, err := r.st.next()
	switch {
	case errors.Is(err, io.EOF):
		r.done = true
		observeUsage(r.w, r.c.tail.Bytes())
		return false
	case err != nil:
		r.done, r.cut = true, true
		r.pending = append(r.pending[:0], sseUpstreamError...)
		return true
	}
	r.pending = sseEvent(r.pending[:0], ch.data)
	r.c.tail.Write(ch.data)
	return true
}

// WriteTo writes one event per Write on dst, so each is flushed at once.
func (r *rpcRelay) WriteTo(dst io.Writer) (int64, error) {
	var total int64
	for r.fill() {
		n, err := dst.Write(r.pending)
		total += int64(n)
		r.pending = r.pending[:0]
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Read is the fallback when fasthttp does not use WriteTo.
func (r *rpcRelay) Read(p []byte) (int, error) {
	if !r.fill() {
		return 0, io.EOF
	}
	n := copy(p, r.pending)
	r.pending = r.pending[:copy(r.pending, r.pending[n:])]
	return n, nil
}

// Close ends the RPC (an unfinished answer is canceled: the client went away) and finishes the
// call; a cut stream counts as no answer for the worker's breaker.
func (r *rpcRelay) Close() error {
	r.once.Do(func() {
		r.st.close()
		r.cancel()
		if r.cut {
			r.c.touch(r.w, 0, true)
		}
		r.w.Release()
		r.c.finish()
	})
	return nil
}
