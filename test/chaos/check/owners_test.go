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

// TestLateProbeAfterALongCut is a 30 s region cut's case (WAN, seed 99, --cut-hold 30s): n2
// owned w-1 in its own view all through the cut (68.5 to 98.5 s; its last such sample at
// 100.2 s, before it applied what it missed), probing it every second into the cut. A probe
// whose packets the cut held is retransmitted by TCP with a doubling backoff, so the first
// retransmission after the heal may come as late as the cut was long: n2's count grew by one
// between 108.3 and 109.3 s, 8 s after the others' samples named n1. One probe within the
// cut's length (and a probe's timeout) after the heal is late, not failed; one later still
// fails.
func TestLateProbeAfterALongCut(t *testing.T) {
	ms := time.Millisecond
	own := func(at time.Duration, gw, owner string) history.OwnerSample {
		return history.OwnerSample{At: at, Gateway: gw, Rows: []history.OwnerRow{{Worker: "w-1", Owner: owner, Epoch: map[string]uint64{"n2": 132, "n1": 157}[owner]}}}
	}
	probes := func(at time.Duration, n int64) history.ProbeSample {
		return history.ProbeSample{At: at, Worker: "w-1", Probes: map[string]int64{"n2": n}}
	}
	h := history.History{
		Owners: []history.OwnerSample{own(99165*ms, "n2", "n2"), own(100219*ms, "n2", "n2"), own(104255*ms, "n2", "n1"),
			own(104254*ms, "n1", "n1"), own(108292*ms, "n2", "n1"), own(109305*ms, "n2", "n1"), own(110351*ms, "n2", "n1")},
		Probes: []history.ProbeSample{probes(104258*ms, 2), probes(108298*ms, 2), probes(109306*ms, 3), probes(110362*ms, 3)},
		Down:   []history.Down{{Node: "n2", From: 68523 * ms, To: 98524 * ms, Reason: "partition-one", Serving: true}},
	}
	if r := SingleOwner(h); !r.OK || !strings.Contains(r.Detail, "arrived late") {
		t.Errorf("one probe held by a 30 s cut: ok=%v %s", r.OK, r.Detail)
	}
	short := h
	short.Down = []history.Down{{Node: "n2", From: 95 * time.Second, To: 98524 * ms, Reason: "partition-one", Serving: true}}
	if r := SingleOwner(short); r.OK {
		t.Errorf("a probe 10 s after a 3.5 s cut passed: %s", r.Detail)
	}
	paused := h
	paused.Down = []history.Down{{Node: "n2", From: 68523 * ms, To: 98524 * ms, Reason: "pause", Serving: false}}
	if r := SingleOwner(paused); r.OK {
		t.Errorf("a probe 10 s after a pause passed (a paused gateway sends nothing to hold): %s", r.Detail)
	}
}

// TestLateProbeAfterTheWorkersRegionCut is a WAN run's case (3 regions 50 ms apart, seed 99,
// --cut-hold 30s): a transfer gave w-1, whose engine is in eu, to n3 (in ap) at epoch 67 at
// 22.54 s, and n3 probed it at once; 70 ms later eu was cut off for 30 s. The connection was
// made just before the cut, the probe's request was held, and n3 gave up at its timeout and
// closed the connection, but the kernel went on retransmitting it with a doubling backoff: it
// reached the engine 12 s after the heal, when n2 had owned w-1 (epoch 104) for 8 s in every
// gateway's samples. n3 was never cut off itself: the cut that held its probe was the
// worker's region's. One probe within the cut's length (and a probe's timeout) after the heal
// of the worker's region, sent while a sample named n3 the owner, is late, not failed; a cut of
// another region, a short cut, or two probes still fail.
func TestLateProbeAfterTheWorkersRegionCut(t *testing.T) {
	ms := time.Millisecond
	own := func(at time.Duration, gw, owner string, epoch uint64) history.OwnerSample {
		return history.OwnerSample{At: at, Gateway: gw, Rows: []history.OwnerRow{{Worker: "w-1", Owner: owner, Epoch: epoch}}}
	}
	probes := func(at time.Duration, n int64) history.ProbeSample {
		return history.ProbeSample{At: at, Worker: "w-1", Probes: map[string]int64{"n2": 8 + n, "n3": n}}
	}
	h := history.History{
		Owners: []history.OwnerSample{
			own(21637*ms, "n3", "n1", 10),
			own(22642*ms, "n1", "n3", 67), own(22644*ms, "n2", "n3", 67), own(22645*ms, "n3", "n3", 67),
			own(23651*ms, "n3", "n1", 68),
			own(62933*ms, "n2", "n2", 104), own(63940*ms, "n2", "n2", 104), own(64963*ms, "n2", "n2", 104),
			own(62934*ms, "n3", "n2", 104), own(63941*ms, "n3", "n2", 104), own(64964*ms, "n3", "n2", 104),
			own(65975*ms, "n3", "n2", 104),
		},
		Probes: []history.ProbeSample{probes(62935*ms, 0), probes(63942*ms, 0), probes(64966*ms, 1), probes(65977*ms, 1)},
		Down:   []history.Down{{Node: "n1", From: 22611 * ms, To: 52613 * ms, Reason: "partition-one", Serving: true}},
		Cuts:   []history.RegionCut{{Region: "eu", Gateways: []string{"n1"}, Workers: []string{"w-1"}, From: 22611 * ms, To: 52613 * ms}},
	}
	if r := SingleOwner(h); !r.OK || !strings.Contains(r.Detail, "arrived late") || !strings.Contains(r.Detail, "region eu cut off") {
		t.Errorf("one probe held by the cut of the worker's region: ok=%v %s", r.OK, r.Detail)
	}
	other := h
	other.Cuts = []history.RegionCut{{Region: "us", Gateways: []string{"n2"}, Workers: []string{"w-2"}, From: 22611 * ms, To: 52613 * ms}}
	if r := SingleOwner(other); r.OK {
		t.Errorf("a probe after the cut of a region w-1 is not in passed: %s", r.Detail)
	}
	short := h
	short.Cuts = []history.RegionCut{{Region: "eu", Gateways: []string{"n1"}, Workers: []string{"w-1"}, From: 22611 * ms, To: 25 * time.Second}}
	if r := SingleOwner(short); r.OK {
		t.Errorf("a probe 39 s after a 2.4 s cut passed: %s", r.Detail)
	}
	twice := h
	twice.Probes = []history.ProbeSample{probes(62935*ms, 0), probes(63942*ms, 0), probes(64966*ms, 2), probes(65977*ms, 2)}
	if r := SingleOwner(twice); r.OK {
		t.Errorf("two probes after the cut passed: %s", r.Detail)
	}
}

// TestProbeWhileOwnershipMovedTwice is seed 7's case (the short mode, after drains joined the
// faults): a transfer gave w-1 to n2, which probed it at once, and a drain of n2 moved it back to
// n1, all between two samples that both name n1 (epochs 208 and 264). The epoch moved, so the
// probe may come from an owner no sample saw: counted, not failed. Probes while the epoch stays
// put still fail (TestEachInvariantCatchesItsBreak).
func TestProbeWhileOwnershipMovedTwice(t *testing.T) {
	h := history.History{
		Owners: []history.OwnerSample{
			{At: 42500 * time.Millisecond, Gateway: "n2", Rows: row("n1", 208)},
			{At: 43600 * time.Millisecond, Gateway: "n2", Rows: row("n1", 264)},
		},
		Probes: []history.ProbeSample{
			{At: 42500 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n2": 7}},
			{At: 43500 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n2": 8}},
		},
	}
	checkMovedProbe(t, h, func(h *history.History) { h.Owners[1].Rows = row("n1", 208) },
		"a probe from n2 while n1 owned w-1 at one epoch")
	// n2 took no sample after the probe (killed): the others' samples tell the epoch moved.
	h.Owners[1] = history.OwnerSample{At: 43600 * time.Millisecond, Gateway: "n3", Rows: row("n1", 264)}
	if r := SingleOwner(h); !r.OK {
		t.Errorf("the others saw the epoch move: %s", r.Detail)
	}
}

// TestProbeWhileOwnershipMovedSampledInside is seed 42's case (240 s on 5 gateways):
// a rebalance gave w-1 to n2 at epoch 1068 and a drain of n2 gave it to n3 at epoch 1072, 38 ms
// later; n2 probed it in between. n2's sample of the next tick (epoch 1072) came 7 ms before the
// probe sample, inside the interval, and n2 was restarted before its next one: the epoch moved in
// n2's own samples around the probe, counted, not failed.
func TestProbeWhileOwnershipMovedSampledInside(t *testing.T) {
	h := history.History{
		Owners: []history.OwnerSample{
			{At: 196393 * time.Millisecond, Gateway: "n2", Rows: row("n1", 1014)},
			{At: 197405 * time.Millisecond, Gateway: "n2", Rows: row("n3", 1072)},
			{At: 199384 * time.Millisecond, Gateway: "n2", Rows: row("n3", 1072)},
		},
		Probes: []history.ProbeSample{
			{At: 196396 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n2": 12}},
			{At: 197412 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n2": 13}},
		},
	}
	checkMovedProbe(t, h, func(h *history.History) { h.Owners[1].Rows = row("n1", 1014) },
		"a probe from n2 while its samples named n1 at one epoch")
}

// TestProbeAfterItsGatewaysLastSample is seed 20261201's case (240 s on 5 gateways, at
// 0bb9491): n1, wiped and back, took its samples at 129.5, 130.5 and 131.5 s, all naming n3 at
// epoch 686. At 131.7 s n1 won an election, took w-1 (epoch 697) and probed it; 375 ms later its
// drain gave w-1 back to n3 (epoch 702), and n1 left and restarted before its next sample. The
// probe came after n1's last sample in the interval; the others' samples after that one show the
// epoch moved (702), so an owner no sample saw may have been n1: counted, not failed. With the
// epoch unchanged in every later sample it still fails.
func TestProbeAfterItsGatewaysLastSample(t *testing.T) {
	ms := time.Millisecond
	own := func(at time.Duration, gw string, epoch uint64) history.OwnerSample {
		return history.OwnerSample{At: at * ms, Gateway: gw, Rows: row("n3", epoch)}
	}
	h := history.History{
		Owners: []history.OwnerSample{
			own(129468, "n1", 686), own(130473, "n1", 686), own(131492, "n1", 686),
			own(130474, "n3", 686), own(131492, "n3", 686), own(132116, "n5", 686),
			own(133129, "n2", 702), own(133131, "n3", 702), own(133132, "n5", 702),
		},
		Probes: []history.ProbeSample{
			{At: 130488 * ms, Worker: "w-1", Probes: map[string]int64{"n1": 0, "n3": 19}},
			{At: 132121 * ms, Worker: "w-1", Probes: map[string]int64{"n1": 1, "n3": 20}},
		},
	}
	checkMovedProbe(t, h, func(h *history.History) {
		for i := range h.Owners {
			h.Owners[i].Rows = row("n3", 686)
		}
	}, "a probe from n1 while every sample named n3 at epoch 686")
}

// TestNewOwnerProbesBeforeItsSample is seed 7's case (the short mode, once faults ran on a lane
// per kind): a transfer gave w-1 to n3 at epoch 22; n3 applied it and probed at once, right
// after its own sample (still naming n1 at epoch 13) was taken, and the sampler missed its next
// one. n2's sample inside the interval already named n3 at epoch 22: the probe may come from
// the owner, counted, not failed. A probe while no sample names n3 at a newer epoch still fails.
func TestNewOwnerProbesBeforeItsSample(t *testing.T) {
	h := history.History{
		Owners: []history.OwnerSample{
			{At: 1196 * time.Millisecond, Gateway: "n3", Rows: row("n1", 13)},
			{At: 2206 * time.Millisecond, Gateway: "n2", Rows: row("n3", 22)},
			{At: 2217 * time.Millisecond, Gateway: "n3", Rows: row("n1", 13)},
			{At: 4235 * time.Millisecond, Gateway: "n3", Rows: row("n3", 22)},
		},
		Probes: []history.ProbeSample{
			{At: 1196 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n1": 1, "n3": 0}},
			{At: 2223 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n1": 2, "n3": 1}},
		},
	}
	checkMovedProbe(t, h, func(h *history.History) { h.Owners[1].Rows = row("n1", 13) },
		"a probe from n3 while every sample named n1 at epoch 13")
}

// checkMovedProbe checks that SingleOwner counts h's probe as one made while ownership moved,
// not a violation, and fails it once still has taken the move out of h's samples (still
// changes h's samples in place).
func checkMovedProbe(t *testing.T, h history.History, still func(*history.History), stillWhat string) {
	t.Helper()
	if r := SingleOwner(h); !r.OK || !strings.Contains(r.Detail, "moved more often") {
		t.Errorf("ok=%v %s", r.OK, r.Detail)
	}
	still(&h)
	if r := SingleOwner(h); r.OK {
		t.Errorf("%s passed: %s", stillWhat, r.Detail)
	}
}
