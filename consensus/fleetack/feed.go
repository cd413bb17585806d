package fleetack

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/mesh"
)

// Pacing of the feeds that follow the peers' applied indexes.
const (
	// feedRetryMin and feedRetryMax bound the wait before a feed opens its stream again.
	feedRetryMin = 10 * time.Millisecond
	feedRetryMax = time.Second
	// feedGrace is how long an acknowledgement waits on a peer's feed alone before it also
	// asks the peer WaitApplied: a stream that stalls (a connection the kernel still retries
	// after a partition healed) delays the write by this much at most. (A follower that missed
	// the leader's commit notice applies the write at raft's next AppendEntries, within
	// CommitTimeout, and answers the ask then.)
	feedGrace = 50 * time.Millisecond
	// feedRecheck is how long a peer that served no WatchApplied is asked per write before its
	// feed tries the stream again (the peer may have been upgraded meanwhile).
	feedRecheck = time.Minute
)

// peerFeed is what one peer's WatchApplied stream has said: the applied index it pushed last,
// while the stream is open.
type peerFeed struct {
	mu          sync.Mutex
	applied     uint64 // 0 while no stream is open: a peer that restarted empty says so again
	unsupported bool   // the peer does not serve WatchApplied: ask it WaitApplied instead
	ended       bool   // the feed stopped (the peer is no longer live, or Close)
	changed     chan struct{}
}

func newPeerFeed() *peerFeed { return &peerFeed{changed: make(chan struct{})} }

// get returns the feed's state and a channel closed at its next change.
func (f *peerFeed) get() (applied uint64, unsupported, ended bool, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.unsupported, f.ended, f.changed
}

// set changes the feed's state under its lock and wakes the waiters.
func (f *peerFeed) set(change func(*peerFeed)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
	close(f.changed)
	f.changed = make(chan struct{})
}

// feed returns the feed that follows peer id, starting it when there is none.
func (a *FleetAck) feed(id string) *peerFeed {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.feeds[id]; f != nil {
		return f
	}
	f := newPeerFeed()
	if a.closed {
		f.ended = true
		return f
	}
	a.feeds[id] = f
	a.wg.Add(1)
	go a.follow(id, f)
	return f
}

// follow keeps a WatchApplied stream open to peer id while the mesh lists it alive or suspect,
// and records what it pushes. It ends when the peer is no longer live (a later
// acknowledgement starts a new feed), feedRecheck after the peer said it serves no
// WatchApplied, or at Close.
func (a *FleetAck) follow(id string, f *peerFeed) {
	defer a.wg.Done()
	defer a.recoverLog("fleet-ack feed")
	defer func() {
		a.mu.Lock()
		if a.feeds[id] == f {
			delete(a.feeds, id)
		}
		a.mu.Unlock()
		f.set(func(f *peerFeed) { f.applied, f.ended = 0, true })
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := time.NewTimer(feedRetryMin)
	defer wait.Stop()
	backoff := feedRetryMin
	for ctx.Err() == nil && a.isLive(id) {
		got, err := a.stream(ctx, id, f)
		f.set(func(f *peerFeed) { f.applied = 0 })
		if status.Code(err) == codes.Unimplemented {
			f.set(func(f *peerFeed) { f.unsupported = true })
			a.log.Debug("a peer does not serve WatchApplied; asking it WaitApplied for each write", "peer", id)
			wait.Reset(time.Duration(a.recheck.Load())) // kept in the map until then, so that no new feed asks again
			select {
			case <-ctx.Done():
			case <-wait.C:
			}
			return
		}
		if got {
			backoff = feedRetryMin
		} else {
			backoff = min(2*backoff, feedRetryMax)
		}
		a.log.Debug("a peer's applied-index stream ended", "peer", id, "err", err, "retry_in", backoff)
		wait.Reset(backoff)
		select {
		case <-ctx.Done():
		case <-wait.C:
		}
	}
}

// stream follows one WatchApplied stream until it fails; got says whether it received anything.
func (a *FleetAck) stream(ctx context.Context, id string, f *peerFeed) (got bool, err error) {
	cc, err := a.conn(id)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := consensusv1.NewFleetAckClient(cc).WatchApplied(ctx, &consensusv1.WatchAppliedRequest{From: a.node.ID(), OwnWrites: true})
	if err != nil {
		return false, err
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return got, err
		}
		got = true
		if c := m.Commit; c != nil {
			a.notices.OfferNotice(consensus.CommitNotice{From: id, Index: c.Index, EntryTerm: c.EntryTerm, LeaderTerm: c.LeaderTerm})
		}
		if m.Applied > 0 {
			f.set(func(f *peerFeed) { f.applied = max(f.applied, m.Applied) })
		}
	}
}

// isLive reports whether the mesh lists peer id alive or suspect.
func (a *FleetAck) isLive(id string) bool {
	for _, m := range a.o.Members.Members() {
		if m.ID == id {
			return m.Status == mesh.StatusAlive || m.Status == mesh.StatusSuspect
		}
	}
	return false
}

// waitFeed waits until peer id's feed reached index. After feedGrace, or at once when the
// peer does not stream, it also asks the peer WaitApplied; it reports false when ctx ends
// first.
func (a *FleetAck) waitFeed(ctx context.Context, id string, index uint64) bool {
	f := a.feed(id)
	grace := time.NewTimer(feedGrace)
	defer grace.Stop()
	var asked chan bool
	ask := func() {
		asked = make(chan bool, 1)
		go func() { asked <- a.askPeer(ctx, id, index) }()
	}
	for {
		applied, unsupported, ended, changed := f.get()
		if applied >= index {
			return true
		}
		if (unsupported || ended) && asked == nil {
			ask()
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		case <-grace.C:
			if asked == nil {
				ask()
			}
		case ok := <-asked:
			if ok || ctx.Err() != nil {
				return ok
			}
			asked = make(chan bool) // failed without an answer: the feed may still bring it
		}
	}
}
