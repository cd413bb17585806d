package mesh

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// Bulletin is one worker's runtime state as its owner publishes it (DESIGN.md section 4). The
// owner fills everything but Owner and Seq, which Publish sets.
type Bulletin struct {
	Worker string // worker id
	Owner  string // node id of the owner
	Epoch  uint64 // the record's ownership epoch (fencing token)
	Seq    uint64 // the owner's clock when it sent the bulletin

	// Health is the worker's health state at its owner, unless HealthUnknown.
	Health health.State
	// HealthUnknown is set when the bulletin names no health state, and Health is then
	// meaningless. It encodes as HEALTH_STATE_UNSPECIFIED; a bulletin that carries that, or a
	// value this gateway does not know (a newer peer's), decodes with it set.
	HealthUnknown   bool
	HealthFailures  int
	HealthSuccesses int
	// Breaker is the worker's circuit breaker state at its owner, unless BreakerUnknown.
	Breaker breaker.State
	// BreakerUnknown is set when the bulletin names no breaker state, and Breaker is then
	// meaningless. It encodes as BREAKER_STATE_UNSPECIFIED; a bulletin that carries that, or a
	// value this gateway does not know (a newer peer's), decodes with it set.
	BreakerUnknown   bool
	BreakerFailures  int
	BreakerSuccesses int
	// BreakerReopenIn is, while the breaker is open, how long until its timeout passes, from
	// when the owner sent the bulletin.
	BreakerReopenIn time.Duration
	LastError       string
	LastStatusCode  int
	LastProbe       time.Time
	Models          []string
	ActiveRequests  int64
	// ProbeInterval is the worker's probe interval at its owner; its imported state is stale
	// after three of them without news from the owner.
	ProbeInterval time.Duration
}

// HealthText is the bulletin's health as logs print it: Health's text (its name in the admin
// API), or "" when HealthUnknown.
func (b *Bulletin) HealthText() string {
	if b.HealthUnknown {
		return ""
	}
	return b.Health.String()
}

// BreakerText is the bulletin's breaker state as logs print it: Breaker's text (its name in the
// admin API), or "" when BreakerUnknown.
func (b *Bulletin) BreakerText() string {
	if b.BreakerUnknown {
		return ""
	}
	return b.Breaker.String()
}

// sameBreaker reports whether b and o carry the same breaker state: both unknown, or the same.
func (b *Bulletin) sameBreaker(o *Bulletin) bool {
	return b.BreakerUnknown == o.BreakerUnknown && (b.BreakerUnknown || b.Breaker == o.Breaker)
}

// sameHealth reports whether b and o carry the same health: both unknown, or the same state.
func (b *Bulletin) sameHealth(o *Bulletin) bool {
	return b.HealthUnknown == o.HealthUnknown && (b.HealthUnknown || b.Health == o.Health)
}

// Same reports whether b and o describe the same state, ignoring what changes without news:
// the sequence, the probe time, the requests in flight and the remaining open time. The owner
// publishes a bulletin only when this state changed.
func (b *Bulletin) Same(o *Bulletin) bool {
	if b.Worker != o.Worker || b.Epoch != o.Epoch || !b.sameHealth(o) || b.HealthFailures != o.HealthFailures ||
		b.HealthSuccesses != o.HealthSuccesses || !b.sameBreaker(o) || b.BreakerFailures != o.BreakerFailures ||
		b.BreakerSuccesses != o.BreakerSuccesses || b.LastError != o.LastError || b.LastStatusCode != o.LastStatusCode ||
		b.ProbeInterval != o.ProbeInterval || len(b.Models) != len(o.Models) {
		return false
	}
	for i := range b.Models {
		if b.Models[i] != o.Models[i] {
			return false
		}
	}
	return true
}

// Wire types: each message on the wire is one of these bytes, then the protobuf encoding.
const (
	msgBulletin byte = 'b' // meshv1.Bulletin
	msgBeat     byte = 'h' // meshv1.Beat
	msgResync   byte = 'r' // meshv1.Resync
	msgState    byte = 's' // meshv1.OwnedState
)

// maxWireMessage bounds a decoded message: 10,000 bulletins of a generous size.
const maxWireMessage = 64 << 20

var errMessage = errors.New("mesh: malformed bulletin message")

// healthWire is the wire's value of each health state, indexed by the state.
var healthWire = [...]meshv1.HealthState{
	health.Pending:  meshv1.HealthState_HEALTH_STATE_PENDING,
	health.Ready:    meshv1.HealthState_HEALTH_STATE_READY,
	health.NotReady: meshv1.HealthState_HEALTH_STATE_NOT_READY,
	health.Failed:   meshv1.HealthState_HEALTH_STATE_FAILED,
	health.Draining: meshv1.HealthState_HEALTH_STATE_DRAINING,
}

// stateToWire is the wire's value of s: the one mapping of a health state to the protobuf
// enum. A state without one is HEALTH_STATE_UNSPECIFIED.
func stateToWire(s health.State) meshv1.HealthState {
	if int(s) < len(healthWire) {
		return healthWire[s]
	}
	return meshv1.HealthState_HEALTH_STATE_UNSPECIFIED
}

// stateFromWire is the health state of the wire's value w, and false for
// HEALTH_STATE_UNSPECIFIED or a value this gateway does not know (a newer peer's).
func stateFromWire(w meshv1.HealthState) (health.State, bool) {
	for s, v := range healthWire {
		if v == w && w != meshv1.HealthState_HEALTH_STATE_UNSPECIFIED {
			return health.State(s), true
		}
	}
	return 0, false
}

// healthToWire is the wire's value of b's health: HEALTH_STATE_UNSPECIFIED when unknown.
func healthToWire(b *Bulletin) meshv1.HealthState {
	if b.HealthUnknown {
		return meshv1.HealthState_HEALTH_STATE_UNSPECIFIED
	}
	return stateToWire(b.Health)
}

// breakerWire is the wire's value of each breaker state, indexed by the state.
var breakerWire = [...]meshv1.BreakerState{
	breaker.Closed:   meshv1.BreakerState_BREAKER_STATE_CLOSED,
	breaker.Open:     meshv1.BreakerState_BREAKER_STATE_OPEN,
	breaker.HalfOpen: meshv1.BreakerState_BREAKER_STATE_HALF_OPEN,
}

// breakerStateToWire is the wire's value of s: the one mapping of a breaker state to the
// protobuf enum. A state without one is BREAKER_STATE_UNSPECIFIED.
func breakerStateToWire(s breaker.State) meshv1.BreakerState {
	if s >= 0 && int(s) < len(breakerWire) {
		return breakerWire[s]
	}
	return meshv1.BreakerState_BREAKER_STATE_UNSPECIFIED
}

// breakerStateFromWire is the breaker state of the wire's value w, and false for
// BREAKER_STATE_UNSPECIFIED or a value this gateway does not know (a newer peer's).
func breakerStateFromWire(w meshv1.BreakerState) (breaker.State, bool) {
	for s, v := range breakerWire {
		if v == w && w != meshv1.BreakerState_BREAKER_STATE_UNSPECIFIED {
			return breaker.State(s), true
		}
	}
	return 0, false
}

// breakerToWire is the wire's value of b's breaker state: BREAKER_STATE_UNSPECIFIED when
// unknown.
func breakerToWire(b *Bulletin) meshv1.BreakerState {
	if b.BreakerUnknown {
		return meshv1.BreakerState_BREAKER_STATE_UNSPECIFIED
	}
	return breakerStateToWire(b.Breaker)
}

func toWire(b *Bulletin) *meshv1.Bulletin {
	w := &meshv1.Bulletin{
		WorkerId: b.Worker, Owner: b.Owner, Epoch: b.Epoch, Seq: b.Seq,
		Health: healthToWire(b), Breaker: breakerToWire(b),
		BreakerFailures: clampU32(b.BreakerFailures), BreakerSuccesses: clampU32(b.BreakerSuccesses),
		BreakerReopenMs: clampU32(int(b.BreakerReopenIn / time.Millisecond)),
		HealthFailures:  clampU32(b.HealthFailures), HealthSuccesses: clampU32(b.HealthSuccesses),
		LastError: validUTF8(b.LastError), LastStatusCode: int32(b.LastStatusCode), Models: b.Models,
		ActiveRequests: b.ActiveRequests, ProbeIntervalMs: clampU32(int(b.ProbeInterval / time.Millisecond)),
	}
	copied := false
	for i, m := range b.Models {
		if v := validUTF8(m); v != m {
			if !copied { // b's list is not the wire message's to change
				w.Models, copied = slices.Clone(b.Models), true
			}
			w.Models[i] = v
		}
	}
	if !b.LastProbe.IsZero() {
		w.LastProbeUnixMs = b.LastProbe.UnixMilli()
	}
	return w
}

// validUTF8 repairs text that came from outside (a probe's error, which may quote what a worker
// answered; the models a worker lists): protobuf refuses to encode invalid UTF-8 in a string,
// and encode would panic. Valid text is returned as it is, without a copy.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func fromWire(w *meshv1.Bulletin) Bulletin {
	h, known := stateFromWire(w.GetHealth())
	brk, brkKnown := breakerStateFromWire(w.GetBreaker())
	b := Bulletin{
		Worker: w.GetWorkerId(), Owner: w.GetOwner(), Epoch: w.GetEpoch(), Seq: w.GetSeq(),
		Health: h, HealthUnknown: !known, Breaker: brk, BreakerUnknown: !brkKnown,
		BreakerFailures: int(w.GetBreakerFailures()), BreakerSuccesses: int(w.GetBreakerSuccesses()),
		BreakerReopenIn: time.Duration(w.GetBreakerReopenMs()) * time.Millisecond,
		HealthFailures:  int(w.GetHealthFailures()), HealthSuccesses: int(w.GetHealthSuccesses()),
		LastError: w.GetLastError(), LastStatusCode: int(w.GetLastStatusCode()), Models: w.GetModels(),
		ActiveRequests: w.GetActiveRequests(), ProbeInterval: time.Duration(w.GetProbeIntervalMs()) * time.Millisecond,
	}
	if ms := w.GetLastProbeUnixMs(); ms != 0 {
		b.LastProbe = time.UnixMilli(ms)
	}
	return b
}

func clampU32(n int) uint32 {
	switch {
	case n < 0:
		return 0
	case int64(n) > int64(^uint32(0)):
		return ^uint32(0)
	}
	return uint32(n)
}

// encode frames m with its type byte.
func encode(kind byte, m proto.Message) []byte {
	raw, err := proto.MarshalOptions{}.MarshalAppend([]byte{kind}, m)
	if err != nil { // only for invalid UTF-8 in a string field, which meshgw never puts there
		panic(fmt.Sprintf("mesh: encode bulletin message: %v", err))
	}
	return raw
}

// decode reads a framed message: its type and the decoded body.
func decode(raw []byte) (byte, proto.Message, error) {
	if len(raw) < 1 || len(raw) > maxWireMessage {
		return 0, nil, errMessage
	}
	var m proto.Message
	switch raw[0] {
	case msgBulletin:
		m = &meshv1.Bulletin{}
	case msgBeat:
		m = &meshv1.Beat{}
	case msgResync:
		m = &meshv1.Resync{}
	case msgState:
		m = &meshv1.OwnedState{}
	default:
		return 0, nil, fmt.Errorf("%w: type %q", errMessage, raw[0])
	}
	if err := proto.Unmarshal(raw[1:], m); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", errMessage, err)
	}
	return raw[0], m, nil
}

// digestOf is one bulletin's share of an owner's digest: the XOR of these over everything an
// owner published, so adding or replacing one bulletin is two XORs. It must be the same on every
// gateway: FNV-1a 64 over the worker id and the seq, mixed by worker.Mix (no per-process seed).
func digestOf(id string, seq uint64) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write(binary.BigEndian.AppendUint64(nil, seq))
	return worker.Mix(h.Sum64())
}

// MarshalBulletin encodes b as the protobuf of the wire (without a frame), for a gateway that
// keeps imported state on disk.
func MarshalBulletin(b *Bulletin) ([]byte, error) { return proto.Marshal(toWire(b)) }

// UnmarshalBulletin decodes what MarshalBulletin wrote.
func UnmarshalBulletin(raw []byte) (Bulletin, error) {
	var w meshv1.Bulletin
	if err := proto.Unmarshal(raw, &w); err != nil {
		return Bulletin{}, fmt.Errorf("mesh: decode a saved bulletin: %w", err)
	}
	return fromWire(&w), nil
}
