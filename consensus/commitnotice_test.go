package consensus

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
)

// A follower takes a commit notice only as raft would take its leader's AppendEntries: from the
// leader it follows, in its term, for an entry its log holds with the same term. It then applies
// the entry at once, where raft alone would wait for the next entry or CommitTimeout (2 s here).
func TestCommitNoticeDelivery(t *testing.T) {
	c := startClusterTuned(t, 3, slowCommitRaft)
	lead := c.waitLeader(t, 0, 1, 2)
	waitReady(t, c.nodes[lead])
	res, err := c.nodes[lead].Apply(context.Background(), fsm.Register{Spec: spec(t, 8301), Owner: "n1", At: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	fi := follower(lead, 3)
	f := c.nodes[fi]
	waitFor(t, "the follower to store the write", func() bool { return f.raft.LastIndex() >= res.Index })
	if got := f.raft.CommitIndex(); got >= res.Index {
		t.Fatalf("the follower knew the write committed (commit index %d) before any notice", got)
	}
	var entry raft.Log
	if err := f.stores.log.GetLog(res.Index, &entry); err != nil {
		t.Fatal(err)
	}
	good := commitNotice{from: c.nodes[lead].ID(), index: res.Index, entryTerm: entry.Term, leaderTerm: c.nodes[lead].raft.CurrentTerm()}
	other := c.nodes[others(3, lead)[0]].ID()
	if other == f.ID() {
		other = c.nodes[others(3, lead)[1]].ID()
	}
	stop := make(chan struct{})
	defer close(stop)
	for _, tc := range []struct {
		name string
		edit func(*commitNotice)
		want noticeOutcome
	}{
		{"from a node that does not lead", func(c *commitNotice) { c.from = other }, noticeStale},
		{"of another term than the follower's", func(c *commitNotice) { c.leaderTerm++ }, noticeStale},
		{"for an entry of another term", func(c *commitNotice) { c.entryTerm++ }, noticeConflicts},
		{"for an entry not stored yet", func(c *commitNotice) { c.index += 5 }, noticeLacksEntry},
	} {
		n := good
		tc.edit(&n)
		if got := f.deliverNotice(n, stop); got != tc.want {
			t.Errorf("a notice %s: outcome %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := f.raft.CommitIndex(); got >= res.Index {
		t.Fatalf("a refused notice moved the follower's commit index to %d", got)
	}
	if got := f.deliverNotice(good, stop); got != noticeDelivered {
		t.Fatalf("the leader's notice: outcome %d, want delivered", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if got := f.WaitApplied(ctx, res.Index); got < res.Index {
		t.Fatalf("the follower applied %d within 1 s of the notice, not the write's %d", got, res.Index)
	}
	if _, ok := f.Worker(res.Record.ID); !ok {
		t.Fatal("the follower applied the write's index without its record")
	}
	if got := f.deliverNotice(good, stop); got != noticeStale {
		t.Errorf("the same notice again: outcome %d, want stale (already committed)", got)
	}
}

// Once a write is acknowledged, every node's stored commit index covers it, so a restart
// serves it before any leader exists; and no entry appended after the write carried it there.
func TestAcknowledgedWriteIsStoredWithoutAnotherEntry(t *testing.T) {
	c := startAckCluster(t, 3, 5*time.Second, func(_ int, n *Node) Applied { return savedApplied{n} },
		func(i int, cfg *Config) {
			dir, err := storage.PrepareNodeDir(t.TempDir(), cfg.NodeID, quiet())
			if err != nil {
				t.Fatal(err)
			}
			cfg.Ephemeral, cfg.StateDir, cfg.Registerer = false, dir.Path, prometheus.NewRegistry()
		})
	lead := c.waitLeader(t, 0, 1, 2)
	waitReady(t, c.nodes[lead])
	f := follower(lead, 3)
	for i := range 3 {
		res, _ := c.register(t, lead, 8310+i)
		if rep := c.acks[f].Acknowledge(context.Background(), res.Index); len(rep.Lagging) > 0 {
			t.Fatalf("write %d: lagging %v", i, rep.Lagging)
		}
		for _, n := range c.nodes {
			if got := n.stores.db.CommitIndex(); got < res.Index {
				t.Errorf("write %d at index %d acknowledged: %s stored commit index %d", i, res.Index, n.ID(), got)
			}
		}
		if last := c.nodes[lead].raft.LastIndex(); last != res.Index {
			t.Fatalf("write %d at index %d: the leader's log ends at %d", i, res.Index, last)
		}
	}
}
