package testkit

import "sync"

// Members is a membership whose peers a test sets, for the reconcilers that read the mesh
// through a small interface of their own (voters.Membership, ownership.Membership): Peers and
// a Watch whose signals never block. P is the consumer's peer type, id its key.
type Members[P any] struct {
	id       func(P) string
	mu       sync.Mutex
	peers    map[string]P
	watchers map[chan struct{}]struct{}
}

// NewMembers is a membership of peers, each known by id(peer).
func NewMembers[P any](id func(P) string, peers ...P) *Members[P] {
	m := &Members[P]{id: id, peers: make(map[string]P), watchers: make(map[chan struct{}]struct{})}
	m.Set(peers...)
	return m
}

// Peers returns the peers set so far, in no order.
func (m *Members[P]) Peers() []P {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]P, 0, len(m.peers))
	for _, p := range m.peers {
		out = append(out, p)
	}
	return out
}

// Watch signals after each Set until the returned function stops it.
func (m *Members[P]) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.watchers[ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.watchers, ch)
		m.mu.Unlock()
	}
}

// Set records peers (replacing those of the same id) and signals every watcher without
// waiting.
func (m *Members[P]) Set(peers ...P) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range peers {
		m.peers[m.id(p)] = p
	}
	for ch := range m.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
