package consensus

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/testkit"
)

// slowCommitRaft makes raft tell followers a commit only with the next entry or after 2 to 4 s
// (CommitTimeout): a follower that applies a write sooner learned it from the leader's notice.
func slowCommitRaft(c *raft.Config) {
	clusterRaft(c)
	c.CommitTimeout = 2 * time.Second
}

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
	// The follower whose acknowledgement committed the write got it with an older commit index,
	// and raft tells it no more until CommitTimeout. The other one may have got the write after
	// the commit (its replication ran later, as on a loaded machine), with the commit index that
	// covers it: the test takes a follower that does not know yet.
	fs := others(3, lead)
	testkit.For(t, "the followers to store the write", func() bool {
		return c.nodes[fs[0]].raft.LastIndex() >= res.Index && c.nodes[fs[1]].raft.LastIndex() >= res.Index
	})
	fi := fs[0]
	if c.nodes[fi].raft.CommitIndex() >= res.Index {
		fi = fs[1]
	}
	f := c.nodes[fi]
	if got := f.raft.CommitIndex(); got >= res.Index {
		t.Fatalf("both followers knew the write committed (commit index %d) before any notice", got)
	}
	var entry raft.Log
	if err := f.stores.log.GetLog(res.Index, &entry); err != nil {
		t.Fatal(err)
	}
	good := CommitNotice{From: c.nodes[lead].ID(), Index: res.Index, EntryTerm: entry.Term, LeaderTerm: c.nodes[lead].raft.CurrentTerm()}
	other := c.nodes[others(3, lead)[0]].ID()
	if other == f.ID() {
		other = c.nodes[others(3, lead)[1]].ID()
	}
	stop := make(chan struct{})
	defer close(stop)
	for _, tc := range []struct {
		name string
		edit func(*CommitNotice)
		want noticeOutcome
	}{
		{"from a node that does not lead", func(c *CommitNotice) { c.From = other }, noticeStale},
		{"of another term than the follower's", func(c *CommitNotice) { c.LeaderTerm++ }, noticeStale},
		{"for an entry of another term", func(c *CommitNotice) { c.EntryTerm++ }, noticeConflicts},
		{"for an entry not stored yet", func(c *CommitNotice) { c.Index += 5 }, noticeLacksEntry},
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
