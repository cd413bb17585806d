package main

import (
	"sync"
	"time"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
)

// tracker is the bulletin receiver of every peer but the owner: it keeps the health each peer
// holds per worker, and times when each peer comes to hold an awaited state.
type tracker struct {
	mu    sync.Mutex
	held  []map[string]health.State // per peer: worker → the health of its newest bulletin, if known
	want  map[string]health.State   // the awaited state: worker → health
	since time.Time                 // when the awaited state was published
	left  []int                     // per peer: workers of want it does not hold yet
	at    []time.Duration           // per peer: since → holding all of want; -1 until then
	short int                       // peers that do not hold all of want yet
	done  chan struct{}             // closed when short reaches 0
}

func newTracker(peers int) *tracker {
	t := &tracker{held: make([]map[string]health.State, peers), done: make(chan struct{})}
	for i := range t.held {
		t.held[i] = make(map[string]health.State)
	}
	close(t.done)
	return t
}

// receiver is peer i's mesh.BulletinReceiver.
func (t *tracker) receiver(i int) mesh.BulletinReceiver { return peerReceiver{t, i} }

type peerReceiver struct {
	t *tracker
	i int
}

func (r peerReceiver) Bulletins(bs []mesh.Bulletin) { r.t.record(r.i, bs, time.Now()) }

// record takes the bulletins peer i received at now.
func (t *tracker) record(i int, bs []mesh.Bulletin, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range bs {
		old, had := t.held[i][b.Worker]
		if b.HealthUnknown {
			delete(t.held[i], b.Worker)
		} else {
			t.held[i][b.Worker] = b.Health
		}
		h, ok := t.want[b.Worker]
		if !ok {
			continue
		}
		switch was, is := had && old == h, !b.HealthUnknown && b.Health == h; {
		case !was && is:
			t.left[i]--
		case was && !is:
			t.left[i]++
		}
	}
	if t.want != nil && t.left[i] == 0 && t.at[i] < 0 {
		t.at[i] = now.Sub(t.since)
		if t.short--; t.short == 0 {
			close(t.done)
		}
	}
}

// expect starts waiting for every peer to hold want, published at since; the channel is closed
// once they all do (at once if they already do).
func (t *tracker) expect(want map[string]health.State, since time.Time) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.want, t.since, t.short, t.done = want, since, 0, make(chan struct{})
	t.left, t.at = make([]int, len(t.held)), make([]time.Duration, len(t.held))
	for i, held := range t.held {
		t.at[i] = -1
		for w, h := range want {
			if hw, ok := held[w]; !ok || hw != h {
				t.left[i]++
			}
		}
		if t.left[i] == 0 {
			t.at[i] = 0
		} else {
			t.short++
		}
	}
	if t.short == 0 {
		close(t.done)
	}
	return t.done
}

// arrivals returns, per peer, how long after since it came to hold the awaited state; -1 for a
// peer that does not hold it yet.
func (t *tracker) arrivals() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.at...)
}

// holding returns how many peers hold all of the awaited state.
func (t *tracker) holding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.held) - t.short
}
