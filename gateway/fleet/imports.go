package fleet

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

// Verdict is what an importer does with a bulletin.
type Verdict uint8

// The verdicts of Judge.
const (
	// Apply: the bulletin is the record owner's, at the record's epoch, and newer than the
	// last one applied.
	Apply Verdict = iota
	// DropStale: not newer than the last bulletin applied for the worker at that epoch.
	DropStale
	// DropEpoch: its owner or epoch differ from the applied record (an old owner still
	// talking after a failover), or this gateway owns the worker at the bulletin's epoch.
	DropEpoch
	// Hold: the bulletin is ahead of this gateway's applied record (no record yet, or a newer
	// epoch, whoever the record names): it is kept and judged again when the record arrives.
	Hold
)

var verdictNames = [...]string{"apply", "drop_stale", "drop_epoch", "hold"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

// Ref is what the importer compares a bulletin with: the applied record's owner and epoch
// (Known false when there is no record), and the last applied bulletin's epoch and seq (Seq 0
// when none was).
type Ref struct {
	Known bool
	Owner string
	Epoch uint64
	Seq   uint64
}

// Judge is the acceptance rule of bulletins (DESIGN.md section 2), a pure function: a bulletin
// applies only when it comes from the owner the applied record names, at the record's epoch,
// with a seq newer than the last applied one (Serf's Lamport check). self is this gateway's
// node id: it never imports a worker it owns. A bulletin at a newer epoch than the record is
// held even when the record names self: the worker moved away and this gateway has not applied
// the move yet, and that bulletin is the new owner's first.
func Judge(rec, last Ref, self string, b *mesh.Bulletin) Verdict {
	switch {
	case !rec.Known:
		return Hold
	case b.Epoch > rec.Epoch:
		return Hold
	case rec.Owner == self:
		return DropEpoch
	case b.Owner != rec.Owner || b.Epoch != rec.Epoch:
		return DropEpoch
	case last.Known && last.Epoch == b.Epoch && b.Seq <= last.Seq:
		return DropStale
	}
	return Apply
}

// maxHeld bounds the bulletins held for records not applied yet.
const maxHeld = 65536

// ImporterConfig configures an Importer.
type ImporterConfig struct {
	// NodeID is this gateway's node id. Required.
	NodeID string
	// Pool is the data plane's pool, whose imported workers take the bulletins' state.
	// Required.
	Pool *pool.Pool
	// Heard returns when this gateway last heard from an owner (*mesh.Mesh.Heard): imported
	// state older than three of its probe intervals is stale. Nil: never stale.
	Heard func(owner string) time.Time
	// DroppedEpoch counts bulletins dropped for their owner or epoch (*mesh.Mesh.DroppedEpoch).
	// Nil: not counted.
	DroppedEpoch func(n int)
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// Logger receives one line per imported health or breaker change. Nil: slog.Default().
	Logger *slog.Logger
}

// Importer applies other owners' bulletins to the pool's imported workers: their health state,
// a read-only view of the owner's breaker, and their discovered models. It implements
// mesh.BulletinReceiver. State that stops being refreshed keeps its last value (fail-static)
// and is reported stale.
type Importer struct {
	cfg ImporterConfig
	log *slog.Logger

	// lines bounds the INFO lines of state changes (passlog.go).
	lines *lineBudget

	mu    sync.Mutex
	state map[worker.ID]*imported
	held  map[worker.ID]mesh.Bulletin
	// dirty and gone are the workers whose state changed or went since the last save
	// (importsave.go).
	dirty, gone map[worker.ID]struct{}
}

// imported is the last bulletin applied for a worker, when it arrived, and the breaker view the
// pool's worker carries. It is kept compact (about 150 bytes; a gateway may import 100,000
// workers): the id is the map's key, the owner the record's string, the models the pool's
// discovered ones, and the states small codes.
type imported struct {
	owner         string
	lastError     string
	epoch, seq    uint64
	at, lastProbe int64 // unix nanoseconds; lastProbe 0 when never probed
	reopenIn      time.Duration
	probeInterval time.Duration
	active        int64
	healthF       uint32
	healthS       uint32
	breakerF      uint32
	breakerS      uint32
	lastStatus    int32
	health        uint8 // healthCode
	breaker       uint8 // breakerCode
	rb            remoteBreaker
}

// breakerCode codes a bulletin's breaker state in one byte: 0 when unknown, else 1 + its state.
func breakerCode(b *mesh.Bulletin) uint8 {
	if b.BreakerUnknown {
		return 0
	}
	return uint8(b.Breaker) + 1
}

// setBreaker gives b the breaker state that breakerCode coded.
func setBreaker(b *mesh.Bulletin, code uint8) {
	if code == 0 {
		b.BreakerUnknown = true
		return
	}
	b.Breaker = breaker.State(code - 1)
}

// breakerText is the breaker state that breakerCode coded as logs name it
// (mesh.Bulletin.BreakerText): "" when unknown.
func breakerText(code uint8) string {
	if code == 0 {
		return ""
	}
	return breaker.State(code - 1).String()
}

// healthCode codes a bulletin's health in one byte: 0 when unknown, else 1 + its state.
func healthCode(b *mesh.Bulletin) uint8 {
	if b.HealthUnknown {
		return 0
	}
	return uint8(b.Health) + 1
}

// setHealth gives b the health that healthCode coded.
func setHealth(b *mesh.Bulletin, code uint8) {
	if code == 0 {
		b.HealthUnknown = true
		return
	}
	b.Health = health.State(code - 1)
}

// healthText is the health that healthCode coded as logs name it (mesh.Bulletin.HealthText):
// "" when unknown.
func healthText(code uint8) string {
	if code == 0 {
		return ""
	}
	return health.State(code - 1).String()
}

func clampU32(n int) uint32 { return uint32(min(max(n, 0), int(^uint32(0)>>1))) }

// set records b, received at now; owner is the record's owner string (equal to b.Owner).
func (c *imported) set(b *mesh.Bulletin, owner string, now time.Time) {
	c.owner, c.lastError, c.epoch, c.seq = owner, b.LastError, b.Epoch, b.Seq
	c.at, c.lastProbe = now.UnixNano(), 0
	if !b.LastProbe.IsZero() {
		c.lastProbe = b.LastProbe.UnixNano()
	}
	c.reopenIn, c.probeInterval, c.active = b.BreakerReopenIn, b.ProbeInterval, b.ActiveRequests
	c.healthF, c.healthS = clampU32(b.HealthFailures), clampU32(b.HealthSuccesses)
	c.breakerF, c.breakerS = clampU32(b.BreakerFailures), clampU32(b.BreakerSuccesses)
	c.lastStatus = int32(b.LastStatusCode)
	c.health, c.breaker = healthCode(b), breakerCode(b)
}

// bulletin is the recorded bulletin of worker id, without its models.
func (c *imported) bulletin(id worker.ID) mesh.Bulletin {
	b := mesh.Bulletin{Worker: string(id), Owner: c.owner, Epoch: c.epoch, Seq: c.seq,
		HealthFailures: int(c.healthF), HealthSuccesses: int(c.healthS),
		BreakerFailures: int(c.breakerF), BreakerSuccesses: int(c.breakerS),
		BreakerReopenIn: c.reopenIn, LastError: c.lastError, LastStatusCode: int(c.lastStatus),
		ActiveRequests: c.active, ProbeInterval: c.probeInterval}
	setHealth(&b, c.health)
	setBreaker(&b, c.breaker)
	if c.lastProbe != 0 {
		b.LastProbe = time.Unix(0, c.lastProbe)
	}
	return b
}

func (c *imported) received() time.Time { return time.Unix(0, c.at) }

// NewImporter returns an Importer.
func NewImporter(cfg ImporterConfig) *Importer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("component", "fleet")
	return &Importer{cfg: cfg, log: log, lines: &lineBudget{log: log, what: "imported worker state changes"},
		state: make(map[worker.ID]*imported), held: make(map[worker.ID]mesh.Bulletin),
		dirty: make(map[worker.ID]struct{}), gone: make(map[worker.ID]struct{})}
}

// Bulletins implements mesh.BulletinReceiver.
func (im *Importer) Bulletins(bs []mesh.Bulletin) {
	flush := im.cfg.Pool.Defer()
	defer flush()
	im.mu.Lock()
	defer im.mu.Unlock()
	dropped := 0
	for i := range bs {
		if im.takeLocked(&bs[i]) == DropEpoch {
			dropped++
		}
	}
	if dropped > 0 && im.cfg.DroppedEpoch != nil {
		im.cfg.DroppedEpoch(dropped)
	}
}

// Recheck judges the held bulletins again; the reconciler calls it after each pass, when the
// records they waited for may have arrived.
func (im *Importer) Recheck() {
	im.mu.Lock()
	if len(im.held) == 0 {
		im.mu.Unlock()
		return
	}
	held := im.held
	im.held = make(map[worker.ID]mesh.Bulletin)
	im.mu.Unlock()
	bs := make([]mesh.Bulletin, 0, len(held))
	for _, b := range held {
		bs = append(bs, b)
	}
	im.Bulletins(bs)
}

// Forget drops what was imported of a worker (its record is gone, or this gateway owns it
// now).
func (im *Importer) Forget(id worker.ID) {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.forgetLocked(id)
}

// forgetLocked drops a worker's imported state, and its saved copy at the next save.
func (im *Importer) forgetLocked(id worker.ID) {
	if _, ok := im.state[id]; ok {
		im.gone[id] = struct{}{}
	}
	delete(im.dirty, id)
	delete(im.state, id)
	delete(im.held, id)
}

// takeLocked judges one bulletin and applies or holds it.
func (im *Importer) takeLocked(b *mesh.Bulletin) Verdict {
	id := worker.ID(b.Worker)
	w := im.cfg.Pool.Get(id)
	var rec, last Ref
	if w != nil {
		rec.Known = true
		rec.Owner, rec.Epoch = w.OwnerEpoch()
	}
	cur := im.state[id]
	if cur != nil {
		last = Ref{Known: true, Owner: cur.owner, Epoch: cur.epoch, Seq: cur.seq}
	}
	v := Judge(rec, last, im.cfg.NodeID, b)
	switch v {
	case Hold:
		if h, ok := im.held[id]; !ok && len(im.held) < maxHeld || ok && (b.Epoch > h.Epoch || b.Epoch == h.Epoch && b.Seq > h.Seq) {
			im.held[id] = *b
		}
	case Apply:
		if w.Origin != pool.OriginMesh || worker.IsHostLocalURL(w.URL) {
			return DropEpoch // the reconciler has not caught up with an ownership change yet
		}
		im.applyLocked(w, cur, b, im.cfg.Now())
	}
	return v
}

// applyLocked gives the pool's worker the bulletin's state, received at now (a restored
// bulletin's is when it was first received).
func (im *Importer) applyLocked(w *pool.Worker, cur *imported, b *mesh.Bulletin, now time.Time) {
	im.dirty[w.ID] = struct{}{}
	delete(im.gone, w.ID)
	if cur == nil {
		cur = &imported{rb: remoteBreaker{now: im.cfg.Now}}
		im.state[w.ID] = cur
	}
	// prevHealth is a healthCode: 0 before the first bulletin, or after one of unknown health.
	prevHealth, prevBreaker := cur.health, cur.breaker
	owner, _ := w.OwnerEpoch() // Judge checked it is b.Owner; the pool's string is kept, not the copy
	cur.set(b, owner, now)
	cur.rb.set(remoteState(b), now.Add(b.BreakerReopenIn))
	if w.Breaker() != pool.Breaker(&cur.rb) {
		_ = im.cfg.Pool.SetBreaker(w.ID, &cur.rb)
	}
	if !b.HealthUnknown && w.Health() != b.Health {
		_, _ = im.cfg.Pool.SetHealth(w.ID, b.Health) // which ends a hung hold: the owner's verdict changed
	}
	if prevHealth != 0 && prevBreaker != cur.breaker {
		im.cfg.Pool.ReleaseHung(w.ID) // the owner's breaker moved: its verdict decides from now on
	}
	if !slices.Equal(w.DiscoveredModels(), b.Models) && (len(b.Models) > 0 || w.DiscoveredModels() != nil) {
		_ = im.cfg.Pool.SetDiscoveredModels(w.ID, b.Models)
	}
	// One line per change of an imported worker's health or breaker; the first bulletin (a
	// gateway that joins imports every worker at once) only at debug level.
	switch {
	case prevHealth == 0:
		if !im.log.Enabled(context.Background(), slog.LevelDebug) {
			break
		}
		im.log.Debug("imported worker state", "worker", w.URL, "owner", b.Owner, "epoch", b.Epoch,
			"health", b.HealthText(), "breaker", b.BreakerText())
	case prevHealth != cur.health || prevBreaker != cur.breaker:
		if !im.lines.allow() {
			im.log.Debug("imported worker state changed", "worker", w.URL, "owner", b.Owner, "epoch", b.Epoch,
				"health", b.HealthText(), "breaker", b.BreakerText(),
				"from_health", healthText(prevHealth), "from_breaker", breakerText(prevBreaker))
			break
		}
		im.log.Info("imported worker state changed", "worker", w.URL, "owner", b.Owner, "epoch", b.Epoch,
			"health", b.HealthText(), "breaker", b.BreakerText(),
			"from_health", healthText(prevHealth), "from_breaker", breakerText(prevBreaker))
	}
}

// ImportedStatus is an imported worker's runtime state as GET /workers shows it.
type ImportedStatus struct {
	// Bulletin is the last bulletin applied; for a worker this gateway disowned
	// (ImportDisowned), before the new owner's first bulletin, its own last state, Owner this
	// gateway's node id and Seq 0.
	Bulletin mesh.Bulletin
	// Received is when it arrived.
	Received time.Time
	// Stale: nothing was heard from the owner for three of the worker's probe intervals (at
	// least three seconds). The state keeps its last value.
	Stale bool
}

// Imported returns what was imported of a worker; ok is false before its first bulletin.
func (im *Importer) Imported(id worker.ID) (ImportedStatus, bool) {
	im.mu.Lock()
	cur := im.state[id]
	var st ImportedStatus
	if cur != nil {
		st = ImportedStatus{Bulletin: cur.bulletin(id), Received: cur.received()}
	}
	im.mu.Unlock()
	if cur == nil {
		return ImportedStatus{}, false
	}
	if w := im.cfg.Pool.Get(id); w != nil {
		st.Bulletin.Models = w.DiscoveredModels()
	}
	st.Stale = im.stale(&st)
	return st, true
}

// staleAfter is the age of imported state that makes it stale: three probe intervals, and at
// least three owner beats.
func staleAfter(interval time.Duration) time.Duration {
	return 3 * max(interval, mesh.DefaultBeat)
}

func (im *Importer) stale(st *ImportedStatus) bool {
	last := st.Received
	if im.refreshed(st.Bulletin.Owner) {
		if h := im.cfg.Heard(st.Bulletin.Owner); h.After(last) {
			last = h
		}
	}
	return im.cfg.Now().Sub(last) > staleAfter(st.Bulletin.ProbeInterval)
}

// refreshed reports whether news from owner keeps its imported state fresh: Heard is set and
// owner is another gateway. State this gateway kept of a worker it disowned (ImportDisowned) is
// refreshed by nobody: it ages from the move until the new owner's first bulletin replaces it.
func (im *Importer) refreshed(owner string) bool {
	return im.cfg.Heard != nil && owner != im.cfg.NodeID
}

// Seed is owned.Options.Seed: the state a worker this gateway starts to own takes over from
// the last bulletin imported from its previous owner. It forgets that bulletin.
func (im *Importer) Seed(id worker.ID) (owned.Seed, bool) {
	im.mu.Lock()
	cur := im.state[id]
	im.forgetLocked(id)
	im.mu.Unlock()
	if cur == nil {
		return owned.Seed{}, false
	}
	b := cur.bulletin(id)
	if b.HealthUnknown {
		return owned.Seed{}, false
	}
	reopen := time.Duration(0)
	if !b.BreakerUnknown && b.Breaker == breaker.Open {
		reopen = max(0, cur.received().Add(b.BreakerReopenIn).Sub(im.cfg.Now()))
	}
	return owned.Seed{Health: b.Health, Breaker: remoteState(&b), BreakerFailures: b.BreakerFailures,
		BreakerSuccesses: b.BreakerSuccesses, BreakerReopenIn: reopen}, true
}

// ImportDisowned is owned.Options.OnDisown, the mirror image of Seed: a worker this gateway stops
// owning (a transfer, a drain's handoff, a rebalance, a failover it applies late) keeps the
// runtime state it had here, last at the epoch this gateway owned it, until the new owner's
// first bulletin replaces it. Without it the worker would route with no breaker (an open
// circuit closed) and show health unknown until that bulletin arrived. The state is recorded as
// an import from this gateway, at its epoch and seq 0, and its breaker view is attached to the
// pool's worker before the manager detaches its own, so that no request slips in between; the
// pool's health, already this gateway's verdict, is kept. Judge applies any bulletin of the
// new owner over it (a newer epoch), and Seed hands it back if the worker returns first.
// Nothing refreshes it: it goes stale after three probe intervals, counted in
// meshgw_mesh_stale_imports, and keeps its value (fail-static), an open circuit admitting
// trials once its timeout passes, as any import does. It is not saved for a restart (Restore
// would drop it: its owner is not the record's). A bulletin at a newer epoch applied already
// (it raced the move) is kept instead, and a host-local worker is never imported.
func (im *Importer) ImportDisowned(id worker.ID, last owned.Status) {
	im.mu.Lock()
	defer im.mu.Unlock()
	w := im.cfg.Pool.Get(id)
	if w == nil || worker.IsHostLocalURL(w.URL) {
		return
	}
	cur := im.state[id]
	if cur != nil && cur.epoch > last.Epoch {
		return
	}
	if cur == nil {
		cur = &imported{rb: remoteBreaker{now: im.cfg.Now}}
		im.state[id] = cur
	}
	now := im.cfg.Now()
	b := ownedBulletin(id, &last, w, now)
	b.Owner = im.cfg.NodeID
	cur.set(&b, im.cfg.NodeID, now)
	cur.rb.set(last.Breaker.State, now.Add(b.BreakerReopenIn))
	_ = im.cfg.Pool.SetBreaker(id, &cur.rb)
	im.log.Debug("worker handed over: routing it by its last state here until the new owner's first bulletin",
		"worker", w.URL, "epoch", last.Epoch, "health", b.HealthText(), "breaker", b.BreakerText())
}

// remoteBreaker is an imported worker's view of its owner's breaker: selection skips the worker
// while the owner's circuit is open and its timeout has not passed here (the owner then admits
// trials, half-open, and says so in its next bulletin).
type remoteBreaker struct {
	state    atomic.Int32 // breaker.State
	reopenAt atomic.Int64 // unix nanoseconds; while open
	now      func() time.Time
}

func (r *remoteBreaker) set(s breaker.State, reopenAt time.Time) {
	r.reopenAt.Store(reopenAt.UnixNano())
	r.state.Store(int32(s))
}

// Allow implements pool.Breaker.
func (r *remoteBreaker) Allow() bool {
	return breaker.State(r.state.Load()) != breaker.Open || r.now().UnixNano() >= r.reopenAt.Load()
}

// remoteState is a bulletin's breaker state as this gateway routes by it: closed when unknown.
func remoteState(b *mesh.Bulletin) breaker.State {
	if b.BreakerUnknown {
		return breaker.Closed
	}
	return b.Breaker
}
