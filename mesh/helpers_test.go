package mesh

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/logbuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fastTimers shortens the local profile's timers so that a crash is detected within about a
// second in tests.
func fastTimers(c *memberlist.Config) {
	c.ProbeInterval = 100 * time.Millisecond
	c.ProbeTimeout = 50 * time.Millisecond
	c.GossipInterval = 20 * time.Millisecond
	c.PushPullInterval = 500 * time.Millisecond
	c.SuspicionMult = 2
	c.SuspicionMaxTimeoutMult = 4
	c.GossipToTheDeadTime = time.Second
}

// testConfig is a node on 127.0.0.1 with a free port, the local profile with fast timers, and
// its log in buf (nil: a fresh buffer).
func testConfig(id string, buf *logbuf.Buffer) Config {
	if buf == nil {
		buf = new(logbuf.Buffer)
	}
	return Config{
		NodeID:   id,
		BindAddr: "127.0.0.1",
		Profile:  ProfileLocal,
		Meta: Meta{Version: "test", Region: "r1", Color: "blue",
			HTTPAddr: "127.0.0.1:30000", RPCAddr: "127.0.0.1:39529", RaftAddr: "127.0.0.1:39528"},
		UpdateTimeout: 5 * time.Second,
		Logger:        buf.Logger(slog.LevelDebug),
		Tune:          fastTimers,
	}
}

// start starts a node from cfg and shuts it down when the test ends.
func start(t *testing.T, cfg Config) *Mesh {
	t.Helper()
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// cluster starts n nodes (n1..nN) and joins each to the first.
func cluster(t *testing.T, n int, edit func(i int, c *Config)) ([]*Mesh, *logbuf.Buffer) {
	t.Helper()
	buf := new(logbuf.Buffer)
	nodes := make([]*Mesh, n)
	for i := range nodes {
		cfg := testConfig(fmt.Sprintf("n%d", i+1), buf)
		if edit != nil {
			edit(i, &cfg)
		}
		nodes[i] = start(t, cfg)
		if i > 0 {
			if _, err := nodes[i].Join([]string{nodes[0].Addr()}); err != nil {
				t.Fatalf("join n%d: %v", i+1, err)
			}
		}
	}
	return nodes, buf
}

// waitFor waits until cond holds, checking after each membership change of m and at least every
// 50 ms, and fails the test after 20 s.
func waitFor(t *testing.T, m *Mesh, what string, cond func([]Member) bool) {
	t.Helper()
	ch, stop := m.Watch()
	defer stop()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ms := m.Members()
		if cond(ms) {
			return
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: %s did not happen within 20 s; members: %v", m.ID(), what, summary(ms))
		}
	}
}

// summary is "id:status" for each member.
func summary(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID + ":" + m.Status.String()
	}
	return out
}

// statusIn returns the status of member id, and whether it is listed.
func statusIn(ms []Member, id string) (Status, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m.Status, true
		}
	}
	return 0, false
}

// allAlive reports whether exactly the ids are listed, all alive.
func allAlive(ids ...string) func([]Member) bool {
	return func(ms []Member) bool {
		if len(ms) != len(ids) {
			return false
		}
		for _, id := range ids {
			if s, ok := statusIn(ms, id); !ok || s != StatusAlive {
				return false
			}
		}
		return true
	}
}
