package consensus

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A peer is reached from its first answer until a heartbeat fails, again from its next answer,
// and nothing carries over to another leadership. The first answer of a peer not reached
// signals contact; later ones do not.
func TestHeartbeatsFollowContact(t *testing.T) {
	h := newHeartbeats()
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	fail := func(id string, when time.Time) {
		h.observe(raft.Observation{Data: raft.FailedHeartbeatObservation{PeerID: raft.ServerID(id)}}, when)
	}
	contacted := func() bool {
		select {
		case <-h.contact:
			return true
		default:
			return false
		}
	}
	steps := []struct {
		name            string
		do              func()
		id              string
		wantUnreachable bool
		wantContact     bool
	}{
		{name: "a peer just added has not answered", do: func() {}, id: "n2", wantUnreachable: true},
		{name: "its first answer reaches it", do: func() { h.answered("n2", at(0)) }, id: "n2", wantContact: true},
		{name: "more answers signal nothing", do: func() { h.answered("n2", at(10*time.Millisecond)) }, id: "n2"},
		{name: "a failed heartbeat marks it", do: func() { fail("n2", at(time.Second)) }, id: "n2", wantUnreachable: true},
		{name: "and the mark does not wear off without an answer", do: func() {}, id: "n2", wantUnreachable: true},
		{name: "raft's resumption is an answer", do: func() {
			h.observe(raft.Observation{Data: raft.ResumedHeartbeatObservation{PeerID: "n2"}}, at(5*time.Second))
		}, id: "n2", wantContact: true},
		{name: "a peer removed while failing and added again: the new loop's first answer", do: func() {
			fail("n3", at(6*time.Second))
			h.answered("n3", at(6*time.Second+100*time.Millisecond))
		}, id: "n3", wantContact: true},
		{name: "a new leadership forgets every answer", do: func() {
			h.observe(raft.Observation{Data: raft.LeaderObservation{LeaderID: "n1"}}, at(7*time.Second))
		}, id: "n2", wantUnreachable: true},
	}
	if !h.pending("n2") {
		t.Fatal("a peer neither reached nor failed is not pending")
	}
	for _, s := range steps {
		s.do()
		if got := h.unreachable(s.id); got != s.wantUnreachable {
			t.Fatalf("%s: unreachable(%s) = %v; want %v", s.name, s.id, got, s.wantUnreachable)
		}
		if got := contacted(); got != s.wantContact {
			t.Fatalf("%s: contact signalled %v; want %v", s.name, got, s.wantContact)
		}
	}
	// A peer whose heartbeats failed before any answer is unreachable, not pending: the seat
	// does not wait for it.
	fail("n4", at(8*time.Second))
	if !h.unreachable("n4") || h.pending("n4") {
		t.Fatalf("n4 after a failure: unreachable %v, pending %v; want true, false", h.unreachable("n4"), h.pending("n4"))
	}
}

// TestQuorumContact: a leader's contact with a quorum is the newest time by which enough
// voters had answered to make a quorum with it; a single voter is always in contact, and a
// leader that too few voters ever answered has none.
func TestQuorumContact(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	for _, tt := range []struct {
		name     string
		others   []raft.ServerID
		answered map[raft.ServerID]time.Time
		want     time.Time
	}{
		{"a single voter", nil, nil, now},
		{"3 voters, both answered", []raft.ServerID{"b", "c"}, map[raft.ServerID]time.Time{"b": at(-5), "c": at(-1)}, at(-1)},
		{"3 voters, one answered", []raft.ServerID{"b", "c"}, map[raft.ServerID]time.Time{"b": at(-5)}, at(-5)},
		{"3 voters, none answered", []raft.ServerID{"b", "c"}, nil, time.Time{}},
		{"5 voters: the second newest", []raft.ServerID{"b", "c", "d", "e"},
			map[raft.ServerID]time.Time{"b": at(-9), "c": at(-1), "d": at(-3), "e": at(-7)}, at(-3)},
		{"5 voters, one answered", []raft.ServerID{"b", "c", "d", "e"}, map[raft.ServerID]time.Time{"c": at(-1)}, time.Time{}},
		{"an answer from a non-voter does not count", []raft.ServerID{"b", "c"}, map[raft.ServerID]time.Time{"b": at(-4), "x": at(-1)}, at(-4)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeartbeats()
			for id, when := range tt.answered {
				h.answered(id, when)
			}
			if got := h.quorumContact(tt.others, now); !got.Equal(tt.want) {
				t.Errorf("quorumContact = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestHeartbeatsFollowMatch: a peer's log is known to hold the last entry an AppendEntries
// carried once it answered it with success; a refusal or a heartbeat (no entry named) says
// nothing, knowledge only grows, and a new leadership forgets it.
func TestHeartbeatsFollowMatch(t *testing.T) {
	h := newHeartbeats()
	entries := func(prev uint64, idx ...uint64) *raft.AppendEntriesRequest {
		req := &raft.AppendEntriesRequest{PrevLogEntry: prev}
		for _, i := range idx {
			req.Entries = append(req.Entries, &raft.Log{Index: i})
		}
		return req
	}
	ok, refused := &raft.AppendEntriesResponse{Success: true}, &raft.AppendEntriesResponse{}
	steps := []struct {
		name string
		req  *raft.AppendEntriesRequest
		resp *raft.AppendEntriesResponse
		want uint64 // the highest index held; holds(want+1) is false
	}{
		{"nothing answered yet", nil, nil, 0},
		{"a heartbeat names no entry", &raft.AppendEntriesRequest{}, ok, 0},
		{"a refused append", entries(4, 5, 6), refused, 0},
		{"an accepted append holds its last entry", entries(4, 5, 6), ok, 6},
		{"an empty append at its previous entry", entries(8), ok, 8},
		{"an older answer arriving late takes nothing back", entries(2, 3), ok, 8},
	}
	for _, s := range steps {
		if s.req != nil {
			h.matched("n2", s.req, s.resp)
		}
		if (s.want > 0 && !h.holds("n2", s.want)) || h.holds("n2", s.want+1) {
			t.Fatalf("%s: holds(%d) %v, holds(%d) %v; want true, false", s.name, s.want, h.holds("n2", s.want), s.want+1, h.holds("n2", s.want+1))
		}
	}
	// Asked about an index its log lacks, the leader is told once it holds it (contact), not
	// before, and not for an index nobody waits for.
	signalled := func() bool {
		select {
		case <-h.contact:
			return true
		default:
			return false
		}
	}
	signalled() // the steps above asked about indexes they then matched
	if h.holds("n2", 10) || signalled() {
		t.Fatal("holds(10) before any answer carried it, or a signal without news")
	}
	if h.matched("n2", entries(8, 9), ok); signalled() {
		t.Fatal("a signal before n2's log held the index awaited")
	}
	if h.matched("n2", entries(9, 10), ok); !signalled() {
		t.Fatal("no signal when n2's log came to hold the index awaited")
	}
	if h.matched("n2", entries(10, 11), ok); signalled() {
		t.Fatal("a signal for an index nobody waits for")
	}
	h.observe(raft.Observation{Data: raft.LeaderObservation{LeaderID: "n1"}}, time.Now())
	if h.holds("n2", 1) {
		t.Fatal("a new leadership kept what the last one knew of n2's log")
	}
}

// fakePipeline is a raft.AppendPipeline whose answers a test hands out.
type fakePipeline struct {
	ch     chan raft.AppendFuture
	closed bool
}

func (p *fakePipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return nil, nil
}
func (p *fakePipeline) Consumer() <-chan raft.AppendFuture { return p.ch }
func (p *fakePipeline) Close() error                       { p.closed = true; return nil }

// doneFuture is an answered raft.AppendFuture.
type doneFuture struct {
	req  *raft.AppendEntriesRequest
	resp *raft.AppendEntriesResponse
	err  error
}

func (f doneFuture) Error() error                          { return f.err }
func (f doneFuture) Start() time.Time                      { return time.Time{} }
func (f doneFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f doneFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// TestMatchPipeline: the answers raft reads from a pipeline are the transport's, in order, each
// recorded on the way (a failed one is not), and Close closes the transport's pipeline.
func TestMatchPipeline(t *testing.T) {
	h := newHeartbeats()
	inner := &fakePipeline{ch: make(chan raft.AppendFuture, 3)}
	p := newMatchPipeline(inner, "n2", h)
	ok := &raft.AppendEntriesResponse{Success: true}
	sent := []doneFuture{
		{req: &raft.AppendEntriesRequest{Entries: []*raft.Log{{Index: 7}}}, resp: ok},
		{req: &raft.AppendEntriesRequest{Entries: []*raft.Log{{Index: 9}}}, resp: ok, err: raft.ErrTransportShutdown},
		{req: &raft.AppendEntriesRequest{Entries: []*raft.Log{{Index: 8}}}, resp: ok},
	}
	for _, f := range sent {
		inner.ch <- f
	}
	for i, want := range sent {
		select {
		case got := <-p.Consumer():
			if got.Request() != want.req {
				t.Fatalf("answer %d: got the request of another", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("answer %d never reached raft", i)
		}
	}
	if !h.holds("n2", 8) || h.holds("n2", 9) {
		t.Fatalf("holds(8) %v, holds(9) %v; want true, false (the failed append is not counted)", h.holds("n2", 8), h.holds("n2", 9))
	}
	if err := p.Close(); err != nil || !inner.closed {
		t.Fatalf("Close = %v, transport pipeline closed %v", err, inner.closed)
	}
}
