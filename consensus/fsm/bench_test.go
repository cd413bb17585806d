package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/test/testkit"
)

// BenchmarkFSMApply measures applying one already-encoded entry, as raft's FSM goroutine does
// on every node: decode, dispatch, change, copy of the result.
func BenchmarkFSMApply(b *testing.B) {
	b.Run("register", func(b *testing.B) {
		entries := make([][]byte, 4096)
		for i := range entries {
			data, err := Encode(Register{Spec: spec(b, fmt.Sprintf("http://10.0.%d.%d:8000", i>>8, i&255), 0), Owner: "n1", At: t0})
			if err != nil {
				b.Fatal(err)
			}
			entries[i] = data
		}
		f := New(testkit.Quiet())
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if i%len(entries) == 0 && i > 0 {
				b.StopTimer()
				f = New(testkit.Quiet()) // keep measuring creations, not no-ops
				b.StartTimer()
			}
			f.Apply(&raft.Log{Index: uint64(i + 1), Data: entries[i%len(entries)]})
		}
	})
	b.Run("set_flags", func(b *testing.B) {
		s := spec(b, "http://127.0.0.1:8001", 0)
		f := New(testkit.Quiet())
		applyAt(b, f, 1, Register{Spec: s, Owner: "n1"})
		var toggle [2][]byte
		for i, v := range []bool{true, false} {
			data, err := Encode(SetFlags{ID: s.ID(), Flags: FlagChange{Disabled: &v, Reason: "r", By: "ops", At: t0}})
			if err != nil {
				b.Fatal(err)
			}
			toggle[i] = data
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			res := f.Apply(&raft.Log{Index: uint64(i + 2), Data: toggle[i%2]}).(Result)
			if res.Outcome != Updated {
				b.Fatal(res.Outcome)
			}
		}
	})
}
