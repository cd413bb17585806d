package outcome

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sinkCall is one call of a test owner's sink.
type sinkCall struct {
	From, Worker string
	Epoch        uint64
	Outcome      Outcome
	Count        int
}

// testOwner is an owner gateway's gRPC server on a bufconn listener, recording its sink's calls.
type testOwner struct {
	lis    *bufconn.Listener
	srv    *grpc.Server
	svc    *Service
	met    *Metrics
	served chan struct{}

	mu     sync.Mutex
	calls  []sinkCall
	reject map[string]bool // workers the owner does not own
}

func startOwner(t *testing.T, reject ...string) *testOwner {
	t.Helper()
	o := &testOwner{lis: bufconn.Listen(1 << 20), srv: grpc.NewServer(), met: mustPrivateMetrics(),
		served: make(chan struct{}), reject: map[string]bool{}}
	for _, w := range reject {
		o.reject[w] = true
	}
	var err error
	o.svc, err = NewService(ServiceOptions{Sink: o.sink, Metrics: o.met, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	o.svc.Register(o.srv)
	go func() { _ = o.srv.Serve(o.lis); close(o.served) }()
	t.Cleanup(o.stop)
	return o
}

func (o *testOwner) sink(from, worker string, epoch uint64, out Outcome, count int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reject[worker] {
		return false
	}
	o.calls = append(o.calls, sinkCall{from, worker, epoch, out, count})
	return true
}

func (o *testOwner) got() []sinkCall {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]sinkCall(nil), o.calls...)
}

// stop closes the service and stops the server gracefully; it may be called again.
func (o *testOwner) stop() {
	o.svc.Close()
	o.srv.GracefulStop()
	<-o.served
}

// network maps owner names to listeners; an owner that is not listed refuses connections.
type network struct {
	mu     sync.Mutex
	owners map[string]*bufconn.Listener
}

func newNetwork() *network { return &network{owners: map[string]*bufconn.Listener{}} }

func (n *network) set(name string, lis *bufconn.Listener) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if lis == nil {
		delete(n.owners, name)
		return
	}
	n.owners[name] = lis
}

func (n *network) dial(ctx context.Context, addr string) (net.Conn, error) {
	n.mu.Lock()
	lis := n.owners[addr]
	n.mu.Unlock()
	if lis == nil {
		return nil, errors.New("connection refused")
	}
	return lis.DialContext(ctx)
}

// newTestReporter returns a Reporter reaching the network's owners, closed at cleanup.
func newTestReporter(t testing.TB, n *network, cfg Config) *Reporter {
	t.Helper()
	cfg.From = "self"
	cfg.Resolve = func(owner string) (string, bool) { return "passthrough:///" + owner, owner != "unknown" }
	cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(n.dial)}
	if cfg.Metrics == nil {
		cfg.Metrics = mustPrivateMetrics()
	}
	cfg.Logger = quiet
	r, err := NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// counts reads a Metrics' four counters.
type counts struct{ Sent, Dropped, Received, Rejected float64 }

func readCounts(m *Metrics) counts {
	return counts{testutil.ToFloat64(m.sent), testutil.ToFloat64(m.dropped),
		testutil.ToFloat64(m.received), testutil.ToFloat64(m.rejected)}
}
