package fakeengine

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/meshgw/meshgw/zmqlink"
)

// ZMQOptions configures the ZMQ mode; zero values take the defaults.
type ZMQOptions struct {
	// HeartbeatInterval is how often the engine sends HEARTBEAT (500 ms).
	HeartbeatInterval time.Duration
	// MaxConcurrentRequests is announced in WELCOME and enforced (256).
	MaxConcurrentRequests int
}

// StartZMQ serves the engine side of zmqlink on endpoint (tcp://HOST:PORT, port 0 picks one, or
// ipc:///PATH) and returns the bound endpoint. The control endpoints are not on it: serve them
// with StartControl. A non-2xx health_status stops the heartbeats and refuses new sessions;
// cut_stream_after ends the answer with ERROR engine_error; HELLOs count as probes.
func (e *Engine) StartZMQ(endpoint string, o ZMQOptions) (string, error) {
	srv, err := zmqlink.Listen(endpoint, zmqlink.ServerConfig{
		EngineID:              e.cfg.NodeName,
		Models:                []string{e.cfg.Model},
		MaxConcurrentRequests: o.MaxConcurrentRequests,
		MaxContextLength:      MaxContextLength,
		HeartbeatInterval:     o.HeartbeatInterval,
		Handler:               zmqHandler{e},
		Healthy:               func() bool { return is2xx(e.Faults().HealthStatus) },
		OnHello:               e.stats.countProbe,
		Logger:                e.log,
	})
	if err != nil {
		return "", err
	}
	if err := e.addCloser(srv.Close); err != nil {
		srv.Close()
		return "", err
	}
	if hostPort, ok := strings.CutPrefix(srv.Endpoint(), "tcp://"); ok {
		if addr, err := net.ResolveTCPAddr("tcp", hostPort); err == nil {
			e.nameFromAddr(addr)
		}
	}
	return srv.Endpoint(), nil
}

// zmqHandler answers zmqlink requests through the same fault logic as HTTP.
type zmqHandler struct{ e *Engine }

func (h zmqHandler) ServeZMQ(ctx context.Context, req *zmqlink.ServerRequest, w *zmqlink.ChunkWriter) error {
	err := h.e.serve(ctx, modelRequest{
		route: req.Route, body: req.Body, stream: req.Stream, gateway: req.Gateway,
	}, &zmqSink{w: w})
	if errors.Is(err, errCut) {
		return &zmqlink.EngineError{Code: zmqlink.CodeEngine, Message: "fake engine cut the stream (cut_stream_after)", Status: 502}
	}
	return err
}

// zmqSink sends one CHUNK per SSE payload, or the whole body as one CHUNK; the first carries the
// status and content type.
type zmqSink struct {
	w           *zmqlink.ChunkWriter
	status      int
	contentType string
}

func (s *zmqSink) start(status int, contentType string, _ int) error {
	s.status, s.contentType = status, contentType
	return nil
}

func (s *zmqSink) send(p []byte) error {
	c := zmqlink.Chunk{Status: s.status, ContentType: s.contentType, Data: p}
	s.status, s.contentType = 0, ""
	return s.w.Send(c)
}

func (s *zmqSink) cut() error { return errCut }
