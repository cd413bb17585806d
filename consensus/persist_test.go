package consensus

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
)

// noElection keeps raft from electing anyone for the length of a test: the node restarts as a
// voter whose cluster cannot have a leader yet, as a gateway whose whole fleet is down.
func noElection(c *raft.Config) {
	c.HeartbeatTimeout = time.Hour
	c.ElectionTimeout = time.Hour
	c.LeaderLeaseTimeout = time.Hour
}

// writeAndStop starts a one-node cluster on dir, applies cmds, and shuts it down; it returns the
// records and the applied index it left.
func writeAndStop(t *testing.T, cfg Config, cmds ...fsm.Command) ([]fsm.Record, uint64) {
	t.Helper()
	n := startNode(t, cfg)
	waitReady(t, n)
	for _, cmd := range cmds {
		if _, err := n.Apply(context.Background(), cmd); err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
	}
	testkit.For(t, "the applied state saved", func() bool { return n.SavedIndex() == n.AppliedIndex() })
	want, applied := n.Workers(), n.AppliedIndex()
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return want, applied
}

// A gateway that restarts serves its last applied records (flags included) at once, before any
// leader exists: the state saved beside the raft log, not raft's replay, which waits for a
// commit.
func TestRestartServesSavedStateWithoutLeader(t *testing.T) {
	dir, err := storage.PrepareNodeDir(t.TempDir(), "n1", testkit.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: "n1", BindAddr: "127.0.0.1:0", StateDir: dir.Path}
	a, b, c := spec(t, 8001), spec(t, 8002), spec(t, 8003)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	want, applied := writeAndStop(t, cfg,
		fsm.Register{Spec: a, Owner: "n1", At: now},
		fsm.Register{Spec: b, Owner: "n1", At: now},
		fsm.Register{Spec: c, Owner: "n1", At: now},
		fsm.SetFlags{ID: a.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), Reason: "maint", By: "ops", At: now}},
		fsm.Remove{ID: c.ID()},
	)

	cfg.Tune = noElection
	n := startNode(t, cfg)
	if n.IsLeader() {
		t.Fatal("the restarted node leads already; the test wants it without a leader")
	}
	if diff := cmp.Diff(want, n.Workers()); diff != "" {
		t.Fatalf("records served at start, before any leader (-want +got):\n%s", diff)
	}
	if n.AppliedIndex() != applied {
		t.Fatalf("applied index %d at start, want %d", n.AppliedIndex(), applied)
	}
}

// Once a leader exists, raft replays its log from its last snapshot; the entries the saved
// state holds are skipped (a fenced Remove applied twice would fail the second time), and what
// follows applies on top.
func TestRestartReplaySkipsSavedEntries(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		name := "no snapshot"
		if snapshot {
			name = "a snapshot before the last writes"
		}
		t.Run(name, func(t *testing.T) {
			dir, err := storage.PrepareNodeDir(t.TempDir(), "n1", testkit.Quiet())
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{NodeID: "n1", BindAddr: "127.0.0.1:0", StateDir: dir.Path}
			a, b := spec(t, 8001), spec(t, 8002)
			now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
			n := startNode(t, cfg)
			waitReady(t, n)
			ctx := context.Background()
			for _, cmd := range []fsm.Command{fsm.Register{Spec: a, Owner: "n1", At: now}, fsm.Register{Spec: b, Owner: "n1", At: now}} {
				if _, err := n.Apply(ctx, cmd); err != nil {
					t.Fatal(err)
				}
			}
			if snapshot {
				if err := n.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			rec, _ := n.Worker(b.ID())
			if _, err := n.Apply(ctx, fsm.Remove{ID: b.ID(), Fence: &fsm.Fence{Owner: rec.Owner, Epoch: rec.Epoch}}); err != nil {
				t.Fatal(err)
			}
			testkit.For(t, "the applied state saved", func() bool { return n.SavedIndex() == n.AppliedIndex() })
			want, applied := n.Workers(), n.AppliedIndex()
			if err := n.Shutdown(); err != nil {
				t.Fatal(err)
			}

			n = startNode(t, cfg)
			waitReady(t, n)
			testkit.For(t, "the log replayed", func() bool { return n.AppliedIndex() >= applied })
			if diff := cmp.Diff(want, n.Workers()); diff != "" {
				t.Fatalf("records after the replay (-want +got):\n%s", diff)
			}
			res, err := n.Apply(ctx, fsm.SetFlags{ID: a.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), By: "ops", At: now}})
			if err != nil || res.Outcome != fsm.Updated {
				t.Fatalf("a write after the restart: %+v, %v", res, err)
			}
			testkit.For(t, "the new write saved", func() bool { return n.SavedIndex() == n.AppliedIndex() })
		})
	}
}

// WaitSaved returns once the state on disk holds an index: a write that changed a record once
// the saver wrote it, and a write that changed nothing at once (the saved state is current).
func TestWaitSaved(t *testing.T) {
	dir, err := storage.PrepareNodeDir(t.TempDir(), "n1", testkit.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, Config{NodeID: "n1", BindAddr: "127.0.0.1:0", StateDir: dir.Path})
	waitReady(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := spec(t, 8001)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, cmd := range []fsm.Command{
		fsm.Register{Spec: a, Owner: "n1", At: now},
		fsm.Register{Spec: a, Owner: "n1", At: now}, // unchanged: nothing to save
	} {
		res, err := n.Apply(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.WaitSaved(ctx, res.Index); got < res.Index {
			t.Fatalf("%s at %d: saved index %d after the wait", res.Outcome, res.Index, got)
		}
	}
	shortCtx, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if got := n.WaitSaved(shortCtx, n.AppliedIndex()+100); got >= n.AppliedIndex()+100 {
		t.Fatalf("WaitSaved claims an index not yet applied: %d", got)
	}
}
