package mesh

import (
	"testing"

	"google.golang.org/protobuf/proto"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
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
