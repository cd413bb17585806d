package mesh

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
)

// Defaults of the bulletin protocol (docs/mesh.md).
const (
	// DefaultCoalesce is the least time between two bulletins of one worker: the changes in
	// between are folded into the next one.
	DefaultCoalesce = 100 * time.Millisecond
	// DefaultBeat is how often an owner of published workers gossips its Beat.
	DefaultBeat = time.Second
	// DefaultResyncEvery is the least time between two resync requests to one owner, and
	// between two answers to one requester.
	DefaultResyncEvery = 2 * time.Second
	// maxAnswersPerSecond bounds the whole states an owner sends in answer to resyncs, whoever
	// asks: a requester refused now asks again later.
	maxAnswersPerSecond = 4
	// DefaultStateBudget is what a periodic push/pull carries of an owner's state, on average,
	// at most: a larger state rides on one push/pull in size/DefaultStateBudget (joins always
	// carry it). Beats and resyncs repair what gossip missed in between.
	DefaultStateBudget = 32 << 10
)

// BulletinReceiver takes the bulletins this gateway imports (gateway/fleet applies them).
// Bulletins is called from memberlist's goroutines, possibly concurrently, with bulletins newer
// than any this node had seen for their worker; it must be quick and must not call Publish or
// Withdraw.
type BulletinReceiver interface {
	Bulletins(bs []Bulletin)
}

// transport is what the bulletin engine sends through: memberlist in a Mesh, a fake in tests.
type transport interface {
	// broadcast queues msg for gossip to every peer; a queued message of the same name is
	// replaced.
	broadcast(name string, msg []byte)
	// sendTo sends msg to one peer reliably (TCP).
	sendTo(node string, msg []byte) error
}

// bulletinConfig are the engine's timings; zero values take the defaults.
type bulletinConfig struct {
	self        string
	coalesce    time.Duration
	beat        time.Duration
	resyncEvery time.Duration
	stateBudget int
	now         func() time.Time
	log         *slog.Logger
	// spawn runs a direct send off memberlist's handler goroutine; nil means `go f()` (tests
	// run it inline).
	spawn func(f func())
}

// bulletins is the bulletin protocol of one gateway, as owner and as importer:
//   - as owner, Publish coalesces changes per worker, stamps each bulletin with the next value
//     of the owner's clock and gossips it; a Beat every second carries a digest of everything
//     published; push/pull and resync answers carry the whole published state;
//   - as importer, it keeps the newest (epoch, seq) seen per worker, relays what is newer (so
//     a bulletin spreads epidemically, as Serf's user events do) and hands it to the
//     receiver; a Beat whose digest differs twice from what it holds of that owner makes it
//     ask the owner for its whole state.
type bulletins struct {
	cfg  bulletinConfig
	t    transport
	recv atomic.Pointer[receiverBox]
	met  *bulletinMetrics

	// early holds what arrived before a receiver was installed (a join's state comes before
	// the gateway's importer exists); setReceiver hands it over. Guarded by earlyMu.
	earlyMu sync.Mutex
	early   []Bulletin

	clock atomic.Uint64 // the owner's Lamport clock (seq)

	mu     sync.Mutex
	owned  map[string]*published // what this node published, per worker
	digest uint64                // XOR of digestOf over owned
	// owner is set once this node published anything: from then on it beats and answers
	// resyncs even with nothing left to publish, so that its peers forget what it withdrew.
	owner     bool
	lastSeq   uint64               // seq of the newest bulletin published
	pending   map[string]*Bulletin // changes waiting for their coalesce window
	pushPulls int                  // periodic LocalState calls, for the state budget
	stateSize int                  // bytes of the last encoded owned state
	seen      map[string]seenBulletin
	owners    map[string]*ownerView
	answered  map[string]time.Time // last resync answer per requester
	answers   []time.Time          // the answers of the last second, for maxAnswersPerSecond

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

type receiverBox struct{ r BulletinReceiver }

// published is one owned worker's last bulletin and when it went out.
type published struct {
	b      Bulletin
	sentAt time.Time
}

// seenBulletin is the newest bulletin seen of a worker owned elsewhere.
type seenBulletin struct {
	owner      string
	epoch, seq uint64
}

// ownerView is what this node holds of another owner: the digest and count of its seen
// bulletins, when it last heard from it, and the resync bookkeeping.
type ownerView struct {
	digest     uint64
	count      int
	maxSeq     uint64 // the newest seq seen from this owner
	heard      time.Time
	beatSeq    uint64
	lastSeq    uint64 // the previous beat's last_seq
	mismatches int
	resyncAt   time.Time
}

func newBulletins(cfg bulletinConfig, t transport, met *bulletinMetrics) *bulletins {
	cfg.coalesce = cmpZero(cfg.coalesce, DefaultCoalesce)
	cfg.beat = cmpZero(cfg.beat, DefaultBeat)
	cfg.resyncEvery = cmpZero(cfg.resyncEvery, DefaultResyncEvery)
	cfg.stateBudget = cmpZero(cfg.stateBudget, DefaultStateBudget)
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	if cfg.spawn == nil {
		cfg.spawn = func(f func()) { go f() }
	}
	return &bulletins{
		cfg: cfg, t: t, met: met,
		owned: make(map[string]*published), pending: make(map[string]*Bulletin),
		seen: make(map[string]seenBulletin), owners: make(map[string]*ownerView),
		answered: make(map[string]time.Time),
		wake:     make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// nextSeq advances the owner's clock: one more than the last value, and never behind the wall
// clock in microseconds, so that a restarted owner starts above what it sent before.
func (e *bulletins) nextSeq() uint64 {
	for {
		old := e.clock.Load()
		n := max(old+1, uint64(e.cfg.now().UnixMicro()))
		if e.clock.CompareAndSwap(old, n) {
			return n
		}
	}
}

// publish queues b (a worker this node owns) for gossip, unless it says what was last
// published. It goes out at once, or when the worker's coalesce window ends.
func (e *bulletins) publish(b Bulletin) {
	b.Owner = e.cfg.self
	e.mu.Lock()
	if p := e.owned[b.Worker]; p != nil && e.pending[b.Worker] == nil && p.b.Same(&b) {
		e.mu.Unlock()
		return
	}
	e.pending[b.Worker] = &b
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// withdraw forgets a worker this node no longer owns: it leaves the digest and the state.
func (e *bulletins) withdraw(worker string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, worker)
	if p := e.owned[worker]; p != nil {
		e.digest ^= digestOf(worker, p.b.Seq)
		delete(e.owned, worker)
	}
}

// flush sends the pending bulletins whose coalesce window has ended, and returns when the next
// one ends (zero when none waits).
func (e *bulletins) flush(now time.Time) time.Time {
	var next time.Time
	type out struct {
		name string
		msg  []byte
	}
	var msgs []out
	e.mu.Lock()
	for w, b := range e.pending {
		p := e.owned[w]
		if p != nil && now.Sub(p.sentAt) < e.cfg.coalesce {
			if due := p.sentAt.Add(e.cfg.coalesce); next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		delete(e.pending, w)
		e.owner = true
		b.Seq = e.nextSeq()
		e.lastSeq = b.Seq
		if p == nil {
			p = &published{}
			e.owned[w] = p
		} else {
			e.digest ^= digestOf(w, p.b.Seq)
		}
		p.b, p.sentAt = *b, now
		e.digest ^= digestOf(w, b.Seq)
		msgs = append(msgs, out{w, encode(msgBulletin, toWire(b))})
	}
	e.mu.Unlock()
	for _, m := range msgs {
		e.t.broadcast(m.name, m.msg)
	}
	e.met.count(dirSent, len(msgs))
	return next
}

// beat gossips this owner's Beat, once it has published anything.
func (e *bulletins) beat() {
	e.mu.Lock()
	n, digest, owner, last := len(e.owned), e.digest, e.owner, e.lastSeq
	e.mu.Unlock()
	if !owner {
		return
	}
	e.t.broadcast("beat", encode(msgBeat, &meshv1.Beat{Owner: e.cfg.self, Seq: e.nextSeq(), Digest: digest,
		Workers: uint32(n), LastSeq: last}))
}

// run sends bulletins as their windows end and beats every cfg.beat, until close.
func (e *bulletins) run() {
	defer close(e.done)
	beat := time.NewTicker(e.cfg.beat)
	defer beat.Stop()
	flush := time.NewTimer(time.Hour)
	defer flush.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-beat.C:
			e.beat()
			continue
		case <-e.wake:
		case <-flush.C:
		}
		if next := e.flush(e.cfg.now()); !next.IsZero() {
			flush.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

func (e *bulletins) start() { go e.run() }

func (e *bulletins) close() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	<-e.done
}

// maxEarly bounds the bulletins kept for a receiver not installed yet.
const maxEarly = 1 << 17

// setReceiver installs the importer and hands it what arrived before.
func (e *bulletins) setReceiver(r BulletinReceiver) {
	e.earlyMu.Lock()
	defer e.earlyMu.Unlock()
	e.recv.Store(&receiverBox{r})
	if len(e.early) > 0 {
		r.Bulletins(e.early)
		e.early = nil
	}
}

func (e *bulletins) deliver(bs []Bulletin) {
	if len(bs) == 0 {
		return
	}
	if box := e.recv.Load(); box != nil {
		box.r.Bulletins(bs)
		return
	}
	e.earlyMu.Lock()
	defer e.earlyMu.Unlock()
	if box := e.recv.Load(); box != nil { // installed meanwhile
		box.r.Bulletins(bs)
		return
	}
	e.early = append(e.early, bs[:min(len(bs), maxEarly-len(e.early))]...)
}

// heard returns when this node last heard from owner: a bulletin, a beat or its whole state.
func (e *bulletins) heard(owner string) time.Time {
	if owner == e.cfg.self {
		return e.cfg.now()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if ov := e.owners[owner]; ov != nil {
		return ov.heard
	}
	return time.Time{}
}

// handle takes one message from a peer (gossip or a direct send). raw is not kept.
func (e *bulletins) handle(raw []byte) {
	kind, m, err := decode(raw)
	if err != nil {
		e.cfg.log.Debug("dropped a malformed bulletin message", "err", err)
		return
	}
	now := e.cfg.now()
	switch kind {
	case msgBulletin:
		b := fromWire(m.(*meshv1.Bulletin))
		if b.Owner == e.cfg.self || b.Worker == "" || b.Owner == "" {
			return
		}
		e.mu.Lock()
		fresh := e.takeLocked(&b, now)
		e.mu.Unlock()
		if !fresh {
			e.met.count(dirDroppedStale, 1)
			return
		}
		e.met.count(dirReceived, 1)
		e.t.broadcast(b.Worker, append([]byte(nil), raw...))
		e.deliver([]Bulletin{b})
	case msgBeat:
		e.onBeat(m.(*meshv1.Beat), raw, now)
	case msgResync:
		e.answer(m.(*meshv1.Resync).GetFrom(), now)
	case msgState:
		e.merge(m.(*meshv1.OwnedState), now)
	}
}

// takeLocked records b if it is newer than what was seen of its worker (a higher epoch, or the
// same epoch and a higher seq), and reports whether it was.
func (e *bulletins) takeLocked(b *Bulletin, now time.Time) bool {
	s, ok := e.seen[b.Worker]
	if ok && (b.Epoch < s.epoch || b.Epoch == s.epoch && b.Seq <= s.seq) {
		return false
	}
	if ok {
		if ov := e.owners[s.owner]; ov != nil {
			ov.digest ^= digestOf(b.Worker, s.seq)
			ov.count--
		}
	}
	ov := e.ownerLocked(b.Owner)
	ov.digest ^= digestOf(b.Worker, b.Seq)
	ov.count++
	ov.maxSeq = max(ov.maxSeq, b.Seq)
	ov.heard = now
	e.seen[b.Worker] = seenBulletin{owner: b.Owner, epoch: b.Epoch, seq: b.Seq}
	return true
}

func (e *bulletins) ownerLocked(owner string) *ownerView {
	ov := e.owners[owner]
	if ov == nil {
		ov = &ownerView{}
		e.owners[owner] = ov
	}
	return ov
}

// onBeat notes that the beat's owner is alive, relays a new beat, and asks the owner for its
// whole state when what this node holds differs from what the owner published at two judged
// beats in a row (judgeBeat).
func (e *bulletins) onBeat(b *meshv1.Beat, raw []byte, now time.Time) {
	owner := b.GetOwner()
	if owner == e.cfg.self || owner == "" {
		return
	}
	e.mu.Lock()
	ov := e.ownerLocked(owner)
	if b.GetSeq() <= ov.beatSeq {
		e.mu.Unlock()
		return
	}
	ov.beatSeq, ov.heard = b.GetSeq(), now
	resync := false
	switch judgeBeat(ov, b) {
	case beatAgrees:
		ov.mismatches = 0
	case beatDiffers:
		if ov.mismatches++; ov.mismatches >= 2 && now.Sub(ov.resyncAt) >= e.cfg.resyncEvery {
			ov.resyncAt, resync = now, true
		}
	}
	ov.lastSeq = b.GetLastSeq()
	e.mu.Unlock()
	e.t.broadcast("beat/"+owner, append([]byte(nil), raw...))
	if resync {
		e.met.resync(resyncAsked)
		e.send(owner, encode(msgResync, &meshv1.Resync{From: e.cfg.self}))
	}
}

// beatVerdict is what a beat says of the bulletins this node holds from its owner.
type beatVerdict uint8

const (
	beatAgrees   beatVerdict = iota // the digest and count match
	beatDiffers                     // they differ with nothing newer on the way: something was lost
	beatInFlight                    // newer bulletins are on their way: not judged
)

// judgeBeat compares a beat with what this node holds of its owner. The digest is judged only
// once this node has seen the owner's newest bulletin (gossip is not ordered, so one beat may
// still cross an older one: two differing beats in a row make a resync). While the newest is
// missing and the owner keeps publishing, bulletins are in flight, and under steady changes
// that is always so: judging then would ask for the whole state at every beat. A newest
// bulletin that stays missing while the owner publishes nothing newer was lost: that differs.
func judgeBeat(ov *ownerView, b *meshv1.Beat) beatVerdict {
	switch {
	case ov.maxSeq >= b.GetLastSeq():
		if ov.digest == b.GetDigest() && ov.count == int(b.GetWorkers()) {
			return beatAgrees
		}
		return beatDiffers
	case b.GetLastSeq() == ov.lastSeq:
		return beatDiffers
	}
	return beatInFlight
}

// answer sends this node's whole state to a peer that asked, at most once per resyncEvery/2
// per requester and maxAnswersPerSecond in all.
func (e *bulletins) answer(from string, now time.Time) {
	if from == "" || from == e.cfg.self {
		return
	}
	e.mu.Lock()
	if last, ok := e.answered[from]; ok && now.Sub(last) < e.cfg.resyncEvery/2 {
		e.mu.Unlock()
		return
	}
	recent := e.answers[:0]
	for _, at := range e.answers {
		if now.Sub(at) < time.Second {
			recent = append(recent, at)
		}
	}
	e.answers = recent
	if len(e.answers) >= maxAnswersPerSecond {
		e.mu.Unlock()
		e.met.resync(resyncRefused)
		return
	}
	e.answers = append(e.answers, now)
	e.answered[from] = now
	for n, at := range e.answered { // forget old requesters
		if now.Sub(at) > 10*e.cfg.resyncEvery {
			delete(e.answered, n)
		}
	}
	msg := e.stateLocked(now)
	e.mu.Unlock()
	if msg != nil {
		e.met.resync(resyncAnswered)
		e.send(from, msg)
	}
}

// send sends msg to node in the background: a direct send dials TCP, and the caller is one of
// memberlist's handlers.
func (e *bulletins) send(node string, msg []byte) {
	e.cfg.spawn(func() {
		if err := e.t.sendTo(node, msg); err != nil {
			e.cfg.log.Debug("sending a bulletin message to a peer failed", "peer", node, "err", err)
		}
	})
}

// merge applies an owner's whole state: what is newer is taken and delivered, and what this
// node held of that owner that the state no longer lists is forgotten.
func (e *bulletins) merge(st *meshv1.OwnedState, now time.Time) {
	owner := st.GetOwner()
	if owner == e.cfg.self || owner == "" {
		return
	}
	var fresh []Bulletin
	listed := make(map[string]struct{}, len(st.GetBulletins()))
	e.mu.Lock()
	for _, w := range st.GetBulletins() {
		b := fromWire(w)
		if b.Owner != owner || b.Worker == "" {
			continue
		}
		listed[b.Worker] = struct{}{}
		if e.takeLocked(&b, now) {
			fresh = append(fresh, b)
		}
	}
	for w, s := range e.seen {
		if _, ok := listed[w]; !ok && s.owner == owner {
			ov := e.owners[owner]
			ov.digest ^= digestOf(w, s.seq)
			ov.count--
			delete(e.seen, w)
		}
	}
	e.ownerLocked(owner).heard = now
	e.mu.Unlock()
	e.met.count(dirReceived, len(fresh))
	e.deliver(fresh)
}

// localState is what a push/pull carries: this node's whole state on a join, and on a periodic
// exchange when it fits the state budget (a larger one rides on one exchange in
// size/budget). Nil when there is nothing to send.
func (e *bulletins) localState(join bool) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.owned) == 0 {
		return nil
	}
	if !join {
		e.pushPulls++
		if k := e.stateSize/e.cfg.stateBudget + 1; e.pushPulls%k != 0 {
			return nil
		}
	}
	msg := e.stateLocked(e.cfg.now())
	e.stateSize = len(msg)
	return msg
}

// stateLocked encodes this node's whole published state, each open breaker's remaining time
// counted down to now; nil if it never published anything (an empty state once it did).
func (e *bulletins) stateLocked(now time.Time) []byte {
	if !e.owner {
		return nil
	}
	st := &meshv1.OwnedState{Owner: e.cfg.self, Bulletins: make([]*meshv1.Bulletin, 0, len(e.owned))}
	for _, p := range e.owned {
		b := p.b
		b.BreakerReopenIn = max(0, b.BreakerReopenIn-now.Sub(p.sentAt))
		st.Bulletins = append(st.Bulletins, toWire(&b))
	}
	return encode(msgState, st)
}

// mergeRemote is push/pull's MergeRemoteState.
func (e *bulletins) mergeRemote(buf []byte) {
	if len(buf) == 0 {
		return
	}
	e.handle(buf)
}
