package consensus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
)

// savedApplied is a gateway's data plane as cmd/meshgw gives it to fleet acknowledgements: the
// FSM applied the index, and a restart would serve it (Node.WaitSaved).
type savedApplied struct{ n *Node }

func (a savedApplied) WaitApplied(ctx context.Context, index uint64) uint64 {
	got := a.n.WaitApplied(ctx, index)
	if got < index {
		return got
	}
	return min(got, a.n.WaitSaved(ctx, index))
}

// crash stops n the way kill -9 would as far as the saved state goes: raft stops and the store
// closes before the saver's last save, which then fails.
func crash(t *testing.T, n *Node) {
	t.Helper()
	n.shutdown.Do(func() {
		n.closed.Store(true)
		_ = n.raft.Shutdown().Error()
		close(n.stop)
		n.wg.Wait()
		_ = n.stores.close()
		n.saver.close()
		n.met.unregister()
	})
}

// A follower acknowledges a write once it applied it and the commit index stored with its raft
// log covers it: it does not wait for a save of its applied state (here an hour away). Killed
// right after, it restarts alone, with no leader, and serves the write from the first read:
// at start it applies the committed entries its log holds past the saved state.
func TestAcknowledgedWriteServedAfterCrashBeforeSave(t *testing.T) {
	dirs := make([]string, 3)
	for i := range dirs {
		d, err := storage.PrepareNodeDir(t.TempDir(), fmt.Sprintf("n%d", i+1), quiet())
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = d.Path
	}
	onDisk := func(i int, c *Config) { c.Ephemeral, c.StateDir, c.saveInterval = false, dirs[i], time.Hour }
	c := startAckCluster(t, 3, 10*time.Second, func(_ int, n *Node) Applied { return savedApplied{n} }, onDisk)
	lead := c.waitLeader(t, 0, 1, 2)
	f := follower(lead, 3)
	waitFor(t, "the follower's first save", func() bool { return c.nodes[f].SavedIndex() > 0 })

	res, rec := c.register(t, lead, 8001)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	dis, err := c.nodes[lead].Apply(context.Background(),
		fsm.SetFlags{ID: rec.ID, Flags: fsm.FlagChange{Disabled: ptr(true), Reason: "maint", By: "ops", At: now}})
	if err != nil || dis.Outcome != fsm.Updated {
		t.Fatalf("disable: %+v, %v", dis, err)
	}
	start := time.Now()
	rep := c.acks[lead].Acknowledge(context.Background(), dis.Index)
	if len(rep.Lagging) > 0 {
		t.Fatalf("lagging %v after %s: a follower waited for a save of its applied state", rep.Lagging, time.Since(start))
	}
	want := c.nodes[f].Workers()
	if len(want) != 1 || !want[0].Disabled {
		t.Fatalf("the follower acknowledged without the disabled record: %+v (register at %d)", want, res.Index)
	}

	crash(t, c.nodes[f])
	restarted := startNode(t, Config{NodeID: fmt.Sprintf("n%d", f+1), StateDir: dirs[f], Logger: quiet(),
		Transport: func() raft.Transport { _, tr := raft.NewInmemTransport(""); return tr }(), Tune: noElection})
	if diff := cmp.Diff(want, restarted.Workers()); diff != "" {
		t.Fatalf("records served at start, with no leader (-want +got):\n%s", diff)
	}
	if restarted.AppliedIndex() < dis.Index {
		t.Fatalf("applied index %d at start, want at least %d", restarted.AppliedIndex(), dis.Index)
	}
}
