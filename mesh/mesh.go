package mesh

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Errors of Mesh's methods.
var (
	// ErrShutdown is returned by the methods of a Mesh that was shut down.
	ErrShutdown = errors.New("mesh: shut down")
	// ErrLeft is returned by SetMeta and Join after Leave.
	ErrLeft = errors.New("mesh: this node has left the mesh")
	// ErrForeignCluster is wrapped by Join's error when the peers it reached carry another
	// cluster id than this node.
	ErrForeignCluster = errors.New("peer belongs to another cluster")
	// ErrNotMesh is wrapped by Join's error when an address answered, but not as a mesh peer
	// does: an HTTP server, say.
	ErrNotMesh = errors.New("the address answered, but not as a mesh peer")
	// ErrPlaintext is wrapped by Join's error when this node encrypts gossip and an address
	// answered in plaintext: a mesh peer without a gossip key, or not a mesh peer at all.
	ErrPlaintext = errors.New("the address answered in plaintext, and this node's gossip is encrypted")
)

// Mesh is this gateway's member of the memberlist mesh. Its methods are safe for concurrent use.
type Mesh struct {
	ml        *memberlist.Memberlist
	addr      string              // this node's gossip address, host:port
	keyring   *memberlist.Keyring // nil when gossip is not encrypted
	log       *slog.Logger
	name      string
	updateTO  time.Duration
	retention time.Duration
	now       func() time.Time
	metrics   *metrics
	bul       *bulletins
	queue     *memberlist.TransmitLimitedQueue

	// metaMu serializes SetMeta and Leave, so that metadata updates are gossiped in order.
	metaMu sync.Mutex
	local  atomic.Pointer[localMeta] // what NodeMeta hands memberlist
	left   atomic.Bool
	closed atomic.Bool
	once   sync.Once

	// claims counts the alive messages that named this node at another address, the last of
	// them in claim, so that Join can tell whether its node id is taken (conflict.go).
	claims atomic.Uint64
	claim  atomic.Pointer[memberlist.Node]

	mu      sync.Mutex
	table   map[string]*entry // from memberlist's events, self included
	foreign map[string]*entry // peers refused for their cluster id, at most maxForeign

	watchMu  sync.Mutex
	watchers map[chan struct{}]bool // true: membership changes only (WatchMembership)
}

// localMeta is this node's metadata and its encoding, swapped as one.
type localMeta struct {
	meta Meta
	raw  []byte
}

// maxForeign bounds the table of refused peers.
const maxForeign = 256

// Start validates cfg, starts memberlist on Config.Listener (or on listeners it binds itself)
// and returns the mesh of this one node; Join connects it to others. Call Shutdown to stop it.
func Start(cfg Config) (_ *Mesh, err error) {
	ln := cfg.Listener
	defer func() {
		if err != nil && ln != nil {
			_ = ln.Close()
		}
	}()
	mc, err := cfg.memberlistConfig()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if ln == nil {
		if ln, err = Listen(mc.BindAddr, mc.BindPort, logger); err != nil {
			return nil, err
		}
	}
	mc.Transport, mc.BindPort = ln.nt, ln.port
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = ln.port
	}
	meta := cfg.Meta
	meta.NodeID = cfg.NodeID
	raw, err := EncodeMeta(meta)
	if err != nil {
		return nil, err
	}
	m := &Mesh{
		keyring:   mc.Keyring,
		log:       logger.With("component", "mesh"),
		name:      cfg.NodeID,
		updateTO:  cmpZero(cfg.UpdateTimeout, DefaultUpdateTimeout),
		retention: cmpZero(cfg.Retention, DefaultRetention),
		now:       time.Now,
		table:     make(map[string]*entry),
		foreign:   make(map[string]*entry),
		watchers:  make(map[chan struct{}]bool),
	}
	m.local.Store(&localMeta{meta: meta, raw: raw})
	d := delegate{m}
	mc.Delegate, mc.Events, mc.Alive, mc.Merge, mc.Conflict = d, d, d, d, d
	mc.Logger, mc.LogOutput = newStdLogger(logger), nil
	if cfg.Tune != nil {
		cfg.Tune(mc)
	}
	if m.metrics, err = newMetrics(cfg.Registerer, m); err != nil {
		return nil, err
	}
	m.queue = &memberlist.TransmitLimitedQueue{NumNodes: m.numNodes, RetransmitMult: mc.RetransmitMult}
	m.bul = newBulletins(bulletinConfig{self: cfg.NodeID, coalesce: cfg.BulletinCoalesce, beat: cfg.BulletinBeat,
		log: m.log}, mlTransport{m}, m.metrics.bulletins)
	ml, err := memberlist.Create(mc)
	if err != nil {
		m.metrics.unregister()
		return nil, fmt.Errorf("mesh: start memberlist on %s:%d: %s", mc.BindAddr, mc.BindPort, oneLine(err))
	}
	m.ml = ml
	// Read once, before anything gossips: memberlist's UpdateNode rewrites the local node.
	m.addr = ml.LocalNode().Address()
	m.bul.start()
	m.log.Info("mesh started", "node", m.name, "address", m.addr,
		"profile", cmpZero(cfg.Profile, ProfileLAN), "encrypted", mc.EncryptionEnabled())
	return m, nil
}

func cmpZero[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// oneLine flattens a multi-line error (memberlist's multierror) into one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// numNodes is the member count the gossip queue scales its retransmissions by.
func (m *Mesh) numNodes() int {
	if m.closed.Load() || m.ml == nil {
		return 1
	}
	return m.ml.NumMembers()
}

// Publish gossips the runtime state of a worker this node owns (DESIGN.md section 4). A
// bulletin that says what the last one said is not sent; otherwise it goes out at once, or at
// the end of the worker's coalesce window (Config.BulletinCoalesce) with whatever changed
// meanwhile. Owner and Seq are set here. It never blocks on the network.
func (m *Mesh) Publish(b Bulletin) { m.bul.publish(b) }

// Withdraw stops publishing a worker this node no longer owns (removed, or moved away).
func (m *Mesh) Withdraw(worker string) { m.bul.withdraw(worker) }

// SetBulletinReceiver installs the importer of other owners' bulletins.
func (m *Mesh) SetBulletinReceiver(r BulletinReceiver) { m.bul.setReceiver(r) }

// Heard returns when this node last heard from owner (a bulletin, a beat or its whole state):
// imported state older than three probe intervals is stale. Zero if never; now for itself.
func (m *Mesh) Heard(owner string) time.Time { return m.bul.heard(owner) }

// DroppedEpoch counts n bulletins the importer dropped because their owner or epoch differ
// from its applied raft record (meshgw_mesh_bulletins_total{direction="dropped_epoch"}).
func (m *Mesh) DroppedEpoch(n int) { m.metrics.bulletins.count(dirDroppedEpoch, n) }

// Addr returns the host:port peers reach this node on, for their Join.
func (m *Mesh) Addr() string { return m.addr }

// ID returns this node's id.
func (m *Mesh) ID() string { return m.name }

// Local returns the metadata this node publishes.
func (m *Mesh) Local() Meta { return m.local.Load().meta }

// Join contacts each address (host:port) and merges its view of the mesh into this node's. It
// returns how many addresses it reached. The error is set when it reached none: it wraps
// ErrForeignCluster when every address was a peer refused for its cluster id, ErrNotMesh or
// ErrPlaintext when an address answered as no mesh peer does. It is also set, with the count,
// when a live process at another address already uses this node's id (a *NodeIDTakenError):
// the node then cannot take part in the mesh.
//
// The addresses are contacted side by side: memberlist's Join tries them one after another,
// each for up to TCPTimeout, so a first address that does not answer (a peer cut off, a host
// down) kept the node out of the mesh for that long (5 s with the local profile, 10 s with
// lan) although the next one answered at once. Join still returns once every address answered
// or timed out; the node is a member as soon as the first one merged.
func (m *Mesh) Join(addrs []string) (int, error) {
	switch {
	case m.closed.Load():
		return 0, ErrShutdown
	case m.left.Load():
		return 0, ErrLeft
	case len(addrs) == 0:
		return 0, errors.New("mesh: join: no address given")
	}
	claims := m.claims.Load()
	n, errs := m.joinEach(addrs)
	if n == 0 {
		return 0, joinError(addrs, errs)
	}
	if m.claims.Load() != claims {
		if err := m.takenBy(); err != nil {
			return n, err
		}
	}
	m.log.Info("mesh joined", "contacted", n, "of", len(addrs))
	return n, nil
}

// joinEach joins through every address at once, and returns how many answered and, when none
// did, the error of each address.
func (m *Mesh) joinEach(addrs []string) (int, []error) {
	ns := make([]int, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { ns[i], errs[i] = m.ml.Join([]string{a}) })
	}
	wg.Wait()
	n := 0
	for _, k := range ns {
		n += k
	}
	return n, errs
}

// joinError is Join's error when no address merged, from each address's error. memberlist
// formats what went wrong into its text (with %v), so the kind of failure is read from there:
// the refusal of this node's MergeDelegate (ErrForeignCluster's text, which the error of the
// address it refused carries, and no other: a refusal this node made as the seed of another
// node's join is not this join's), or memberlist's words for an answer that is not a push/pull.
// ErrForeignCluster says that trying again cannot help, so it takes every address's refusal:
// an address that did not answer may be a peer of this node's own cluster not up yet (a fleet
// restarting), while another was reused by a gateway of another cluster.
func joinError(addrs []string, errs []error) error {
	err := errors.Join(errs...)
	if err == nil {
		return fmt.Errorf("mesh: join %s: no address answered", strings.Join(addrs, ","))
	}
	kind := error(nil)
	switch {
	case errorsAllSay(errs, ErrForeignCluster.Error()):
		kind = ErrForeignCluster
	case errorsSay(errs, "received invalid msgType"):
		kind = ErrNotMesh
	case errorsSay(errs, "remote state is not encrypted"):
		kind = ErrPlaintext
	}
	if kind != nil {
		return fmt.Errorf("mesh: join %s: %w: %s", strings.Join(addrs, ","), kind, oneLine(err))
	}
	return fmt.Errorf("mesh: join %s: %s", strings.Join(addrs, ","), oneLine(err))
}

// errorsSay reports whether one of errs says text.
func errorsSay(errs []error, text string) bool {
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), text) {
			return true
		}
	}
	return false
}

// errorsAllSay reports whether every one of errs (at least one) says text.
func errorsAllSay(errs []error, text string) bool {
	for _, err := range errs {
		if err == nil || !strings.Contains(err.Error(), text) {
			return false
		}
	}
	return len(errs) > 0
}

// Members returns every member this node knows, itself included, sorted by id: the live ones,
// the dead and left ones for Config.Retention, and foreign peers it has seen.
func (m *Mesh) Members() []Member {
	cid := m.local.Load().meta.ClusterID
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	prune(m.table, now, m.retention)
	prune(m.foreign, now, m.retention)
	return memberList(m.table, m.foreign, cid)
}

// Count returns how many members Members lists with status s.
func (m *Mesh) Count(s Status) int {
	n := counts(m.Members())
	if s < 0 || int(s) >= len(n) {
		return 0
	}
	return n[s]
}

// SetMeta changes this node's metadata with f and gossips it: it returns once memberlist has
// sent the update to enough peers, or after Config.UpdateTimeout (an error; the update stays
// queued and still spreads). f must not change NodeID or Leaving. An update that does not fit
// MetaMaxSize is refused and the metadata stays as it was.
func (m *Mesh) SetMeta(f func(*Meta)) error {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	switch {
	case m.closed.Load():
		return ErrShutdown
	case m.left.Load():
		return ErrLeft
	}
	cur := m.local.Load()
	next := cur.meta
	f(&next)
	if next.NodeID != cur.meta.NodeID {
		return errors.New("mesh: SetMeta cannot change the node id")
	}
	if next.Leaving != cur.meta.Leaving {
		return errors.New("mesh: SetMeta cannot change Leaving; Leave sets it")
	}
	return m.publish(next, m.updateTO)
}

// publish stores meta as this node's and gossips it, waiting at most timeout. The caller holds
// metaMu.
func (m *Mesh) publish(meta Meta, timeout time.Duration) error {
	raw, err := EncodeMeta(meta)
	if err != nil {
		return err
	}
	if bytes.Equal(raw, m.local.Load().raw) {
		return nil
	}
	m.local.Store(&localMeta{meta: meta, raw: raw})
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("mesh: metadata updated here but not yet gossiped after %s (it stays queued): %s", timeout, oneLine(err))
	}
	return nil
}

// Watch returns a channel that receives after each change of the membership (a join, a leave
// or failure, a metadata update, a newly seen foreign peer), and a function that stops the
// watch. Signals coalesce in a buffer of one: a consumer reads Members after a signal, so a
// dropped signal costs nothing.
func (m *Mesh) Watch() (<-chan struct{}, func()) { return m.watch(false) }

// WatchMembership is Watch without the metadata updates that only move a peer's progress (its
// applied index and owned-worker count, gossiped at every raft write): the leader's voter and
// failover reconcilers read every record or peer at each signal, and have nothing to do then.
func (m *Mesh) WatchMembership() (<-chan struct{}, func()) { return m.watch(true) }

func (m *Mesh) watch(membershipOnly bool) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.watchMu.Lock()
	m.watchers[ch] = membershipOnly
	m.watchMu.Unlock()
	return ch, func() {
		m.watchMu.Lock()
		delete(m.watchers, ch)
		m.watchMu.Unlock()
	}
}

// signal wakes every watcher without blocking; progressOnly says the change moved only a peer's
// progress, which WatchMembership's watchers skip.
func (m *Mesh) signal() { m.signalChange(false) }

func (m *Mesh) signalChange(progressOnly bool) {
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	for ch, membershipOnly := range m.watchers {
		if progressOnly && membershipOnly {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Leave leaves the mesh gracefully: it publishes Meta.Leaving, then memberlist's leave message,
// each waiting for the gossip to go out, within timeout in all (<= 0 means
// DefaultUpdateTimeout). Peers then list the node as
// left instead of dead. The node keeps answering probes until Shutdown, which should follow.
// Calling it again does nothing.
func (m *Mesh) Leave(timeout time.Duration) error {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	if m.closed.Load() {
		return ErrShutdown
	}
	if m.left.Load() {
		return nil
	}
	if timeout <= 0 {
		timeout = DefaultUpdateTimeout
	}
	deadline := time.Now().Add(timeout)
	next := m.local.Load().meta
	next.Leaving = true
	errMeta := m.publish(next, max(timeout/2, time.Millisecond))
	m.left.Store(true)
	err := m.ml.Leave(max(time.Until(deadline), time.Millisecond))
	if err != nil {
		err = fmt.Errorf("mesh: leave: %s", oneLine(err))
	}
	m.log.Info("mesh left", "node", m.name)
	return errors.Join(errMeta, err)
}

// Shutdown stops memberlist's listeners and goroutines without a leave message: peers see the
// node fail. It unregisters the metrics. Calling it again does nothing.
func (m *Mesh) Shutdown() error {
	var err error
	m.once.Do(func() {
		m.closed.Store(true)
		m.bul.close()
		if e := m.ml.Shutdown(); e != nil {
			err = fmt.Errorf("mesh: shutdown: %s", oneLine(e))
		}
		m.metrics.unregister()
		m.log.Info("mesh stopped", "node", m.name)
	})
	return err
}
