package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/discovery/kube"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestTermWriterFences: discovery's writer proposes while this node leads in the term it was
// made for, and refuses (kube.ErrFenced, nothing written) a write of any other term, as a
// deposed leader's would be.
func TestTermWriterFences(t *testing.T) {
	node := consensustest.StartNode(t, consensus.Config{NodeID: "n1", Ephemeral: true, BindAddr: "127.0.0.1:0",
		Registerer: prometheus.NewRegistry()})
	testkit.For(t, "the single voter leads", node.IsLeader)
	info, err := node.Info()
	if err != nil {
		t.Fatal(err)
	}
	spec := func(u string) worker.Spec {
		s := worker.Spec{URL: u}
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cur := termWriter{node: node, term: info.Term}
	if _, err := cur.Apply(ctx, fsm.Register{Spec: spec("http://10.0.0.1:80"), Owner: "n1", At: time.Now()}); err != nil {
		t.Fatalf("the current term's write: %v", err)
	}
	for _, term := range []uint64{info.Term - 1, info.Term + 1} {
		stale := termWriter{node: node, term: term}
		s := spec("http://10.0.0.2:80")
		if _, err := stale.Apply(ctx, fsm.Register{Spec: s, Owner: "n1", At: time.Now()}); !errors.Is(err, kube.ErrFenced) {
			t.Errorf("a write of term %d while the term is %d: %v, want ErrFenced", term, info.Term, err)
		}
		if _, ok := node.Worker(s.ID()); ok {
			t.Errorf("the write of term %d was applied", term)
		}
	}
	first := spec("http://10.0.0.1:80")
	if _, ok := node.Worker(first.ID()); !ok {
		t.Error("the current term's write is not applied")
	}
}
