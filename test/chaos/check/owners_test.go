package check

import (
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// TestLateProbeAfterACut is a WAN run's case (3 regions 50 ms apart, seed 99): a transfer gave
// w-1 to n3 at epoch 373, which probed it at once, just as its region was cut off for a second
// (and n3 paused). The probe's packets were held by the cut; TCP delivered them on a
// retransmission after the heal, about 2 s later, when a drain had already moved w-1 to n1
// (epoch 381) and n3's own samples named n1. Only n1's sample ever showed n3 the owner. One
// probe, arriving within a probe's timeout of the last sample that named its sender the owner,
// is a probe sent while owning that arrived late: counted, not failed. Two probes, or one long
// after, still fail.
func TestLateProbeAfterACut(t *testing.T) {
	ms := time.Millisecond
	own := func(at time.Duration, gw, owner string, epoch uint64) history.OwnerSample {
		return history.OwnerSample{At: at, Gateway: gw, Rows: []history.OwnerRow{{Worker: "w-1", Owner: owner, Epoch: epoch}}}
	}
	probes := func(at time.Duration, n int64) history.ProbeSample {
		return history.ProbeSample{At: at, Worker: "w-1", Probes: map[string]int64{"n3": n}}
	}
	h := history.History{
		Owners: []history.OwnerSample{
			own(100965*ms, "n3", "n1", 106), // n3's view before it applied the transfer
			own(101974*ms, "n1", "n3", 373), // the only sample naming n3 the owner
			own(103980*ms, "n1", "n1", 381),
			own(103982*ms, "n3", "n1", 381),
			own(104986*ms, "n3", "n1", 381),
			own(105992*ms, "n3", "n1", 381),
		},
		Probes: []history.ProbeSample{probes(102976*ms, 19), probes(103984*ms, 19), probes(104987*ms, 20), probes(105993*ms, 20)},
	}
	if r := SingleOwner(h); !r.OK || !strings.Contains(r.Detail, "arrived late") {
		t.Errorf("one late probe: ok=%v %s", r.OK, r.Detail)
	}
	twice := h
	twice.Probes = []history.ProbeSample{probes(102976*ms, 19), probes(103984*ms, 19), probes(104987*ms, 21), probes(105993*ms, 21)}
	if r := SingleOwner(twice); r.OK {
		t.Errorf("two probes after n3 lost w-1 passed: %s", r.Detail)
	}
	long := h
	long.Owners = append([]history.OwnerSample(nil), h.Owners...)
	long.Owners[1].At = 97 * time.Second // n3 owned w-1 last more than a probe's timeout before
	if r := SingleOwner(long); r.OK {
		t.Errorf("a probe long after n3 owned w-1 passed: %s", r.Detail)
	}
}
