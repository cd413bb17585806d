package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startNode runs an ephemeral one-node raft group on the in-memory transport; wait says
// whether to wait until it leads.
func startNode(t *testing.T, id string, wait bool) *consensus.Node {
	t.Helper()
	_, trans := raft.NewInmemTransport(raft.ServerAddress("mem-" + id))
	n, err := consensus.Start(consensus.Config{NodeID: id, Ephemeral: true, Transport: trans, Logger: testkit.Quiet(), Tune: testkit.FastRaft})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	if wait {
		testkit.For(t, id+" to lead", func() bool { return n.IsLeader() && n.ClusterID() != "" })
	}
	return n
}

func spec(t testing.TB, port int, mutate ...func(*worker.Spec)) worker.Spec {
	t.Helper()
	s := worker.Spec{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for _, m := range mutate {
		m(&s)
	}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// call is one call the fake owner received.
type call struct {
	Op    string // "own", "drain" or "disown"
	ID    worker.ID
	Epoch uint64
	Dead  bool
	Key   string // the spec's API key as given to Own
	// Since and Settle are the drain's, as given to Drain.
	Since  time.Time
	Settle time.Duration
}

// fakeOwner records Own and Disown.
type fakeOwner struct {
	mu    sync.Mutex
	calls []call
}

func (o *fakeOwner) Own(s worker.Spec, epoch uint64, dead bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call{Op: "own", ID: s.ID(), Epoch: epoch, Dead: dead, Key: s.APIKey})
}

func (o *fakeOwner) Drain(s worker.Spec, epoch uint64, dead bool, since time.Time, settle time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call{Op: "drain", ID: s.ID(), Epoch: epoch, Dead: dead, Key: s.APIKey, Since: since, Settle: settle})
}

func (o *fakeOwner) Disown(id worker.ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call{Op: "disown", ID: id})
}

// take returns the calls so far and forgets them.
func (o *fakeOwner) take() []call {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.calls
	o.calls = nil
	return slices.Clone(c)
}

type logBuffer = logbuf.Buffer

// noSleep is a Writer.Sleep that does not wait but counts.
type noSleep struct {
	mu    sync.Mutex
	slept []time.Duration
}

func (s *noSleep) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.slept = append(s.slept, d)
	s.mu.Unlock()
	return ctx.Err()
}
