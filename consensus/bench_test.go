package consensus

import (
	"context"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
)

// BenchmarkNodeApply measures one write through a single-voter node, from Apply to result:
// in memory, and on the bbolt stores (one fsync per entry).
func BenchmarkNodeApply(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "ephemeral"
		if durable {
			name = "bbolt"
		}
		b.Run(name, func(b *testing.B) {
			cfg := Config{NodeID: "n1", Ephemeral: !durable}
			if durable {
				dir, err := storage.PrepareNodeDir(b.TempDir(), "n1", testkit.Quiet())
				if err != nil {
					b.Fatal(err)
				}
				cfg.StateDir, cfg.BindAddr = dir.Path, "127.0.0.1:0"
			} else {
				_, cfg.Transport = raft.NewInmemTransport("")
			}
			n := startNode(b, cfg)
			waitReady(b, n)
			s := spec(b, 8001)
			id := s.ID()
			if _, err := n.Apply(context.Background(), fsm.Register{Spec: s, Owner: "n1"}); err != nil {
				b.Fatal(err)
			}
			flip := []fsm.Command{
				fsm.SetFlags{ID: id, Flags: fsm.FlagChange{Disabled: ptr(true), By: "bench"}},
				fsm.SetFlags{ID: id, Flags: fsm.FlagChange{Disabled: ptr(false)}},
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := n.Apply(context.Background(), flip[i%2]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
