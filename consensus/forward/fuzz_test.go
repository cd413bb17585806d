package forward

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// FuzzCheckEntry: a forwarded entry is outside input (DESIGN.md section 12). checkEntry never
// panics, and an entry it accepts applies to a real FSM without panicking, so that no forwarded
// entry can reach the log and stop every node that applies it. Seeds: one valid entry of each
// command a gateway forwards (and testdata/fuzz/FuzzCheckEntry).
func FuzzCheckEntry(f *testing.F) {
	s := consensustest.Spec(f, 8080)
	off := true
	for _, c := range []fsm.Command{
		fsm.Register{Spec: s, Owner: "gw-1"},
		fsm.ReplaceSpec{ID: s.ID(), Spec: s, ExpectedRevision: 3},
		fsm.SetFlags{ID: s.ID(), Flags: fsm.FlagChange{Disabled: &off, Reason: "maintenance", By: "ops"}},
		fsm.Remove{ID: s.ID(), Fence: &fsm.Fence{Owner: "gw-1", Epoch: 4}},
		fsm.Transfer{ID: s.ID(), To: "gw-2", ExpectedEpoch: 4},
		fsm.Drain{ID: s.ID(), At: time.Unix(1_700_000_000, 0), Settle: 5 * time.Second},
		fsm.OperatorReassign{Reason: "drain", Drain: []string{"gw-1"}, Undrain: []string{"gw-3"}, At: time.Unix(1_700_000_000, 0),
			Items: []fsm.ReassignItem{{ID: s.ID(), From: fsm.Fence{Owner: "gw-1", Epoch: 4}, To: "gw-2"}}},
	} {
		b, err := fsm.Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		typ, err := checkEntry(entry)
		if err != nil {
			return
		}
		real := fsm.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
		real.Apply(&raft.Log{Index: 1, Data: entry}) // a panic fails the fuzzer
		if got := fsm.CommandType(entry[0]) &^ fsm.IgnoreUnknownFlag; got != typ {
			t.Errorf("checkEntry named type %s for an entry of type %s", typ, got)
		}
	})
}
