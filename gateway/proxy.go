package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unique"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/locality"
	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/reqmeta"
	"github.com/meshgw/meshgw/gateway/usage"
)

// maxTouched bounds the distinct workers whose outcome one request reports; attempts are capped
// well below it in practice.
const maxTouched = 16

type touch struct {
	w       *pool.Worker
	status  int
	connErr bool
	attempt int
}

// call is one model request in flight, pooled so the hot path allocates nothing of its own.
type call struct {
	g     *Gateway
	ctx   *fasthttp.RequestCtx
	route reqmeta.Route
	start time.Time // when the server took the request (ctx.Time: fasthttp read the clock already)
	meta  reqmeta.Meta
	body  *[]byte
	// reserved is the share of the body budget the request holds; streamed says its body is
	// larger than the whole budget and goes to the worker as it arrives, through sbody.
	reserved int64
	streamed bool
	sbody    streamedBody
	// rejected is the request log's outcome of a refusal its status does not tell apart (a 503
	// for the body budget, not for want of workers); "" otherwise.
	rejected string
	cands    []*pool.Worker
	preq     policy.Request
	touched  [maxTouched]touch
	nTouch   int
	status   int
	// streaming is set once a relay owns the answer; it then calls finish.
	streaming bool
	relay     relay // the SSE relay of a streamed HTTP answer
	// tail is the end of a streamed answer, read for the engine's usage report when it ends.
	tail    usage.Tail
	lastW   *pool.Worker
	attempt int
	hdr     reqHeaders // what the pass over the request's headers found
	// owned copies of header values the request's header edits would invalidate
	model, key, reqID, clientAuth []byte
	hasAuth                       bool
	authSet                       bool // an attempt set Authorization to a worker's key
	madeID                        bool // the gateway made the request id up (providers do not get it)
	attemptBuf                    [4]byte
	scratch                       []byte // values being copied into a header

	// tally counts the workers by region, and candRegions holds each candidate's region index
	// in it, with locality routing on.
	tally       locality.Tally[unique.Handle[string]]
	candRegions []int
}

var callPool = sync.Pool{New: func() any { return &call{cands: make([]*pool.Worker, 0, 64)} }}

// serveModel handles a POST on a model route.
func (g *Gateway) serveModel(ctx *fasthttp.RequestCtx, route reqmeta.Route) {
	if !ctx.IsPost() {
		writeError(ctx, fasthttp.StatusMethodNotAllowed, bodyMethod)
		g.stampID(ctx, nil)
		return
	}
	switch earlyVerdict(ctx) {
	case earlyLeft:
		g.writeLeft(ctx, int(route))
		g.closeLingering(ctx) // the body is unread
		return
	case earlyTooLarge:
		writeError(ctx, fasthttp.StatusRequestEntityTooLarge, bodyTooLarge(g.cfg.MaxPayload))
		g.metrics.observe(int(route), fasthttp.StatusRequestEntityTooLarge, 0)
		g.shed(ctx, route, fasthttp.StatusRequestEntityTooLarge, outcomeTooLarge)
		g.closeLingering(ctx) // the body is unread
		return
	case earlyOverloaded:
		g.writeOverloaded(ctx, route)
		g.closeLingering(ctx)
		return
	}
	if !g.adm.acquire() {
		g.writeOverloaded(ctx, route)
		return
	}
	c := callPool.Get().(*call)
	c.g, c.ctx, c.route, c.start, c.status, c.nTouch, c.streaming = g, ctx, route, ctx.Time(), 0, 0, false
	if c.begin() {
		c.proxy()
	}
	c.dropBody()
	if !c.streaming {
		c.finish()
	}
}

func (g *Gateway) writeOverloaded(ctx *fasthttp.RequestCtx, route reqmeta.Route) {
	writeError(ctx, fasthttp.StatusServiceUnavailable, bodyOverloaded)
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
	g.metrics.observe(int(route), fasthttp.StatusServiceUnavailable, 0)
	g.shed(ctx, route, fasthttp.StatusServiceUnavailable, outcomeOverloaded)
}

// begin reads and parses the body and prepares the upstream request; false means an error
// answer was written.
func (c *call) begin() bool {
	ctx := c.ctx
	c.body = bodyPool.Get().(*[]byte)
	body, err := c.readBody()
	*c.body = body
	if err != nil {
		// The rest of the body is unread: the connection closes after the answer.
		switch {
		case errors.Is(err, errTooLarge):
			c.fail(fasthttp.StatusRequestEntityTooLarge, bodyTooLarge(c.g.cfg.MaxPayload))
			c.g.closeLingering(ctx)
		case errors.Is(err, errOverBudget):
			c.fail(fasthttp.StatusServiceUnavailable, bodyBudgetFull)
			ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
			c.rejected = outcomeOverloaded
			c.g.closeLingering(ctx)
		default: // the client's connection broke
			c.fail(fasthttp.StatusBadRequest, envelope(400, typeInvalidRequest, "cannot read the request body"))
			ctx.SetConnectionClose() // after fail, which resets the answer
		}
		return false
	}
	h := &ctx.Request.Header
	c.hdr.scan(h)
	if !c.route.JSON() {
		c.hdr.hints.Boundary = h.MultipartFormBoundary()
	}
	parse := reqmeta.Parse
	if c.streamed {
		parse = reqmeta.ParsePrefix
	}
	err = parse(&c.meta, c.route, body, c.hdr.hints)
	if err == nil && (c.meta.UnreadModel || c.meta.UnreadCaps != 0) {
		if e := c.checkUnread(); e != nil {
			err = e
		}
	}
	if err != nil {
		c.fail(fasthttp.StatusBadRequest, envelope(400, typeInvalidRequest, err.Error()))
		return false
	}
	c.model = append(c.model[:0], c.meta.Model...)
	c.meta.Model = c.model
	c.key = append(c.key[:0], c.hdr.routingKey...)
	if len(c.key) == 0 {
		c.key = append(c.key, c.hdr.smgKey...)
	}
	c.preq = policy.Request{RoutingKey: c.key, Prompt: c.meta.Prompt, Model: c.model}
	if !c.streamed {
		ctx.Request.SetBodyRaw(body)
	}
	c.prepareHeaders(h)
	return true
}

// prepareHeaders strips hints and hop-by-hop headers and stamps what the worker should see.
// The values c.hdr points to are copied first: the edits invalidate them.
func (c *call) prepareHeaders(h *fasthttp.RequestHeader) {
	generateID := len(c.hdr.requestID) == 0
	c.madeID = generateID
	if generateID {
		c.reqID = c.g.reqID.appendNext(c.reqID[:0])
	} else {
		c.reqID = append(c.reqID[:0], c.hdr.requestID...)
	}
	c.hasAuth, c.authSet = c.hdr.hasAuth, false
	c.clientAuth = append(c.clientAuth[:0], c.hdr.auth...)
	c.scratch = strip(h, c.hdr.strip, c.hdr.connection, c.scratch)
	c.hdr = reqHeaders{}
	h.ResetConnectionClose()
	h.SetNoDefaultContentType(true) // a request without a Content-Type is passed on without one
	h.SetCanonical(keyGateway, c.g.nodeID)
	if generateID {
		h.SetCanonical(keyClientID, c.reqID)
	}
}

// result is how one attempt ended.
type result struct {
	status  int  // upstream status, 0 when there was none
	connErr bool // no answer
	timeout bool // no answer within the request timeout
	done    bool // the answer is committed; nothing more to do
}

// maxReselects bounds the selections one attempt makes again because the picked worker's gate
// closed in between.
const maxReselects = 3

// proxy runs the attempts: each selects a worker again, preferring one other than the worker
// that just failed, and backs off between attempts.
func (c *call) proxy() {
	g := c.g
	maxAttempts := g.cfg.Retry.MaxAttempts
	if g.cfg.Retry.Disabled || c.streamed {
		maxAttempts = 1
	}
	var last *pool.Worker
	var res result
	reselects, timeouts := 0, 0
	for attempt := 1; ; attempt++ {
		snap := g.pool.Snapshot()
		closing := c.candidates(snap, last)
		if len(c.cands) == 0 {
			if attempt == 1 {
				c.noWorkers(snap)
				return
			}
			c.giveUp(res)
			return
		}
		w := g.policy.Pick(c.cands, &c.preq)
		// A gate closed since the candidates were read (a disable or quarantine the pool is
		// applying): select again, so that no request starts after a fleet-acknowledged
		// disable returned. Candidates reads the gates too, so one more selection skips it.
		if w.Gates()&closing != 0 && reselects < maxReselects {
			reselects++
			attempt--
			continue
		}
		up := upstreamOf(w)
		limit := up.attemptLimit(maxAttempts)
		res = c.try(w, up, attempt, attempt >= limit)
		if res.done {
			return
		}
		if g.log.Enabled(context.Background(), slog.LevelDebug) {
			g.log.Debug("attempt failed", "worker", w.URL, "attempt", attempt, "status", res.status, "conn_error", res.connErr, "timeout", res.timeout)
		}
		if res.timeout {
			// No answer within the request timeout: the worker may hang. Hold it out of this
			// gateway's routing at once, and try another worker once, since nothing reached
			// the client; a second timeout answers 504, which bounds the wait at two timeouts.
			g.holdHung(w)
			timeouts++
		}
		if attempt >= limit || timeouts > 1 {
			c.giveUp(res)
			return
		}
		g.metrics.retry(w.URL) // made at the first retry, not per worker
		if err := g.cfg.Sleep(c.ctx, backoff(g.cfg.Retry, attempt, randFloat())); err != nil {
			c.giveUp(res)
			return
		}
		last = w
	}
}

// try makes one attempt on w. final means a retryable status is passed to the client as is.
func (c *call) try(w *pool.Worker, up *upstream, attempt int, final bool) result {
	up.ready()
	if up.rpc != nil && c.streamed { // refused by the gateway: no worker was tried
		c.fail(fasthttp.StatusRequestEntityTooLarge, bodyStreamedRPC)
		return result{done: true}
	}
	c.lastW, c.attempt = w, attempt
	if up.rpc != nil {
		return c.tryRPC(w, up, attempt, final)
	}
	req := c.aim(up)
	if c.meta.Stream {
		return c.tryStream(w, up, req, attempt, final)
	}
	ctx := c.ctx
	w.Acquire()
	err := c.client(up).Do(req, &ctx.Response)
	w.Release()
	c.release(req)
	if err != nil {
		ctx.Response.Reset()
		return c.noAnswer(w, errors.Is(err, fasthttp.ErrTimeout))
	}
	st := ctx.Response.StatusCode()
	c.touch(w, st, false)
	if !final && retryableStatus(st) {
		return result{status: st}
	}
	c.commit(w, attempt, st)
	observeUsage(w, ctx.Response.Body())
	return result{status: st, done: true}
}

// noAnswer records that w gave no answer to the attempt (timeout: none within the request
// timeout, as the hang rule counts it, breaker.NoResponseInTime) and returns its result.
func (c *call) noAnswer(w *pool.Worker, timeout bool) result {
	status := breaker.NoResponse
	if timeout {
		status = breaker.NoResponseInTime
	}
	c.touch(w, status, true)
	return result{connErr: true, timeout: timeout}
}

// tryStream makes one attempt whose answer is read as a stream, relayed per SSE event.
func (c *call) tryStream(w *pool.Worker, up *upstream, req *fasthttp.Request, attempt int, final bool) result {
	ctx := c.ctx
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	w.Acquire()
	err := c.client(up).Do(req, resp)
	c.release(req)
	if err != nil {
		w.Release()
		fasthttp.ReleaseResponse(resp)
		return c.noAnswer(w, errors.Is(err, fasthttp.ErrTimeout))
	}
	st := resp.StatusCode()
	c.touch(w, st, false)
	if !final && retryableStatus(st) {
		_ = resp.CloseBodyStream()
		fasthttp.ReleaseResponse(resp)
		w.Release()
		return result{status: st}
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	c.commit(w, attempt, st)
	if isEventStream(resp.Header.ContentType()) {
		c.startRelay(w, resp)
		return result{status: st, done: true}
	}
	// Not an event stream (an error answer, typically): buffer it, nothing has been sent yet.
	_, err = io.Copy(ctx.Response.BodyWriter(), resp.BodyStream())
	_ = resp.CloseBodyStream()
	fasthttp.ReleaseResponse(resp)
	w.Release()
	if err != nil {
		c.touch(w, 0, true)
		c.failAt(fasthttp.StatusBadGateway, bodyUpstream)
	} else {
		observeUsage(w, ctx.Response.Body())
	}
	return result{status: st, done: true}
}

// client is the connection pool this request's attempts at up use.
func (c *call) client(up *upstream) *fasthttp.HostClient {
	if c.streamed {
		return c.g.streamedClient(up)
	}
	return up.hc
}

// aim points the request at the worker: Host, and the worker's API key (or the client's own
// Authorization when the worker has none). An external provider gets a request of its own
// (providerRequest).
func (c *call) aim(up *upstream) *fasthttp.Request {
	if up.provider != nil {
		return c.providerRequest(up)
	}
	req := &c.ctx.Request
	req.URI().SetHost(up.host)
	req.URI().SetScheme(up.scheme)
	switch {
	case up.auth != nil:
		req.Header.SetCanonical(keyAuthorization, up.auth)
		c.authSet = true
	case c.hasAuth:
		if c.authSet { // an earlier attempt replaced the client's
			req.Header.SetCanonical(keyAuthorization, c.clientAuth)
			c.authSet = false
		}
	case c.authSet:
		req.Header.Del(fasthttp.HeaderAuthorization)
		c.authSet = false
	}
	return req
}

// commit finalizes the headers of an upstream answer the client will get.
func (c *call) commit(w *pool.Worker, attempt, status int) {
	h := &c.ctx.Response.Header
	bits, connection := hopHeaders(h)
	c.scratch = strip(h, bits, connection, c.scratch)
	h.ResetConnectionClose()
	c.status = status
	c.stamp(w, attempt)
}

// stamp sets the X-Mesh-* answer headers; w is nil when no worker answered.
func (c *call) stamp(w *pool.Worker, attempt int) {
	h := &c.ctx.Response.Header
	h.SetCanonical(keyRequestID, c.reqID)
	h.SetCanonical(keyClientID, c.reqID) // what OpenAI's SDKs read as the request id
	h.SetCanonical(keyGateway, c.g.nodeID)
	if w == nil {
		return
	}
	c.scratch = append(c.scratch[:0], w.ID...)
	h.SetCanonical(keyWorker, c.scratch)
	h.SetCanonical(keyAttempt, strconv.AppendInt(c.attemptBuf[:0], int64(attempt), 10))
	if owner := w.Owner(); owner != "" {
		c.scratch = append(c.scratch[:0], owner...)
		h.SetCanonical(keyOwner, c.scratch)
	} else {
		h.SetCanonical(keyOwner, c.g.nodeID)
	}
	if region := w.Region(); region != "" { // a worker without a region: no header
		c.scratch = append(c.scratch[:0], region...)
		h.SetCanonical(keyWorkerRegion, c.scratch)
	}
}

// giveUp answers after the last attempt failed without a committed answer.
func (c *call) giveUp(res result) {
	switch {
	case c.sbody.overLimit:
		c.fail(fasthttp.StatusRequestEntityTooLarge, bodyTooLarge(c.g.cfg.MaxPayload))
	case res.timeout:
		c.failAt(fasthttp.StatusGatewayTimeout, bodyTimeout)
	case res.connErr:
		c.failAt(fasthttp.StatusBadGateway, bodyUpstream)
	case !c.meta.Stream && c.ctx.Response.StatusCode() == res.status:
		// The last answer is still in the response: pass it on.
		c.commit(c.lastW, c.attempt, res.status)
	default:
		c.failAt(res.status, envelope(res.status, typeUpstream, "upstream answered "+strconv.Itoa(res.status)))
	}
}

// failAt writes a gateway-made error answer about the last attempt (no answer, a timeout),
// naming its worker and attempt as the worker's own answer would: an operator tells the
// gateway's 502 from a worker's by the body, not by missing headers.
func (c *call) failAt(status int, body []byte) {
	writeError(c.ctx, status, body)
	c.status = status
	c.stamp(c.lastW, c.attempt)
}

// fail writes a gateway-made error answer.
func (c *call) fail(status int, body []byte) {
	writeError(c.ctx, status, body)
	c.status = status
	if len(c.reqID) == 0 { // refused before prepareHeaders
		c.reqID = c.g.requestID(c.ctx, c.reqID)
	}
	c.stamp(nil, 0)
}

// touch records w's latest outcome of the current attempt. Retries on one engine count once,
// its last outcome; an external provider's attempts count each (eachAttempt).
func (c *call) touch(w *pool.Worker, status int, connErr bool) {
	for i := 0; i < c.nTouch; i++ {
		if t := &c.touched[i]; t.w == w && (t.attempt == c.attempt || !eachAttempt(w)) {
			t.status, t.connErr, t.attempt = status, connErr, c.attempt
			return
		}
	}
	if c.nTouch < maxTouched {
		c.touched[c.nTouch] = touch{w, status, connErr, c.attempt}
		c.nTouch++
	}
}

// finish reports outcomes and metrics, releases the admission slot and recycles the call. It
// runs once: at the end of the handler, or when a relayed stream ends.
func (c *call) finish() {
	g := c.g
	now := time.Now()
	if g.cfg.RequestLog {
		c.logRequest(now)
	}
	for i := 0; i < c.nTouch; i++ {
		t := &c.touched[i]
		g.cfg.OnOutcome(t.w, t.status, t.connErr)
		t.w = nil
	}
	g.metrics.observe(int(c.route), c.status, now.Sub(c.start).Seconds())
	if g.locCount != nil && c.lastW != nil {
		g.locCount.inc(c.lastW.Region())
	}
	g.adm.release()
	clear(c.cands[:cap(c.cands)])
	c.ctx, c.g, c.meta, c.preq, c.nTouch, c.lastW, c.rejected = nil, nil, reqmeta.Meta{}, policy.Request{}, 0, nil, ""
	c.reqID = c.reqID[:0]
	c.hdr = reqHeaders{}
	callPool.Put(c)
}

func isEventStream(ct []byte) bool {
	const sse = "text/event-stream"
	return len(ct) >= len(sse) && string(ct[:len(sse)]) == sse
}
