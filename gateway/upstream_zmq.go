package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/zmqlink"
)

// zmqTransport sends model requests to a ZMQ worker over its zmqlink.Link (docs/zmq-framing.md):
// one link per worker, closed when the pool drops the worker, once the requests in flight on it
// have ended. The link is also the worker's health probe (Check).
type zmqTransport struct {
	drainClose
	link *zmqlink.Link
	// welcomed is set once a Check has passed: the first handshake is done.
	welcomed atomic.Bool
}

// newZMQTransport dials (in the background) the engine at url, tcp://HOST:PORT or ipc:///PATH.
func (g *Gateway) newZMQTransport(url string) rpcTransport {
	l, err := zmqlink.Dial(url, g.cfg.NodeID, zmqlink.WithLogger(g.log))
	if err != nil {
		return brokenTransport{err: err}
	}
	t := &zmqTransport{link: l}
	t.closeFn = func() { _ = l.Close() }
	return t
}

func (t *zmqTransport) open(ctx context.Context, req *rpcRequest) (rpcStream, error) {
	if !t.acquire() {
		return nil, errTransportClosed
	}
	st, err := t.link.Do(ctx, zmqlink.Request{Route: req.route, Body: req.body, Stream: req.stream, RequestID: req.requestID})
	if err != nil {
		t.release()
		return nil, err
	}
	return &zmqStream{t: t, st: st}, nil
}

// statusOf is the status an engine's ERROR stands for; a link that is not ready or was lost
// gave no answer.
func (t *zmqTransport) statusOf(err error) int {
	var ee *zmqlink.EngineError
	if !errors.As(err, &ee) {
		return 0
	}
	if ee.Status != 0 {
		return ee.Status
	}
	switch ee.Code {
	case zmqlink.CodeBadRequest:
		return 400
	case zmqlink.CodeOverloaded:
		return 429
	case zmqlink.CodeUnavailable, zmqlink.CodeNoSession:
		return 503
	}
	return 500
}

// zmqHandshakeWait is how often a probe looks again while the first handshake is under way.
const zmqHandshakeWait = 20 * time.Millisecond

// check is the link's local check. Until the first handshake is done, it waits for it (within
// the probe's timeout) rather than failing at once, since the probe of a newly added worker
// starts while its link is still dialing: the worker then becomes ready when the handshake
// completes, not one probe interval later.
func (t *zmqTransport) check(ctx context.Context) error {
	for {
		err := t.link.Check(ctx)
		if err == nil {
			t.welcomed.Store(true)
			return nil
		}
		if t.welcomed.Load() || !errors.Is(err, zmqlink.ErrNotReady) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(zmqHandshakeWait):
		}
	}
}

// zmqStream is one request's answer.
type zmqStream struct {
	t    *zmqTransport
	st   *zmqlink.Stream
	once sync.Once
}

func (s *zmqStream) next() (rpcChunk, error) {
	c, err := s.st.Next()
	if err != nil {
		return rpcChunk{}, err
	}
	return rpcChunk{status: c.Status, contentType: c.ContentType, data: c.Data}, nil
}

// close abandons an unfinished answer (the engine is sent CANCEL) and releases the link.
func (s *zmqStream) close() {
	s.once.Do(func() {
		_ = s.st.Close()
		s.t.release()
	})
}

// errNoLocalCheck: only ZMQ workers have a local check.
var errNoLocalCheck = errors.New("the worker has no local check")

// Check is the health probe of a ZMQ worker: its link's local check (handshake done, heartbeats
// fresh), which sends nothing to the engine and reconnects a restarted one. gateway/owned calls
// it through the pool's transport.
func (u *upstream) Check(ctx context.Context) error {
	u.ready()
	z, ok := u.rpc.(*zmqTransport)
	if !ok {
		return errNoLocalCheck
	}
	return z.check(ctx)
}
