package check

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/test/chaos/history"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const s = time.Second

// op is an admin operation on worker w, from call to ret (seconds).
func op(kind history.Kind, out history.Outcome, status int, call, ret float64) history.AdminOp {
	a := history.AdminOp{Kind: kind, Worker: "w-1", Gateway: "n1", Outcome: out, Status: status,
		Invoke: time.Duration(call * float64(s)), Complete: time.Duration(ret * float64(s))}
	if out == history.Unknown {
		a.Complete = history.Never
	}
	return a
}

func read(found, disabled bool, call, ret float64) history.AdminOp {
	a := op(history.Read, history.OK, 200, call, ret)
	if !found {
		a.Status = 404
	}
	a.Found, a.Disabled = found, disabled
	return a
}

// readDraining is a read that saw the record draining.
func readDraining(disabled bool, call, ret float64) history.AdminOp {
	a := read(true, disabled, call, ret)
	a.Draining = true
	return a
}

// good is a history every checker accepts: w-1 registered, disabled, then a request to it
// before the disable, a read that sees it, and a final state that holds it.
func good() history.History {
	return history.History{
		Admin: []history.AdminOp{
			op(history.Register, history.OK, 201, 0, 1),
			op(history.Disable, history.OK, 200, 2, 3),
			op(history.Enable, history.Unknown, 0, 2.5, 0), // may or may not have happened
			read(true, true, 4, 5),
			{Kind: history.Rebalance, Gateway: "n2", Outcome: history.OK, Status: 200, Invoke: 4 * s, Complete: 5 * s, Moved: 1},
		},
		Requests: []history.Request{{Gateway: "n1", Worker: "w-1", Invoke: 1500 * time.Millisecond, Complete: 1600 * time.Millisecond, Class: history.Served}},
		Owners: []history.OwnerSample{
			{At: 1 * s, Gateway: "n1", Rows: []history.OwnerRow{{Worker: "w-1", Owner: "n1", Epoch: 3}}},
			{At: 2 * s, Gateway: "n2", Rows: []history.OwnerRow{{Worker: "w-1", Owner: "n1", Epoch: 3}}},
			{At: 40 * s, Gateway: "n2", Rows: []history.OwnerRow{{Worker: "w-1", Owner: "n2", Epoch: 9}}},
		},
		Probes: []history.ProbeSample{
			{At: 1 * s, Worker: "w-1", Probes: map[string]int64{"n1": 1}},
			{At: 2 * s, Worker: "w-1", Probes: map[string]int64{"n1": 2}},
		},
		Down:    []history.Down{{Node: "n1", From: 10 * s, To: 50 * s, Reason: "kill"}},
		Final:   map[string]map[string]history.Final{"n1": {"w-1": {Found: true, Disabled: true}}, "n2": {"w-1": {Found: true, Disabled: true}}},
		Weights: map[string]bool{},
	}
}

// checkers runs every checker of a history.
func checkers(h history.History) map[string]Result {
	return map[string]Result{
		"linearizable":        Linearizable(h, 10*time.Second),
		"no_lost_ack":         NoLostAck(h, []string{"n1", "n2"}),
		"no_disabled_routing": NoDisabledRouting(h),
		"single_owner":        SingleOwner(h),
		"owner_within_bound":  OwnerWithinBound(h, 3*s, 20*s),
		"fail_static":         FailStatic(h, 0.95),
		"no_gateway_fault":    NoGatewayFault(Losses(h, 3*s)),
		"hang_losses":         HangLosses(h, Losses(h, 3*s)),
	}
}

func TestGoodHistoryHolds(t *testing.T) {
	for name, r := range checkers(good()) {
		if !r.OK {
			t.Errorf("%s: %s", name, r.Detail)
		}
	}
}

// TestEachInvariantCatchesItsBreak breaks the good history in one way per invariant and wants
// exactly that invariant's checker to report a failure.
func TestEachInvariantCatchesItsBreak(t *testing.T) {
	tests := []struct {
		name   string // the invariant that must fail
		mutate func(h *history.History)
	}{
		{"linearizable", func(h *history.History) {
			// A read after the acknowledged disable sees the worker enabled, with no enable
			// that could explain it: the unknown enable is gone.
			h.Admin = []history.AdminOp{h.Admin[0], h.Admin[1], read(true, false, 4, 5)}
			h.Final = map[string]map[string]history.Final{"n1": {"w-1": {Found: true, Disabled: true}}, "n2": {"w-1": {Found: true, Disabled: true}}}
		}},
		{"linearizable", func(h *history.History) {
			// A second registration answers 201 (created) for a record that exists.
			h.Admin = append(h.Admin, op(history.Register, history.OK, 201, 6, 7))
		}},
		{"no_lost_ack", func(h *history.History) {
			// The acknowledged disable vanished on n2 (and the unknown enable cannot explain
			// it: it is gone too).
			h.Admin = []history.AdminOp{h.Admin[0], h.Admin[1], h.Admin[3]}
			h.Final["n2"] = map[string]history.Final{"w-1": {Found: true, Disabled: false}}
		}},
		{"no_lost_ack", func(h *history.History) {
			// The acknowledged registration is gone from n1.
			h.Final["n1"] = map[string]history.Final{}
		}},
		{"linearizable", func(h *history.History) {
			// A read after an acknowledged delete (202: draining) sees the record as if no
			// delete had come.
			h.Admin = append(h.Admin, op(history.Delete, history.OK, 202, 6, 7), read(true, true, 8, 9))
			h.Final = map[string]map[string]history.Final{"n1": {}, "n2": {}}
		}},
		{"linearizable", func(h *history.History) {
			// A registration refused because the record drains, with no delete sent.
			a := op(history.Register, history.Failed, 409, 6, 7)
			a.Code = "worker_exists"
			h.Admin = append(h.Admin, a)
		}},
		{"no_lost_ack", func(h *history.History) {
			// The acknowledged delete is lost: both gateways still list the record, and no
			// registration came after it.
			h.Admin = append(h.Admin, op(history.Delete, history.OK, 200, 6, 7))
		}},
		{"no_disabled_routing", func(h *history.History) {
			// A request sent after a delete (202) was acknowledged reached the worker, with
			// no registration after it. An enable does not end a drain.
			h.Admin = []history.AdminOp{h.Admin[0], op(history.Delete, history.OK, 202, 2, 3), op(history.Enable, history.OK, 200, 3.5, 3.6),
				readDraining(false, 3.7, 3.8)}
			h.Requests = append(h.Requests, history.Request{Gateway: "n2", Worker: "w-1", Invoke: 4 * s, Complete: 4100 * time.Millisecond, Class: history.Served})
			h.Final = map[string]map[string]history.Final{"n1": {}, "n2": {}}
		}},
		{"no_disabled_routing", func(h *history.History) {
			// A request sent after the disable was acknowledged reached the worker, and no
			// enable was sent.
			h.Admin = []history.AdminOp{h.Admin[0], h.Admin[1], h.Admin[3]}
			h.Requests = append(h.Requests, history.Request{Gateway: "n2", Worker: "w-1", Invoke: 4 * s, Complete: 4100 * time.Millisecond, Class: history.Served})
		}},
		{"single_owner", func(h *history.History) {
			// A second owner at the same epoch.
			h.Owners = append(h.Owners, history.OwnerSample{At: 3 * s, Gateway: "n3", Rows: []history.OwnerRow{{Worker: "w-1", Owner: "n3", Epoch: 3}}})
		}},
		{"single_owner", func(h *history.History) {
			// n2 probed w-1 while its own samples said n1 owned it.
			h.Probes = append(h.Probes, history.ProbeSample{At: 3 * s, Worker: "w-1", Probes: map[string]int64{"n1": 3, "n2": 4}})
		}},
		{"owner_within_bound", func(h *history.History) {
			// n2, up, still names the killed n1 owner 30 s after the kill (grace 3 s + 20 s).
			h.Owners = append(h.Owners, history.OwnerSample{At: 40 * s, Gateway: "n3", Rows: []history.OwnerRow{{Worker: "w-1", Owner: "n1", Epoch: 3}}})
		}},
		{"fail_static", func(h *history.History) {
			// Most requests to running gateways were lost, to a flapping engine's errors.
			h.Engines = append(h.Engines, history.EngineFault{Worker: "w-1", Kind: "engine-flap", From: 59 * s, To: 71 * s})
			for i := range 10 {
				at := time.Duration(60+i) * s
				h.Requests = append(h.Requests, history.Request{Gateway: "n2", Worker: "w-1", Status: 503,
					Invoke: at, Complete: at + time.Millisecond, Class: history.GatewayLost})
			}
		}},
		{"no_gateway_fault", func(h *history.History) {
			// A request lost with no engine fault, and its gateway up: the data plane's own.
			served(h, 40)
			h.Requests = append(h.Requests, history.Request{Gateway: "n2", Worker: "w-1", Status: 502,
				Invoke: 60 * s, Complete: 60*s + time.Millisecond, Class: history.GatewayLost})
		}},
		{"hang_losses", func(h *history.History) {
			// n2 lost two requests to one hang of w-1, the second sent after the first timed out.
			served(h, 40)
			h.Engines = append(h.Engines, history.EngineFault{Worker: "w-1", Kind: "engine-hang", From: 59 * s, To: 68 * s})
			for _, at := range []time.Duration{60 * s, 64 * s} {
				h.Requests = append(h.Requests, history.Request{Gateway: "n2", Worker: "w-1", Status: 504,
					Invoke: at, Complete: at + 3*s, Class: history.GatewayLost})
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := good()
			tt.mutate(&h)
			for name, r := range checkers(h) {
				if want := name != tt.name; r.OK != want {
					t.Errorf("%s: ok=%v, want %v (%s)", name, r.OK, want, r.Detail)
				}
			}
		})
	}
}

// served adds n requests served through n2 after 70 s, so that a few lost ones keep the rate.
func served(h *history.History, n int) {
	for i := range n {
		at := 70*s + time.Duration(i)*time.Millisecond
		h.Requests = append(h.Requests, history.Request{Gateway: "n2", Worker: "w-1", Status: 200,
			Invoke: at, Complete: at + time.Millisecond, Class: history.Served})
	}
}

// TestUnknownMayHaveHappened: an unknown disable may explain a read that sees the worker
// disabled, and a final state that holds it, but an acknowledged write may not be undone by
// nothing.
func TestUnknownMayHaveHappened(t *testing.T) {
	h := history.History{
		Admin: []history.AdminOp{
			op(history.Register, history.OK, 201, 0, 1),
			op(history.Disable, history.Unknown, 0, 2, 0),
			read(true, false, 3, 4),
			read(true, true, 5, 6),
		},
		Final:   map[string]map[string]history.Final{"n1": {"w-1": {Found: true, Disabled: true}}},
		Weights: map[string]bool{},
	}
	if r := Linearizable(h, 10*time.Second); !r.OK {
		t.Errorf("linearizable: %s", r.Detail)
	}
	if r := NoLostAck(h, []string{"n1"}); !r.OK {
		t.Errorf("no_lost_ack: %s", r.Detail)
	}
	// Reading enabled after disabled, with only that unknown disable: not linearizable.
	h.Admin = append(h.Admin, read(true, false, 7, 8))
	if r := Linearizable(h, 10*time.Second); r.OK {
		t.Errorf("linearizable held for enabled → disabled → enabled with one disable: %s", r.Detail)
	}
}

// TestFailStaticCountsApart: requests to a killed gateway, those that found no worker and those
// a drained gateway refused are left out of the rate.
func TestFailStaticCountsApart(t *testing.T) {
	h := good()
	h.Requests = append(h.Requests,
		history.Request{Gateway: "n1", Invoke: 20 * s, Complete: 21 * s, Class: history.GatewayLost}, // n1 killed
		history.Request{Gateway: "n2", Invoke: 20 * s, Complete: 21 * s, Class: history.NoWorker},
		history.Request{Gateway: "n2", Invoke: 22 * s, Complete: 23 * s, Class: history.Drained},
	)
	c := CountRequests(h)
	if c != (Requests{OK: 1, NoWorker: 1, Drained: 1, GatewayDown: 1}) {
		t.Errorf("counts %+v", c)
	}
	if r := FailStatic(h, 0.95); !r.OK {
		t.Errorf("fail_static: %s", r.Detail)
	}
}

// TestDisabledRoutingFollowsTheAck: the acknowledgement binds the gateways its fleet_ack lists
// as having applied the disable; a gateway it did not wait for (cut off, dead) is counted
// apart, not failed.
func TestDisabledRoutingFollowsTheAck(t *testing.T) {
	h := good()
	h.Admin = []history.AdminOp{h.Admin[0], h.Admin[1], h.Admin[3]}
	h.Admin[1].Acked = []string{"n1", "n2"}
	late := func(g string) history.Request {
		return history.Request{Gateway: g, Worker: "w-1", Invoke: 4 * s, Complete: 4100 * time.Millisecond, Class: history.Served}
	}
	h.Requests = append(h.Requests, late("n3"))
	if r := NoDisabledRouting(h); !r.OK || !strings.Contains(r.Detail, "did not wait for") {
		t.Errorf("a gateway the ack did not wait for: ok=%v %s", r.OK, r.Detail)
	}
	h.Requests = append(h.Requests, late("n2"))
	if r := NoDisabledRouting(h); r.OK {
		t.Errorf("a gateway that acknowledged the disable routed to the worker, and the checker held: %s", r.Detail)
	}
}

// TestStaleOwnerProbeOnResume is seed 11's case (5 gateways, --hold 15s, kill, pause,
// partition-one): n2 owned w-1, was paused past the failover grace, and probed once on resume
// before it applied the failover to n3. Its last sample before the pause named it owner, so the
// probe is a stale view, counted in the detail; a probe after a sample that named n3 is not.
func TestStaleOwnerProbeOnResume(t *testing.T) {
	h := history.History{
		Owners: []history.OwnerSample{
			{At: 10 * s, Gateway: "n2", Rows: row("n2", 5)}, // then paused until 21.7 s
			{At: 15 * s, Gateway: "n3", Rows: row("n3", 9)}, // the failover
			{At: 22400 * time.Millisecond, Gateway: "n2", Rows: row("n3", 9)},
			{At: 23400 * time.Millisecond, Gateway: "n2", Rows: row("n3", 9)},
		},
		Probes: []history.ProbeSample{
			{At: 21400 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n2": 12, "n3": 3}},
			{At: 22300 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n2": 13, "n3": 4}},
		},
	}
	r := SingleOwner(h)
	if !r.OK || !strings.Contains(r.Detail, "stale view") {
		t.Errorf("a probe on resume: ok=%v %s", r.OK, r.Detail)
	}
	h.Probes = append(h.Probes,
		history.ProbeSample{At: 23500 * time.Millisecond, Worker: "w-1", Probes: map[string]int64{"n2": 13, "n3": 5}},
		history.ProbeSample{At: 25 * s, Worker: "w-1", Probes: map[string]int64{"n2": 14, "n3": 6}})
	if r := SingleOwner(h); r.OK {
		t.Errorf("n2 probed after its own sample named n3 the owner, and the checker held: %s", r.Detail)
	}
}

// TestRegisterAnswers200AfterResend is seed 42's history (5 gateways, 6 engines, 240 s): the
// first registration of w-1 answered 200, not 201, because the gateway re-sent it after the
// leader was stopped and the first copy had committed. The model rejects it: no client saw
// the record created. meshgw now answers 201 there
// (gateway/admin.TestRegisterAnswersCreatedForItsOwnResentCopy).
func TestRegisterAnswers200AfterResend(t *testing.T) {
	h := history.History{
		Admin: []history.AdminOp{
			read(false, false, 7.7, 7.9),
			op(history.Register, history.OK, 200, 8.6, 16.3),
			read(true, false, 8.6, 11.2),
		},
		Weights: map[string]bool{},
	}
	if r := Linearizable(h, 10*time.Second); r.OK {
		t.Errorf("a 200 for the registration that created the record passed: %s", r.Detail)
	}
	h.Admin[1].Status = 201
	if r := Linearizable(h, 10*time.Second); !r.OK {
		t.Errorf("with 201: %s", r.Detail)
	}
}

// TestDeleteDrainsThenRemoves: a DELETE answered 202 puts the record in draining (reads see it
// draining, a registration is refused), then its owner removes it on its own (a read finds
// nothing), and a registration brings it back enabled; a request after the delete reaches the
// worker only once it is back. The model rejects a drained record that comes back without a
// registration, and no_lost_ack a record that outlives its acknowledged delete.
func TestDeleteDrainsThenRemoves(t *testing.T) {
	refused := op(history.Register, history.Failed, 409, 3.5, 3.6)
	refused.Code = "worker_exists"
	h := history.History{
		Admin: []history.AdminOp{
			op(history.Register, history.OK, 201, 0, 1),
			op(history.Disable, history.OK, 200, 1, 2),
			op(history.Delete, history.OK, 202, 2, 3),
			readDraining(true, 3, 3.4),
			refused,
			read(false, false, 9, 9.5), // removed at the deadline
			op(history.Register, history.OK, 201, 10, 11),
			read(true, false, 12, 13), // a new record: enabled, not draining
		},
		Requests: []history.Request{
			{Gateway: "n1", Worker: "w-1", Invoke: 11500 * time.Millisecond, Complete: 11600 * time.Millisecond, Class: history.Served},
		},
		Final:   map[string]map[string]history.Final{"n1": {"w-1": {Found: true}}, "n2": {"w-1": {Found: true}}},
		Weights: map[string]bool{},
	}
	for name, r := range checkers(h) {
		if !r.OK && name != "single_owner" && name != "owner_within_bound" {
			t.Errorf("%s: %s", name, r.Detail)
		}
	}
	// Without the second registration: the record may not come back, and the request after
	// the delete reached a worker the gateways had stopped sending to.
	h.Admin = h.Admin[:6]
	h.Admin = append(h.Admin, read(true, true, 12, 13))
	if r := Linearizable(h, 10*time.Second); r.OK {
		t.Errorf("a removed record came back without a registration: %s", r.Detail)
	}
	if r := NoLostAck(h, []string{"n1", "n2"}); r.OK {
		t.Errorf("the record outlived its acknowledged delete: %s", r.Detail)
	}
	if r := NoDisabledRouting(h); r.OK {
		t.Errorf("a request after the acknowledged delete reached the worker: %s", r.Detail)
	}
}

// TestUnknownDeleteMayOrMayNotHappen: a DELETE whose outcome is unknown may have drained and
// removed the record at any time after it was sent, or never.
func TestUnknownDeleteMayOrMayNotHappen(t *testing.T) {
	h := history.History{
		Admin: []history.AdminOp{
			op(history.Register, history.OK, 201, 0, 1),
			op(history.Delete, history.Unknown, 0, 2, 0),
			read(true, false, 3, 4),  // not yet
			read(false, false, 5, 6), // now gone
		},
		Final:   map[string]map[string]history.Final{"n1": {}},
		Weights: map[string]bool{},
	}
	if r := Linearizable(h, 10*time.Second); !r.OK {
		t.Errorf("linearizable: %s", r.Detail)
	}
	if r := NoLostAck(h, []string{"n1"}); !r.OK {
		t.Errorf("no_lost_ack: %s", r.Detail)
	}
	h.Final["n1"] = map[string]history.Final{"w-1": {Found: true}} // or it never happened
	h.Admin = h.Admin[:3]
	if r := NoLostAck(h, []string{"n1"}); !r.OK {
		t.Errorf("no_lost_ack with the record kept: %s", r.Detail)
	}
	// Gone, then back without a registration: no.
	h.Admin = append(h.Admin, read(false, false, 5, 6), read(true, false, 7, 8))
	if r := Linearizable(h, 10*time.Second); r.OK {
		t.Errorf("the record came back after the unknown delete removed it: %s", r.Detail)
	}
}

// TestWeightUpdateNotStarted: a weight update that sent nothing says what became of its
// targets: 503 fleet_ack_timeout enabled them again, 503 journal_unresolved
// left them disabled, 503 outcome_unknown may have done either.
func TestWeightUpdateNotStarted(t *testing.T) {
	tests := []struct {
		code     string
		out      history.Outcome
		disabled bool // the final state
		ok       bool
	}{
		{"fleet_ack_timeout", history.OK, false, true},
		{"fleet_ack_timeout", history.OK, true, false}, // a coordinator drained mid-update
		{"journal_unresolved", history.OK, true, true},
		{"journal_unresolved", history.OK, false, false},
		{"outcome_unknown", history.Unknown, true, true},
		{"outcome_unknown", history.Unknown, false, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s disabled %v", tt.code, tt.disabled), func(t *testing.T) {
			wu := op(history.WeightUpdate, tt.out, 503, 2, 3)
			wu.Code = tt.code
			h := history.History{
				Admin:   []history.AdminOp{op(history.Register, history.OK, 201, 0, 1), wu},
				Final:   map[string]map[string]history.Final{"n1": {"w-1": {Found: true, Disabled: tt.disabled}}},
				Weights: map[string]bool{},
			}
			if r := NoLostAck(h, []string{"n1"}); r.OK != tt.ok {
				t.Errorf("no_lost_ack %v, want %v: %s", r.OK, tt.ok, r.Detail)
			}
		})
	}
}

// row is one gateway's view of w-1: its owner at epoch.
func row(owner string, epoch uint64) []history.OwnerRow {
	return []history.OwnerRow{{Worker: "w-1", Owner: owner, Epoch: epoch}}
}

// TestLossesByCause: each lost request gets the cause its history shows, and the hang goal
// counts per gateway and per hang.
func TestLossesByCause(t *testing.T) {
	ms := time.Millisecond
	h := history.History{
		Down: []history.Down{{Node: "n3", From: 10 * s, To: 12 * s, Reason: "kill"}},
		Engines: []history.EngineFault{
			{Worker: "w-1", Kind: "engine-hang", From: 20 * s, To: 28 * s},
			{Worker: "w-2", Kind: "engine-flap", From: 30 * s, To: 32 * s},
			{Worker: "w-1", Kind: "engine-hang", From: 40 * s, To: 48 * s},
		},
		Requests: []history.Request{
			{Gateway: "n1", Worker: "w-1", Status: 200, Invoke: 1 * s, Complete: 1*s + ms, Class: history.Served},
			{Gateway: "n1", Status: 503, Invoke: 2 * s, Complete: 2*s + ms, Class: history.NoWorker},
			{Gateway: "n3", Invoke: 11 * s, Complete: 11*s + ms, Class: history.GatewayLost},                             // shutdown
			{Gateway: "n1", Worker: "w-1", Status: 504, Invoke: 20 * s, Complete: 26 * s, Class: history.GatewayLost},    // hang 0
			{Gateway: "n2", Worker: "w-1", Status: 504, Invoke: 21 * s, Complete: 27 * s, Class: history.GatewayLost},    // hang 0
			{Gateway: "n2", Invoke: 21 * s, Complete: 31 * s, Class: history.GatewayLost},                                // hang 0, no answer
			{Gateway: "n2", Invoke: 50 * s, Complete: 60 * s, Class: history.GatewayLost},                                // no hang then
			{Gateway: "n1", Worker: "w-2", Status: 503, Invoke: 31 * s, Complete: 31*s + ms, Class: history.GatewayLost}, // flap
			{Gateway: "n1", Worker: "w-3", Status: 503, Invoke: 31 * s, Complete: 31*s + ms, Class: history.GatewayLost}, // no fault on w-3
			{Gateway: "n1", Worker: "w-2", Status: 504, Invoke: 41 * s, Complete: 44 * s, Class: history.GatewayLost},    // w-2 did not hang
			{Gateway: "n1", Worker: "w-1", Status: 504, Invoke: 40 * s, Complete: 43 * s, Class: history.GatewayLost},    // hang 2
		},
	}
	losses := Losses(h, 3*s)
	var got []string
	for _, l := range losses {
		got = append(got, l.Cause)
	}
	want := []string{CauseShutdown, CauseEngineHang, CauseEngineHang, CauseEngineHang, CauseGatewayFault, CauseEngineError,
		CauseGatewayFault, CauseGatewayFault, CauseEngineHang}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{CauseShutdown: 1, CauseEngineHang: 4, CauseEngineError: 1, CauseGatewayFault: 3}, LostByCause(losses)); diff != "" {
		t.Errorf("by cause (-want +got):\n%s", diff)
	}
	if r := NoGatewayFault(losses); r.OK {
		t.Errorf("no_gateway_fault held: %s", r.Detail)
	}
	r := HangLosses(h, losses)
	if want := "2 engine hangs, 2 of them cost requests: 2 times a gateway lost one, 1 times more than one"; !r.OK || !strings.Contains(r.Detail, want) {
		t.Errorf("hang_losses: ok=%v %q, want ok and %q", r.OK, r.Detail, want)
	}
	h.Requests = append(h.Requests, history.Request{Gateway: "n2", Worker: "w-1", Status: 504, Invoke: 27 * s, Complete: 30 * s,
		Class: history.GatewayLost})
	after := "n2 sent a request at 27s into the hang of w-1 that began at 20s, after its own timeout into it came back at 27s"
	if r := HangLosses(h, Losses(h, 3*s)); r.OK || !strings.Contains(r.Detail, after) {
		t.Errorf("hang_losses: ok=%v %q, want a failure with %q", r.OK, r.Detail, after)
	}
}

// A request lost while its gateway's region, or its worker's, was cut off is the cut's loss;
// one that another cause explains keeps it, and one outside the cut stays the gateway's.
func TestLossesToARegionCut(t *testing.T) {
	ms := time.Millisecond
	h := history.History{
		Down:    []history.Down{{Node: "n1", From: 12 * s, To: 13 * s, Reason: "kill"}},
		Engines: []history.EngineFault{{Worker: "w-2", Kind: "engine-hang", From: 14 * s, To: 18 * s}},
		Cuts:    []history.RegionCut{{Region: "eu", Gateways: []string{"n1"}, Workers: []string{"w-1"}, From: 10 * s, To: 20 * s}},
		Requests: []history.Request{
			{Gateway: "n1", Status: 502, Invoke: 11 * s, Complete: 11*s + ms, Class: history.GatewayLost},                           // the cut region's client
			{Gateway: "n2", Worker: "w-1", Status: 502, Invoke: 9 * s, Complete: 10*s + ms, Class: history.GatewayLost},             // to the cut region's worker
			{Gateway: "n2", Worker: "w-3", Status: 502, Invoke: 15 * s, Complete: 15*s + ms, Class: history.GatewayLost},            // neither
			{Gateway: "n1", Invoke: 12 * s, Complete: 12*s + ms, Class: history.GatewayLost},                                        // shutdown first
			{Gateway: "n2", Worker: "w-2", Status: 504, Invoke: 14 * s, Complete: 17 * s, Class: history.GatewayLost},               // a hang
			{Gateway: "n2", Worker: "w-2", Status: 200, Stream: true, Invoke: 15 * s, Complete: 18 * s, Class: history.GatewayLost}, // a stream cut after the hang
			{Gateway: "n1", Status: 502, Invoke: 21 * s, Complete: 21*s + ms, Class: history.GatewayLost},                           // after the heal
		},
	}
	var got []string
	for _, l := range Losses(h, 3*s) {
		got = append(got, l.Cause)
	}
	want := []string{CauseRegionCut, CauseRegionCut, CauseGatewayFault, CauseShutdown, CauseEngineHang, CauseEngineHang, CauseGatewayFault}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
}
