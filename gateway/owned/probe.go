package owned

import (
	"context"
	"maps"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// modes are the Checker's probers: the defaults, replaced by Options.Probers where set, with
// the registration rules of DESIGN.md section 6 wrapped around them.
func (m *Manager) modes() map[string]health.Mode {
	p := map[string]health.Prober{
		worker.ModeHTTP:     &health.HTTPProber{},
		worker.ModeGRPC:     m.grpc,
		worker.ModeExternal: &health.ExternalProber{},
		worker.ModeZMQ:      health.ProberFunc(m.checkLink),
	}
	maps.Copy(p, m.opts.Probers)
	return map[string]health.Mode{
		worker.ModeHTTP:     {Prober: &firstProbe{m: m, inner: p[worker.ModeHTTP]}},
		worker.ModeGRPC:     {Prober: &firstProbe{m: m, inner: p[worker.ModeGRPC]}},
		worker.ModeExternal: {Prober: p[worker.ModeExternal]},
		worker.ModeZMQ:      {Prober: &handshake{m: m, inner: p[worker.ModeZMQ]}, ProbeWhenDisabled: true},
	}
}

// firstProbe makes the first passing probe of a newly owned HTTP or gRPC worker count as
// registration reaching it: the worker becomes ready at once instead of after S passes. A first
// probe that fails leaves it pending, to be judged by the usual S consecutive passes.
type firstProbe struct {
	m     *Manager
	inner health.Prober
}

// Probe implements health.Prober.
func (p *firstProbe) Probe(ctx context.Context, t health.Target) error {
	err := p.inner.Probe(ctx, t)
	if ow := p.m.get(t.ID); ow != nil && ow.fresh.CompareAndSwap(true, false) && err == nil {
		p.m.checker.MarkReached(t.ID)
	}
	return err
}

// Forget passes the Checker's Forget on to the wrapped prober (the gRPC prober closes the
// worker's connection).
func (p *firstProbe) Forget(id worker.ID) { forget(p.inner, id) }

// handshake marks a ZMQ worker reached once its link's local check passes, which means the
// handshake is done: a pending ZMQ worker is ready at once.
type handshake struct {
	m     *Manager
	inner health.Prober
}

// Probe implements health.Prober.
func (p *handshake) Probe(ctx context.Context, t health.Target) error {
	err := p.inner.Probe(ctx, t)
	if err == nil {
		p.m.checker.MarkReached(t.ID) // moves only a pending worker
	}
	return err
}

// Forget passes the Checker's Forget on to the wrapped prober.
func (p *handshake) Forget(id worker.ID) { forget(p.inner, id) }

func forget(p health.Prober, id worker.ID) {
	if f, ok := p.(interface{ Forget(worker.ID) }); ok {
		f.Forget(id)
	}
}

// localChecker is what a ZMQ worker's transport offers: the link's local check (handshake done,
// heartbeats fresh), which sends nothing to the engine and reconnects a restarted one.
type localChecker interface {
	Check(ctx context.Context) error
}

// checkLink is the ZMQ prober: the local check of the link the data plane holds for the worker.
func (m *Manager) checkLink(ctx context.Context, t health.Target) error {
	w := m.pool.Get(t.ID)
	if w == nil {
		return &health.ProbeError{Reason: "not in the pool"}
	}
	lc, ok := w.Transport().(localChecker)
	if !ok {
		return &health.ProbeError{Reason: "no zmq link"}
	}
	if err := lc.Check(ctx); err != nil {
		return &health.ProbeError{Reason: err.Error(), Err: err}
	}
	return nil
}
