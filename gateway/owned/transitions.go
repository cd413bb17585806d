package owned

import (
	"sync"
	"time"

	"github.com/meshgw/meshgw/breaker"
)

// maxTransitions bounds the recent transitions kept per owned worker.
const maxTransitions = 10

// Transition is one recent change of an owned worker's health or breaker state, for GET
// /workers/{id} and `meshctl workers get`.
type Transition struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // "health" or "breaker"
	From string    `json:"from"`
	To   string    `json:"to"`
}

// transitions keeps an owned worker's last maxTransitions transitions, oldest first. Its
// methods are safe for concurrent use; add runs inside the breaker's hooks, so it takes only its
// own lock.
type transitions struct {
	now  breaker.Clock
	mu   sync.Mutex
	list []Transition
}

func (t *transitions) add(kind, from, to string) {
	at := t.now.Now().UTC()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.list) == maxTransitions {
		copy(t.list, t.list[1:])
		t.list = t.list[:maxTransitions-1]
	}
	t.list = append(t.list, Transition{At: at, Kind: kind, From: from, To: to})
}

// recent returns a copy of the transitions, oldest first.
func (t *transitions) recent() []Transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Transition(nil), t.list...)
}

// breakerHooks adds recording the breaker's transitions to h.
func (t *transitions) breakerHooks(h breaker.Hooks) breaker.Hooks {
	next := h.OnTransition
	h.OnTransition = func(from, to breaker.State) {
		t.add("breaker", from.String(), to.String())
		if next != nil {
			next(from, to)
		}
	}
	return h
}
