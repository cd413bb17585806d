package fakeengine

import (
	"context"
	"time"
)

// sink delivers one answer over one transport. The same fault logic drives all three.
type sink interface {
	// start sends the status and content type; size is the body length of a non-streamed answer
	// and -1 for a stream.
	start(status int, contentType string, size int) error
	// send delivers one SSE payload of a stream, or a piece of a body.
	send(p []byte) error
	// cut breaks the answer the way the transport breaks: a dropped connection, an aborted
	// stream. Its error is what serve returns.
	cut() error
}

// modelRequest is a model request as every transport hands it over.
type modelRequest struct {
	route   string
	body    []byte
	stream  bool // the transport's own flag (gRPC, ZMQ), or'ed with the body's "stream"
	gateway string
}

// serve answers one model request through the faults and the compute model: count it, hang,
// wait latency_ms, maybe fail with error_status, then wait for a slot and the prefill
// (Compute), and deliver the answer, each output token after the first taking the decode time,
// cut after cut_stream_after chunks. It returns the context's error when the client went away,
// ErrClosed when the engine closed, or what the sink returned.
func (e *Engine) serve(ctx context.Context, req modelRequest, out sink) error {
	e.stats.countRequest(req.gateway)
	f, err := e.waitWhile(ctx, func(f Faults) bool { return f.Hang })
	if err != nil {
		return err
	}
	if err := e.sleep(ctx, nil, f.LatencyMS); err != nil {
		return err
	}
	if f.ErrorStatus != 0 && e.roll(f.ErrorRate) {
		return deliverBody(faultReply(f.ErrorStatus), false, out)
	}
	p, bad := e.parse(req.route, req.body, req.stream)
	if bad != nil {
		return deliverBody(*bad, false, out)
	}
	u, err := e.admit(ctx, p.text)
	if err != nil {
		return err
	}
	defer e.finish(u)
	r := e.plan(p, f.StreamChunks, u)
	if r.events == nil {
		if err := e.sleepFor(ctx, nil, e.decodeTime(r.tokens)); err != nil {
			return err
		}
		if f.CutStreamAfter == 0 {
			e.cacheAnswer(r.sequence) // before the client can read the answer and send the next turn
		}
		return deliverBody(r, f.CutStreamAfter > 0, out)
	}
	return e.deliverStream(ctx, r, f, out)
}

// deliverBody sends a non-streamed answer; cut sends only its first half, then breaks.
func deliverBody(r reply, cut bool, out sink) error {
	if err := out.start(r.status, r.contentType, len(r.body)); err != nil {
		return err
	}
	if !cut {
		return out.send(r.body)
	}
	if err := out.send(r.body[:len(r.body)/2]); err != nil {
		return err
	}
	return out.cut()
}

// deliverStream sends the events chunk_delay_ms apart (content chunks after the first also a
// decode time apart), on a schedule set when the first is sent, then [DONE]; with
// cut_stream_after = N it breaks right after the Nth chunk, before [DONE] at the latest.
func (e *Engine) deliverStream(ctx context.Context, r reply, f Faults, out sink) error {
	if err := out.start(r.status, r.contentType, -1); err != nil {
		return err
	}
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	// Each event is due a fixed time after the one before, counted from when that one was
	// due, not from when its send ended: as an engine decodes beside its sending, a slow send
	// (a busy machine) delays the events behind it but does not slow the decode down.
	decode := e.cfg.Compute.DecodePerToken
	due := time.Now()
	for i := 0; i <= len(r.events); i++ {
		if i > 0 {
			due = due.Add(time.Duration(f.ChunkDelayMS) * time.Millisecond)
		}
		if i > 0 && i < r.tokens {
			due = due.Add(decode)
		}
		if err := e.sleepFor(ctx, &t, time.Until(due)); err != nil {
			return err
		}
		ev := doneEvent
		if i < len(r.events) {
			ev = r.events[i]
		} else {
			e.cacheAnswer(r.sequence) // finished: before [DONE], after which the next turn may come
		}
		if err := out.send(ev); err != nil {
			return err
		}
		if f.CutStreamAfter > 0 && i+1 == min(f.CutStreamAfter, len(r.events)) {
			return out.cut()
		}
	}
	return nil
}

// waitWhile waits while hold holds for the current knobs, waking on every fault change, and
// returns the knobs that released it.
func (e *Engine) waitWhile(ctx context.Context, hold func(Faults) bool) (Faults, error) {
	if st := e.state.Load(); !hold(st.f) {
		return st.f, nil
	}
	e.hanging.Add(1)
	defer e.hanging.Add(-1)
	for {
		st := e.state.Load()
		if !hold(st.f) {
			return st.f, nil
		}
		select {
		case <-st.changed:
		case <-ctx.Done():
			return st.f, ctx.Err()
		case <-e.done:
			return st.f, ErrClosed
		}
	}
}

// sleep waits ms milliseconds, or less if ctx ends or the engine closes. A non-nil *t is reused
// between calls.
func (e *Engine) sleep(ctx context.Context, t **time.Timer, ms int) error {
	return e.sleepFor(ctx, t, time.Duration(ms)*time.Millisecond)
}
