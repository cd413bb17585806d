package mesh

import (
	"testing"

	"google.golang.org/protobuf/proto"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/health"
)

// TestHealthMapping pins the one mapping of every health state to its text (admin API, logs,
// metrics labels, Bulletin.HealthText) and to its wire value (the bulletin's protobuf enum), both
// ways, and through a whole bulletin's encoding.
func TestHealthMapping(t *testing.T) {
	table := []struct {
		state health.State
		text  string
		wire  meshv1.HealthState
	}{
		{health.Pending, "pending", meshv1.HealthState_HEALTH_STATE_PENDING},
		{health.Ready, "ready", meshv1.HealthState_HEALTH_STATE_READY},
		{health.NotReady, "not_ready", meshv1.HealthState_HEALTH_STATE_NOT_READY},
		{health.Failed, "failed", meshv1.HealthState_HEALTH_STATE_FAILED},
		{health.Draining, "draining", meshv1.HealthState_HEALTH_STATE_DRAINING},
	}
	named := 0
	for s := health.State(0); ; s++ {
		if _, err := health.ParseState(s.String()); err != nil {
			break
		}
		named++
	}
	if named != len(table) {
		t.Fatalf("health has %d named states, the table %d: map every state to the wire", named, len(table))
	}
	for _, c := range table {
		if got := c.state.String(); got != c.text {
			t.Errorf("%d.String() = %q, want %q", c.state, got, c.text)
		}
		if got, err := health.ParseState(c.text); err != nil || got != c.state {
			t.Errorf("ParseState(%q) = %v, %v; want %v", c.text, got, err, c.state)
		}
		if got := stateToWire(c.state); got != c.wire {
			t.Errorf("stateToWire(%v) = %v, want %v", c.state, got, c.wire)
		}
		if got, ok := stateFromWire(c.wire); !ok || got != c.state {
			t.Errorf("stateFromWire(%v) = %v, %v; want %v", c.wire, got, ok, c.state)
		}
		raw, err := MarshalBulletin(&Bulletin{Worker: "w", Health: c.state})
		if err != nil {
			t.Fatal(err)
		}
		var w meshv1.Bulletin
		if err := proto.Unmarshal(raw, &w); err != nil || w.GetHealth() != c.wire {
			t.Errorf("bulletin of health %v carries %v (%v), want %v", c.state, w.GetHealth(), err, c.wire)
		}
		back, err := UnmarshalBulletin(raw)
		if err != nil || back.Health != c.state || back.HealthUnknown || back.HealthText() != c.text {
			t.Errorf("bulletin of health %v decodes to %v, unknown %v, text %q (%v)",
				c.state, back.Health, back.HealthUnknown, back.HealthText(), err)
		}
	}

	// Unknown is "" in text and unspecified on the wire, and so is a state without a wire value;
	// a wire value without a state decodes to unknown.
	unknown := Bulletin{Worker: "w", Health: health.Ready, HealthUnknown: true}
	if got := healthToWire(&unknown); got != meshv1.HealthState_HEALTH_STATE_UNSPECIFIED {
		t.Errorf("healthToWire(unknown) = %v", got)
	}
	if got := unknown.HealthText(); got != "" {
		t.Errorf("HealthText of unknown = %q, want \"\"", got)
	}
	if pending := (Bulletin{Worker: "w"}); pending.Same(&Bulletin{Worker: "w", HealthUnknown: true}) {
		t.Error("a pending bulletin is the Same as an unknown one")
	}
	if !unknown.Same(&Bulletin{Worker: "w", HealthUnknown: true}) {
		t.Error("two unknown bulletins are not the Same: the state of an unknown one counts")
	}
	if got := stateToWire(health.State(len(table))); got != meshv1.HealthState_HEALTH_STATE_UNSPECIFIED {
		t.Errorf("stateToWire(out of range) = %v", got)
	}
	for _, w := range []meshv1.HealthState{meshv1.HealthState_HEALTH_STATE_UNSPECIFIED, meshv1.HealthState(99)} {
		if s, ok := stateFromWire(w); ok {
			t.Errorf("stateFromWire(%v) = %v, true; want false", w, s)
		}
		raw, err := proto.Marshal(&meshv1.Bulletin{WorkerId: "w", Health: w})
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalBulletin(raw)
		if err != nil || !back.HealthUnknown || back.HealthText() != "" {
			t.Errorf("bulletin of wire health %v decodes to %v, unknown %v (%v); want unknown",
				w, back.Health, back.HealthUnknown, err)
		}
		if again := healthToWire(&back); again != meshv1.HealthState_HEALTH_STATE_UNSPECIFIED {
			t.Errorf("bulletin of wire health %v encodes again as %v, want unspecified", w, again)
		}
	}
}

// TestBreakerMapping pins the one mapping of every breaker state to its text (admin API, logs,
// Bulletin.BreakerText) and to its wire value, both ways, through a whole bulletin's encoding,
// and what has no state: unknown, "" in text and unspecified on the wire.
func TestBreakerMapping(t *testing.T) {
	table := []struct {
		state breaker.State
		text  string
		wire  meshv1.BreakerState
	}{
		{breaker.Closed, "closed", meshv1.BreakerState_BREAKER_STATE_CLOSED},
		{breaker.Open, "open", meshv1.BreakerState_BREAKER_STATE_OPEN},
		{breaker.HalfOpen, "half_open", meshv1.BreakerState_BREAKER_STATE_HALF_OPEN},
	}
	var named int
	for s := breaker.State(0); ; s++ {
		if _, err := s.MarshalText(); err != nil {
			break
		}
		named++
	}
	if named != len(table) {
		t.Fatalf("breaker has %d named states, the table %d: map every state to the wire", named, len(table))
	}
	for _, c := range table {
		if got := c.state.String(); got != c.text {
			t.Errorf("%d.String() = %q, want %q", c.state, got, c.text)
		}
		if got := breakerStateToWire(c.state); got != c.wire {
			t.Errorf("breakerStateToWire(%v) = %v, want %v", c.state, got, c.wire)
		}
		if got, ok := breakerStateFromWire(c.wire); !ok || got != c.state {
			t.Errorf("breakerStateFromWire(%v) = %v, %v; want %v", c.wire, got, ok, c.state)
		}
		raw, err := MarshalBulletin(&Bulletin{Worker: "w", Breaker: c.state})
		if err != nil {
			t.Fatal(err)
		}
		var w meshv1.Bulletin
		if err := proto.Unmarshal(raw, &w); err != nil || w.GetBreaker() != c.wire {
			t.Errorf("bulletin of breaker %v carries %v (%v), want %v", c.state, w.GetBreaker(), err, c.wire)
		}
		back, err := UnmarshalBulletin(raw)
		if err != nil || back.Breaker != c.state || back.BreakerUnknown || back.BreakerText() != c.text {
			t.Errorf("bulletin of breaker %v decodes to %v, unknown %v, text %q (%v)",
				c.state, back.Breaker, back.BreakerUnknown, back.BreakerText(), err)
		}
	}

	unknown := Bulletin{Worker: "w", Breaker: breaker.Open, BreakerUnknown: true}
	if got := breakerToWire(&unknown); got != meshv1.BreakerState_BREAKER_STATE_UNSPECIFIED {
		t.Errorf("breakerToWire(unknown) = %v", got)
	}
	if got := unknown.BreakerText(); got != "" {
		t.Errorf("BreakerText of unknown = %q, want \"\"", got)
	}
	if closed := (Bulletin{Worker: "w"}); closed.Same(&Bulletin{Worker: "w", BreakerUnknown: true}) {
		t.Error("a closed bulletin is the Same as one of unknown breaker")
	}
	if !unknown.Same(&Bulletin{Worker: "w", BreakerUnknown: true}) {
		t.Error("two bulletins of unknown breaker are not the Same: the state of an unknown one counts")
	}
	for _, s := range []breaker.State{-1, breaker.State(len(table))} {
		if got := breakerStateToWire(s); got != meshv1.BreakerState_BREAKER_STATE_UNSPECIFIED {
			t.Errorf("breakerStateToWire(%v) = %v", s, got)
		}
	}
	for _, w := range []meshv1.BreakerState{meshv1.BreakerState_BREAKER_STATE_UNSPECIFIED, meshv1.BreakerState(99)} {
		if s, ok := breakerStateFromWire(w); ok {
			t.Errorf("breakerStateFromWire(%v) = %v, true; want false", w, s)
		}
		raw, err := proto.Marshal(&meshv1.Bulletin{WorkerId: "w", Breaker: w})
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalBulletin(raw)
		if err != nil || !back.BreakerUnknown || back.BreakerText() != "" {
			t.Errorf("bulletin of wire breaker %v decodes to %v, unknown %v (%v); want unknown",
				w, back.Breaker, back.BreakerUnknown, err)
		}
		if again := breakerToWire(&back); again != meshv1.BreakerState_BREAKER_STATE_UNSPECIFIED {
			t.Errorf("bulletin of wire breaker %v encodes again as %v, want unspecified", w, again)
		}
	}
}
