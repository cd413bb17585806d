package fleet

import (
	"context"
	"errors"
	"testing"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// applyOnly is an Applier that cannot tell whether it is cut off.
type applyOnly struct{}

func (applyOnly) Apply(context.Context, fsm.Command) (fsm.Result, error) { return fsm.Result{}, nil }

// cutApplier is an Applier that says it is cut off (forward.Forwarder.CutOff).
type cutApplier struct {
	applyOnly
	err error
}

func (c cutApplier) CutOff() error { return c.err }

// TestWriterCutOff: the writer passes on its node's cut-off verdict (the admin API's read
// barrier asks it), and says nil for a node that cannot tell.
func TestWriterCutOff(t *testing.T) {
	nq := &consensus.NoQuorumError{Reached: 1, Voters: 3}
	if err := (&Writer{Node: cutApplier{err: nq}, NodeID: "n1"}).CutOff(); !errors.Is(err, nq) {
		t.Errorf("CutOff over a cut-off node = %v; want its NoQuorumError", err)
	}
	if err := (&Writer{Node: cutApplier{}, NodeID: "n1"}).CutOff(); err != nil {
		t.Errorf("CutOff over a node in contact = %v; want nil", err)
	}
	if err := (&Writer{Node: applyOnly{}, NodeID: "n1"}).CutOff(); err != nil {
		t.Errorf("CutOff over a node that cannot tell = %v; want nil", err)
	}
}
