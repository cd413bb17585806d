package pool

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// TestHungHold: a hold takes the worker out of routing at once and ends at its deadline, at a
// change of the worker's health, at ReleaseHung, or at its removal, whichever comes first; a
// second hold while one runs keeps the first deadline, and a timer of an ended hold releases
// nothing of the next one.
func TestHungHold(t *testing.T) {
	const hold = 30 * time.Second
	tests := []struct {
		name string
		// run acts on the hold of ws[0] (held at the start) and returns how long the hold has
		// still to run: 0 when it must have ended already.
		run func(p *Pool, ws []*Worker) time.Duration
	}{
		{"ends at its deadline", func(p *Pool, ws []*Worker) time.Duration {
			time.Sleep(hold - time.Second)
			return time.Second
		}},
		{"a second hold keeps the first deadline", func(p *Pool, ws []*Worker) time.Duration {
			time.Sleep(10 * time.Second)
			if p.HoldHung(ws[0].ID, hold) {
				t.Error("a second HoldHung started another hold")
			}
			return 20 * time.Second
		}},
		{"a change of health ends it", func(p *Pool, ws []*Worker) time.Duration {
			time.Sleep(5 * time.Second)
			if _, err := p.SetHealth(ws[0].ID, health.NotReady); err != nil {
				t.Fatal(err)
			}
			if _, err := p.SetHealth(ws[0].ID, health.Ready); err != nil {
				t.Fatal(err)
			}
			return 0
		}},
		{"the same health keeps it", func(p *Pool, ws []*Worker) time.Duration {
			if _, err := p.SetHealth(ws[0].ID, health.Ready); err != nil {
				t.Fatal(err)
			}
			time.Sleep(hold - time.Second)
			return time.Second
		}},
		{"ReleaseHung ends it", func(p *Pool, ws []*Worker) time.Duration {
			time.Sleep(time.Second)
			if !p.ReleaseHung(ws[0].ID) {
				t.Error("ReleaseHung ended no hold")
			}
			return 0
		}},
		{"an old timer does not end a new hold", func(p *Pool, ws []*Worker) time.Duration {
			time.Sleep(20 * time.Second)
			p.ReleaseHung(ws[0].ID)
			if !p.HoldHung(ws[0].ID, hold) { // ends at 50 s; the first timer would have fired at 30 s
				t.Fatal("no new hold")
			}
			time.Sleep(15 * time.Second)
			return 15 * time.Second
		}},
		{"a spec change keeps it", func(p *Pool, ws []*Worker) time.Duration {
			s := ws[0].Spec()
			s.Models = []string{"m"}
			if _, changed, err := p.Upsert(s, OriginLocal); err != nil || !changed {
				t.Fatalf("upsert: changed %v, err %v", changed, err)
			}
			time.Sleep(hold - time.Second)
			return time.Second
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(Config{})
				ws := addN(t, p, 2, nil)
				id := ws[0].ID
				if !p.HoldHung(id, hold) {
					t.Fatal("HoldHung started no hold")
				}
				if routable(p, id) {
					t.Fatal("a held worker is routable")
				}
				if got := p.Snapshot().Candidates(nil, 0, nil, nil); len(got) != 1 || got[0].ID != ws[1].ID {
					t.Fatalf("candidates while held: %v, want only the other worker", ids(got))
				}
				left := tt.run(p, ws)
				synctest.Wait()
				if left > 0 {
					time.Sleep(left - time.Millisecond)
					synctest.Wait()
					if routable(p, id) {
						t.Fatalf("the hold ended before its deadline")
					}
					time.Sleep(time.Millisecond)
					synctest.Wait()
				}
				if !routable(p, id) {
					t.Fatal("the hold did not end")
				}
				if p.Get(id).Gates() != 0 {
					t.Errorf("gates %b after the hold", p.Get(id).Gates())
				}
			})
		})
	}
}

// TestHungHoldOfAMissingOrRemovedWorker: holding a worker the pool does not hold does nothing,
// and removing a held worker stops its hold.
func TestHungHoldOfAMissingOrRemovedWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(Config{})
		ws := addN(t, p, 1, nil)
		if p.HoldHung("nope", time.Second) {
			t.Error("held a worker the pool does not hold")
		}
		p.HoldHung(ws[0].ID, time.Second)
		if err := p.Remove(ws[0].ID); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		n := len(p.holds)
		p.mu.Unlock()
		if n != 0 {
			t.Errorf("%d holds left after the removal", n)
		}
	})
}

func routable(p *Pool, id worker.ID) bool {
	return slices.ContainsFunc(p.Snapshot().Routable, func(w *Worker) bool { return w.ID == id })
}

func ids(ws []*Worker) []worker.ID {
	var out []worker.ID
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}
