package mesh

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/health"
)

// fakeNet connects bulletin engines by hand: broadcasts and direct sends are recorded, and the
// test delivers them.
type fakeNet struct {
	mu      sync.Mutex
	engines map[string]*bulletins
	queued  map[string][]fakeMsg // per sender, in order
	direct  []fakeMsg
	clock   time.Time
}

type fakeMsg struct {
	from, to, name string
	raw            []byte
}

type fakeTransport struct {
	net  *fakeNet
	self string
}

func (t fakeTransport) broadcast(name string, msg []byte) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	t.net.queued[t.self] = append(t.net.queued[t.self], fakeMsg{from: t.self, name: name, raw: msg})
}

func (t fakeTransport) sendTo(node string, msg []byte) error {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	t.net.direct = append(t.net.direct, fakeMsg{from: t.self, to: node, raw: msg})
	return nil
}

// recorder is a BulletinReceiver that keeps what it got.
type recorder struct {
	mu  sync.Mutex
	got []Bulletin
}

func (r *recorder) Bulletins(bs []Bulletin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, bs...)
}

func (r *recorder) take() []Bulletin {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func newFakeNet(ids ...string) (*fakeNet, map[string]*recorder) {
	n := &fakeNet{engines: map[string]*bulletins{}, queued: map[string][]fakeMsg{}, clock: time.Unix(1_800_000_000, 0)}
	recs := map[string]*recorder{}
	for _, id := range ids {
		e := newBulletins(bulletinConfig{self: id, now: n.now, spawn: func(f func()) { f() }}, fakeTransport{n, id}, newBulletinMetrics())
		recs[id] = &recorder{}
		e.setReceiver(recs[id])
		n.engines[id] = e
	}
	return n, recs
}

func (n *fakeNet) now() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.clock
}

func (n *fakeNet) advance(d time.Duration) {
	n.mu.Lock()
	n.clock = n.clock.Add(d)
	n.mu.Unlock()
}

// gossip delivers every queued broadcast to every other engine, until no engine queues more
// (relays included), and returns how many deliveries it made.
func (n *fakeNet) gossip() int {
	count := 0
	for round := 0; round < 100; round++ {
		n.mu.Lock()
		q := n.queued
		n.queued = map[string][]fakeMsg{}
		n.mu.Unlock()
		if len(q) == 0 {
			return count
		}
		for from, msgs := range q {
			for _, m := range msgs {
				for id, e := range n.engines {
					if id != from {
						e.handle(m.raw)
						count++
					}
				}
			}
		}
	}
	panic("gossip did not settle")
}

// deliverDirect hands the direct sends made so far (want of them) to their targets.
func (n *fakeNet) deliverDirect(t *testing.T, want int) []fakeMsg {
	t.Helper()
	n.mu.Lock()
	msgs := n.direct
	n.direct = nil
	n.mu.Unlock()
	if len(msgs) != want {
		t.Fatalf("direct sends: got %d, want %d", len(msgs), want)
	}
	for _, m := range msgs {
		n.engines[m.to].handle(m.raw)
	}
	return msgs
}

func ready(worker string, epoch uint64) Bulletin {
	return Bulletin{Worker: worker, Epoch: epoch, Health: health.Ready, Breaker: breaker.Closed, ProbeInterval: time.Second}
}

func TestPublishSpreadsAndCoalesces(t *testing.T) {
	n, recs := newFakeNet("a", "b", "c")
	a := n.engines["a"]
	a.publish(ready("w1", 5))
	if next := a.flush(n.now()); !next.IsZero() {
		t.Fatalf("a first bulletin waits until %v; want it sent at once", next)
	}
	n.gossip()
	for _, id := range []string{"b", "c"} {
		got := recs[id].take()
		if len(got) != 1 || got[0].Worker != "w1" || got[0].Owner != "a" || got[0].Health != health.Ready || got[0].Epoch != 5 {
			t.Fatalf("%s received %+v; want one ready bulletin of w1 from a at epoch 5", id, got)
		}
	}

	// The same state again is not a change: nothing is sent.
	a.publish(ready("w1", 5))
	if a.flush(n.now()); n.gossip() != 0 {
		t.Fatal("an unchanged bulletin was sent again")
	}

	// Two changes within the coalesce window: the first waits for the window, and only the
	// latest goes out.
	n.advance(10 * time.Millisecond)
	nr := ready("w1", 5)
	nr.Health = health.NotReady
	a.publish(nr)
	failed := nr
	failed.Health = health.Failed
	a.publish(failed)
	next := a.flush(n.now())
	if want := n.now().Add(DefaultCoalesce - 10*time.Millisecond); !next.Equal(want) {
		t.Fatalf("the change waits until %v; want the end of the window %v", next, want)
	}
	if n.gossip() != 0 {
		t.Fatal("a change was sent inside the coalesce window")
	}
	n.advance(90 * time.Millisecond)
	a.flush(n.now())
	n.gossip()
	got := recs["b"].take()
	if len(got) != 1 || got[0].Health != health.Failed {
		t.Fatalf("b received %+v; want the one latest state (failed)", got)
	}
}

func TestReceiveOrdersByEpochThenSeq(t *testing.T) {
	n, recs := newFakeNet("b")
	b := n.engines["b"]
	send := func(owner string, epoch, seq uint64, h health.State) bool {
		w := &meshv1.Bulletin{WorkerId: "w1", Owner: owner, Epoch: epoch, Seq: seq, Health: stateToWire(h)}
		b.handle(encode(msgBulletin, w))
		return len(recs["b"].take()) == 1
	}
	steps := []struct {
		name        string
		owner       string
		epoch, seq  uint64
		wantApplied bool
	}{
		{"first", "a", 5, 100, true},
		{"same seq again (a relay)", "a", 5, 100, false},
		{"older seq", "a", 5, 99, false},
		{"newer seq", "a", 5, 101, true},
		{"older epoch, any seq (the old owner after failover)", "a", 4, 1_000, false},
		{"newer epoch, lower seq (a new owner's clock)", "c", 9, 7, true},
		{"the old owner again", "a", 5, 2_000, false},
	}
	for _, s := range steps {
		if got := send(s.owner, s.epoch, s.seq, health.Ready); got != s.wantApplied {
			t.Errorf("%s: applied=%v, want %v", s.name, got, s.wantApplied)
		}
	}
	if v := testutil.ToFloat64(b.met.total.WithLabelValues(dirDroppedStale)); v != 4 {
		t.Errorf("dropped_stale = %v, want 4", v)
	}
	if v := testutil.ToFloat64(b.met.total.WithLabelValues(dirReceived)); v != 3 {
		t.Errorf("received = %v, want 3", v)
	}
}

func TestBeatMismatchAsksForTheWholeState(t *testing.T) {
	n, recs := newFakeNet("a", "b")
	a, b := n.engines["a"], n.engines["b"]
	a.publish(ready("w1", 1))
	a.publish(ready("w2", 1))
	a.flush(n.now())
	// b misses both bulletins (lost gossip).
	n.mu.Lock()
	n.queued = map[string][]fakeMsg{}
	n.mu.Unlock()

	a.beat()
	n.gossip()
	if h := b.heard("a"); !h.Equal(n.now()) {
		t.Fatalf("b heard a at %v, want %v (the beat)", h, n.now())
	}
	// The first beat may cross the newest bulletin in flight; the next two say it was lost
	// (a published nothing newer), and the second of them asks for a resync.
	n.advance(time.Second)
	a.beat()
	n.gossip()
	n.deliverDirect(t, 0)
	n.advance(time.Second)
	a.beat()
	n.gossip()
	req := n.deliverDirect(t, 1)
	if req[0].from != "b" || req[0].to != "a" {
		t.Fatalf("resync went %s -> %s, want b -> a", req[0].from, req[0].to)
	}
	ans := n.deliverDirect(t, 1) // a's answer: its whole state
	if ans[0].to != "b" {
		t.Fatalf("the state went to %s, want b", ans[0].to)
	}
	got := recs["b"].take()
	if len(got) != 2 {
		t.Fatalf("b got %d bulletins from the state, want 2", len(got))
	}
	// Now the digests agree: beats ask for nothing more.
	for range 3 {
		n.advance(time.Second)
		a.beat()
		n.gossip()
	}
	n.deliverDirect(t, 0)

	// a withdraws w2; its next state makes b forget it, and the digests agree again.
	a.withdraw("w2")
	n.advance(time.Second)
	a.beat()
	n.gossip()
	n.advance(3 * time.Second)
	a.beat()
	n.gossip()
	n.deliverDirect(t, 1)
	n.deliverDirect(t, 1)
	b.mu.Lock()
	_, still := b.seen["w2"]
	ov := *b.owners["a"]
	b.mu.Unlock()
	if still || ov.count != 1 || ov.digest != a.digest {
		t.Fatalf("after the state b holds w2=%v count=%d digest=%x; want w2 forgotten, 1 worker, digest %x", still, ov.count, ov.digest, a.digest)
	}

	// a withdraws its last worker: it keeps beating, so b learns that too.
	a.withdraw("w1")
	for range 3 { // beats, and the resyncs they ask for, until b agrees
		n.advance(3 * time.Second)
		a.beat()
		n.gossip()
		n.mu.Lock()
		pending := len(n.direct)
		n.mu.Unlock()
		if pending > 0 {
			n.deliverDirect(t, pending)
			n.deliverDirect(t, pending)
		}
	}
	b.mu.Lock()
	left := len(b.seen)
	b.mu.Unlock()
	if left != 0 {
		t.Fatalf("b still holds %d of a's workers after a withdrew them all", left)
	}
}

// Under steady changes some bulletin is always in flight when a beat arrives: that asks for
// nothing. Once the changes stop, a bulletin lost among them is repaired by a resync.
func TestBeatsDuringChangesAskForNothing(t *testing.T) {
	n, recs := newFakeNet("a", "b")
	a, b := n.engines["a"], n.engines["b"]
	for i := range 20 {
		w := ready(fmt.Sprintf("w%d", i), 1)
		if i%2 == 1 {
			w.Health = health.NotReady
		}
		a.publish(w)
		a.flush(n.now())
		if i == 5 { // this one is lost
			n.mu.Lock()
			n.queued = map[string][]fakeMsg{}
			n.mu.Unlock()
		}
		a.publish(ready(fmt.Sprintf("w%d", 100+i), 1)) // the newest, still in flight at the beat
		a.flush(n.now())
		n.mu.Lock()
		inFlight := n.queued["a"][len(n.queued["a"])-1]
		n.queued["a"] = n.queued["a"][:len(n.queued["a"])-1]
		n.mu.Unlock()
		a.beat()
		n.gossip()
		b.handle(inFlight.raw) // arrives after the beat
		n.advance(time.Second)
	}
	if got := testutil.ToFloat64(b.met.resyncs.WithLabelValues(resyncAsked)); got != 0 {
		t.Fatalf("b asked for %v resyncs during steady changes, want 0", got)
	}
	for range 3 { // quiet: b has the newest, the digest differs (w5 lost): a resync
		a.beat()
		n.gossip()
		n.advance(time.Second)
	}
	n.deliverDirect(t, 1)
	n.deliverDirect(t, 1)
	recs["b"].take()
	b.mu.Lock()
	ov := *b.owners["a"]
	b.mu.Unlock()
	if ov.digest != a.digest || ov.count != 40 {
		t.Fatalf("after the resync b holds %d workers, digest %x; want 40 and %x", ov.count, ov.digest, a.digest)
	}
}

// An owner answers at most maxAnswersPerSecond resyncs a second, whoever asks.
func TestResyncAnswersBounded(t *testing.T) {
	n, _ := newFakeNet("a")
	a := n.engines["a"]
	a.publish(ready("w1", 1))
	a.flush(n.now())
	for i := range 10 {
		a.handle(encode(msgResync, &meshv1.Resync{From: fmt.Sprintf("peer-%d", i)}))
	}
	if got := len(n.direct); got != maxAnswersPerSecond {
		t.Fatalf("answered %d resyncs in one second, want %d", got, maxAnswersPerSecond)
	}
	if got := testutil.ToFloat64(a.met.resyncs.WithLabelValues(resyncRefused)); got != 10-maxAnswersPerSecond {
		t.Fatalf("refused = %v, want %d", got, 10-maxAnswersPerSecond)
	}
}

func TestLocalStateBudget(t *testing.T) {
	n, _ := newFakeNet("a")
	a := n.engines["a"]
	if a.localState(true) != nil {
		t.Fatal("a node that owns nothing sent a state")
	}
	for i := range 2_000 {
		a.publish(ready("w-"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), 1))
	}
	a.flush(n.now())
	first := a.localState(true)
	if first == nil {
		t.Fatal("a join carried no state")
	}
	k := len(first)/DefaultStateBudget + 1
	if k < 2 {
		t.Fatalf("the state is %d bytes; the test wants one above the %d-byte budget", len(first), DefaultStateBudget)
	}
	sent := 0
	for range 10 * k {
		if a.localState(false) != nil {
			sent++
		}
	}
	if sent != 10 {
		t.Fatalf("periodic push/pulls carried the state %d times in %d; want 10 (one in %d)", sent, 10*k, k)
	}
}

func TestStateCountsDownAnOpenBreaker(t *testing.T) {
	n, recs := newFakeNet("a", "b")
	a, b := n.engines["a"], n.engines["b"]
	open := ready("w1", 1)
	open.Breaker, open.BreakerReopenIn = breaker.Open, 60*time.Second
	a.publish(open)
	a.flush(n.now())
	n.mu.Lock()
	n.queued = map[string][]fakeMsg{}
	n.mu.Unlock()
	n.advance(20 * time.Second)
	b.mergeRemote(a.localState(true))
	got := recs["b"].take()
	if len(got) != 1 || got[0].BreakerReopenIn != 40*time.Second {
		t.Fatalf("b got %+v; want the breaker to reopen in 40s", got)
	}
}

func TestBulletinWireRoundTrip(t *testing.T) {
	in := Bulletin{Worker: "w-1", Owner: "a", Epoch: 3, Seq: 99, Health: health.NotReady, HealthFailures: 3,
		Breaker: breaker.HalfOpen, BreakerSuccesses: 1, LastError: "HTTP 503", LastStatusCode: 503,
		LastProbe: time.UnixMilli(1_800_000_000_123), Models: []string{"m1"}, ActiveRequests: 4,
		ProbeInterval: 5 * time.Second, BreakerReopenIn: 1500 * time.Millisecond}
	kind, m, err := decode(encode(msgBulletin, toWire(&in)))
	if err != nil || kind != msgBulletin {
		t.Fatalf("decode: %v %q", err, kind)
	}
	if diff := cmp.Diff(in, fromWire(m.(*meshv1.Bulletin))); diff != "" {
		t.Fatalf("round trip (-in +out):\n%s", diff)
	}
	for _, bad := range [][]byte{nil, {'x'}, {msgBulletin, 0xff, 0xff}} {
		if _, _, err := decode(bad); err == nil {
			t.Errorf("decode(%q) succeeded", bad)
		}
	}
}

func FuzzHandleBulletinMessage(f *testing.F) {
	f.Add(encode(msgBulletin, toWire(&Bulletin{Worker: "w", Owner: "a", Epoch: 1, Seq: 2, Health: health.Ready})))
	f.Add(encode(msgBeat, &meshv1.Beat{Owner: "a", Seq: 3, Digest: 4, Workers: 1}))
	f.Add(encode(msgState, &meshv1.OwnedState{Owner: "a", Bulletins: []*meshv1.Bulletin{{WorkerId: "w", Owner: "a"}}}))
	f.Add(encode(msgResync, &meshv1.Resync{From: "c"}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, _ := newFakeNet("b")
		n.engines["b"].handle(raw) // must not panic
	})
}

// BenchmarkMergeState takes an owner's whole state of 100,000 workers, as a gateway does on a
// join or a resync, and reports the time per bulletin and the heap the relay's bookkeeping keeps
// per worker.
func BenchmarkMergeState(b *testing.B) {
	const n = 100_000
	st := &meshv1.OwnedState{Owner: "a", Bulletins: make([]*meshv1.Bulletin, n)}
	for i := range st.Bulletins {
		st.Bulletins[i] = toWire(&Bulletin{Worker: fmt.Sprintf("w-%012x", i), Owner: "a", Epoch: 1, Seq: 7, Health: health.Ready,
			Breaker: breaker.Closed, ProbeInterval: time.Second})
	}
	raw := encode(msgState, st)
	var before, after runtime.MemStats
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		net, _ := newFakeNet("b")
		e := net.engines["b"]
		e.setReceiver(discard{})
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		e.handle(raw)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := len(e.seen); got != n {
			b.Fatalf("seen %d", got)
		}
		runtime.KeepAlive(e)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/bulletin")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/worker")
}

type discard struct{}

func (discard) Bulletins([]Bulletin) {}

// Bulletins that arrive before the importer is installed (a join's state, taken while the
// gateway is still starting) are handed to it when it is, not lost: the node has already
// marked them seen, so nothing would bring them again.
func TestBulletinsBeforeTheReceiverAreKept(t *testing.T) {
	n, _ := newFakeNet("a", "b")
	a, b := n.engines["a"], n.engines["b"]
	b.recv.Store(nil)
	a.publish(ready("w1", 1))
	a.flush(n.now())
	b.mergeRemote(a.localState(true))
	late := &recorder{}
	b.setReceiver(late)
	if got := late.take(); len(got) != 1 || got[0].Worker != "w1" {
		t.Fatalf("the receiver installed late got %+v; want w1's bulletin", got)
	}
}
