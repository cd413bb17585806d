package gateway

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/reqmeta"
	"github.com/meshgw/meshgw/worker"
)

// The request log (Config.RequestLog, --request-log): one record per model request at INFO, as
// the SGLang-Omni router writes them. route_completed when a worker was tried (it answered,
// failed or timed out); route_rejected when the gateway answered without trying one (no
// routable worker, the admission limit, a body too large or unreadable).
const (
	msgRouteCompleted = "route_completed"
	msgRouteRejected  = "route_rejected"
)

// Outcomes of the request log.
const (
	outcomeSuccess            = "success"              // the worker answered below 400
	outcomeClientError        = "client_error"         // the worker answered 4xx
	outcomeUpstreamError      = "upstream_error"       // 5xx from the worker, or no answer (502)
	outcomeTimeout            = "timeout"              // no answer within the request timeout (504)
	outcomeStreamInterrupted  = "stream_interrupted"   // the stream was cut after its status was sent
	outcomeNoAvailableWorkers = "no_available_workers" // nothing routable for the request
	outcomeOverloaded         = "overloaded"           // the in-flight limit (--max-connections), or the body budget's (--max-buffered-body-mb)
	outcomeTooLarge           = "payload_too_large"    // the body passed --max-payload-size
	outcomeInvalidRequest     = "invalid_request"      // the body or a hint header was refused
	outcomeDraining           = "draining"             // the gateway left the mesh after its drain (LeaveMesh)
)

// logRequest writes the request's record, made at now. It runs in finish, before the call is
// recycled, which reads the clock once for the record and the metrics.
func (c *call) logRequest(now time.Time) {
	g := c.g
	d := now.Sub(c.start)
	caps := capsString(c.meta.Caps)
	if c.lastW == nil {
		outcome := c.rejected
		if outcome == "" {
			outcome = rejectOutcome(c.status)
		}
		e := g.startRecord(msgRouteRejected, now)
		e.bytes("request_id", c.reqID)
		e.str("path", c.route.Path())
		e.flag("stream", c.meta.Stream)
		e.str("capabilities", caps)
		e.num("status", c.status)
		e.float("duration_ms", ms(d))
		e.str("outcome", outcome)
		g.writeRecord(e)
		return
	}
	e := g.startRecord(msgRouteCompleted, now)
	e.bytes("request_id", c.reqID)
	e.str("worker", c.lastW.URL)
	e.str("path", c.route.Path())
	e.bytes("model", c.meta.Model)
	e.flag("stream", c.meta.Stream)
	e.str("capabilities", caps)
	e.num("status", c.status)
	e.num("attempts", c.attempt)
	e.float("duration_ms", ms(d))
	e.str("outcome", c.outcome())
	g.writeRecord(e)
}

// startRecord begins a record of the request log, made at t: formatted by hand for
// Config.RequestLogWriter, else as attributes for Config.RequestLogger.
func (g *Gateway) startRecord(msg string, t time.Time) *recordEncoder {
	e := encoderPool.Get().(*recordEncoder)
	e.b, e.attrs = e.b[:0], e.attrs[:0]
	e.json, e.toSlog = g.cfg.RequestLogJSON, g.cfg.RequestLogWriter == nil
	e.begin(t, msg)
	return e
}

// writeRecord writes the record and recycles its encoder. Neither way reports a failure: the
// log's output has nowhere to report it.
func (g *Gateway) writeRecord(e *recordEncoder) {
	if e.toSlog {
		// A record built here, where Logger.LogAttrs would also capture the caller's program
		// counter, which no handler of meshgw prints (AddSource is off).
		if h := g.reqLog.Handler(); h.Enabled(context.Background(), slog.LevelInfo) {
			r := slog.NewRecord(e.t, slog.LevelInfo, e.msg, 0)
			r.AddAttrs(e.attrs...)
			_ = h.Handle(context.Background(), r)
		}
		clear(e.attrs)
	} else {
		e.end()
		_, _ = g.cfg.RequestLogWriter.Write(e.b)
	}
	if cap(e.b) <= 4<<10 {
		encoderPool.Put(e)
	}
}

// capsText caches the request log's capabilities field, one string per set of capabilities.
var capsText [worker.CapAll + 1]atomic.Pointer[string]

// capsString returns caps.String(), made once per set.
func capsString(caps worker.Capability) string {
	if int(caps) >= len(capsText) {
		return caps.String()
	}
	if s := capsText[caps].Load(); s != nil {
		return *s
	}
	s := caps.String()
	capsText[caps].Store(&s)
	return s
}

// outcome classifies a request a worker was tried for.
func (c *call) outcome() string {
	switch {
	case c.status == fasthttp.StatusGatewayTimeout && c.lastTouchFailed():
		return outcomeTimeout
	case c.status >= 500:
		return outcomeUpstreamError
	case c.status >= 400:
		return outcomeClientError
	case c.lastTouchFailed(): // a 2xx status was sent, then the answer was cut
		return outcomeStreamInterrupted
	}
	return outcomeSuccess
}

// lastTouchFailed reports whether the last worker tried gave no (complete) answer.
func (c *call) lastTouchFailed() bool {
	for i := 0; i < c.nTouch; i++ {
		if c.touched[i].w == c.lastW {
			return c.touched[i].connErr
		}
	}
	return false
}

// rejectOutcome classifies a request the gateway answered without trying a worker.
func rejectOutcome(status int) string {
	switch status {
	case fasthttp.StatusServiceUnavailable:
		return outcomeNoAvailableWorkers
	case fasthttp.StatusRequestEntityTooLarge:
		return outcomeTooLarge
	}
	return outcomeInvalidRequest
}

// logShed writes the route_rejected record of a request refused before a call began, which
// started at start (the request's ctx.Time()).
func (g *Gateway) logShed(path string, id []byte, status int, start time.Time, outcome string) {
	now := time.Now()
	e := g.startRecord(msgRouteRejected, now)
	e.bytes("request_id", id)
	e.str("path", path)
	e.num("status", status)
	e.float("duration_ms", ms(now.Sub(start)))
	e.str("outcome", outcome)
	g.writeRecord(e)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// requestID appends to dst the id of a request refused before its headers were prepared: the
// client's X-Request-Id, else a fresh one.
func (g *Gateway) requestID(ctx *fasthttp.RequestCtx, dst []byte) []byte {
	if v := ctx.Request.Header.PeekCanonical(keyClientID); len(v) > 0 {
		return append(dst, v...)
	}
	return g.reqID.appendNext(dst)
}

// shed stamps the request id and the gateway on an answer written before a call began (the
// admission limit, a declared body too large), and logs its route_rejected record.
func (g *Gateway) shed(ctx *fasthttp.RequestCtx, route reqmeta.Route, status int, outcome string) {
	var buf [64]byte
	id := g.stampID(ctx, buf[:0])
	if g.cfg.RequestLog {
		g.logShed(route.Path(), id, status, ctx.Time(), outcome)
	}
}

// stampID sets the request id (X-Mesh-Request-Id, and X-Request-Id, which OpenAI's SDKs read)
// and the gateway on an answer the gateway makes without a call (a refusal before one began,
// GET /v1/models), and returns the id, appended to dst.
func (g *Gateway) stampID(ctx *fasthttp.RequestCtx, dst []byte) []byte {
	id := g.requestID(ctx, dst)
	h := &ctx.Response.Header
	h.SetCanonical(keyRequestID, id)
	h.SetCanonical(keyClientID, id)
	h.SetCanonical(keyGateway, g.nodeID)
	return id
}
