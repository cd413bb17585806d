package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// Node is this gateway's member of the raft group: the raft instance, its stores and transport,
// and the FSM it applies to. Its methods are safe for concurrent use.
type Node struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm.FSM
	raft  *raft.Raft
	trans raft.Transport
	// barrier is raft's Barrier, which the leader loop and ReadIndex wait on; tests replace it.
	barrier func(timeout time.Duration) raft.Future
	// guard holds votes back while the node is rejoining (voteguard.go).
	guard *voteGuard
	// relay hands raft the leader's commit notices (commitnotice.go).
	relay *commitRelay
	// hb follows the leader's heartbeats to each peer (heartbeats.go).
	hb *heartbeats
	// silence measures how long this node has heard from no leader (silence.go).
	silence silence
	// readyTerm is the last term in which this node, leading, committed a Barrier: from then on
	// its commit index covers every entry of earlier terms (ReadIndex).
	readyTerm   atomic.Uint64
	incarnation string
	stores      stores
	met         *metrics
	// saver keeps the applied state on disk; nil when ephemeral.
	saver *saver
	// loaded is the applied index of the state loaded from disk at start, 0 when none was;
	// loadedVersion is the FSM's version right after that load, what the disk holds.
	loaded        uint64
	loadedVersion uint64
	// restored is true when raft restored a snapshot over the loaded state at start.
	restored bool

	// bootstrapped is true when Start bootstrapped a new cluster (no local raft state).
	bootstrapped bool

	notifyCh chan bool
	stop     chan struct{}
	wg       sync.WaitGroup

	closed   atomic.Bool
	shutdown sync.Once
	shutErr  error
}

// Start opens the stores, starts raft and returns the running node. Without local raft state
// (a new state directory, or Ephemeral) it bootstraps a single-voter cluster of this node at
// once, the embedded default, unless Config.Join or Config.BootstrapExpect is set: then raft
// starts with no configuration, and the node waits for a leader to add it (or for
// BootstrapWith). With local state it just starts, and raft restores the snapshot and replays
// the log.
func Start(cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger.With("component", "consensus", "node", cfg.NodeID)
	if cfg.Ephemeral {
		logger.Warn("raft runs in memory (--ephemeral): worker records, flags and ownership are lost when this gateway stops")
	}
	bridge := newHCLogBridge(cfg.Logger.With("node", cfg.NodeID), cfg.RaftLogLevel.Level())
	n := &Node{
		cfg:      cfg,
		log:      logger,
		fsm:      fsm.New(logger),
		notifyCh: make(chan bool, 8),
		stop:     make(chan struct{}),
		hb:       newHeartbeats(),
	}
	if n.stores, err = openStores(cfg, bridge); err != nil {
		return nil, err
	}
	n.loadSaved()
	if err := n.startRaft(bridge); err != nil {
		return nil, errors.Join(err, n.stores.close())
	}
	if n.met, err = newMetrics(cfg.Registerer, n); err != nil {
		_ = n.raft.Shutdown().Error()
		return nil, errors.Join(err, n.stores.close())
	}
	if n.stores.db != nil {
		version, saved := uint64(0), uint64(0)
		if n.loaded > 0 && !n.restored {
			// What is on disk; the entries replayed since are saved as a delta, and a newer
			// snapshot raft restored is saved whole.
			version, saved = n.loadedVersion, n.loaded
		}
		n.saver = newSaver(n.fsm, n.stores.db, version, saved, cfg.saveInterval, logger)
		n.saver.start()
	}
	n.wg.Add(1)
	go n.followHeartbeats()
	n.relay = newCommitRelay(n)
	n.wg.Go(func() {
		defer n.recoverLog("commit relay")
		n.relay.run(n.stop)
	})
	if n.stores.db != nil {
		n.wg.Add(1)
		go n.keepCommit()
	}
	n.wg.Add(1)
	go n.watchLeadership()
	logger.Info("raft started", "address", n.trans.LocalAddr(), "bootstrapped", n.bootstrapped,
		"state_dir", cfg.StateDir, "ephemeral", cfg.Ephemeral, "applied_index", n.fsm.AppliedIndex(),
		"workers", n.fsm.Len())
	return n, nil
}

// loadSaved loads the applied state saved before a restart into the FSM, so that the gateway
// serves its last applied records at once, whatever raft's state (fail-static). A saved state
// that cannot be read is logged and left: raft then restores its snapshot and replays its log,
// as before the state was saved.
func (n *Node) loadSaved() {
	if n.stores.db == nil {
		return
	}
	applied, ok, err := n.fsm.Load(n.stores.db)
	switch {
	case err != nil:
		n.log.Error("cannot read the applied state saved before the restart; serving what raft restores instead", "err", err)
	case ok:
		n.loaded, n.loadedVersion = applied, n.fsm.Version()
	}
}

// skipSnapshotRestore reports whether raft should leave the FSM as loaded instead of restoring
// its latest snapshot: when the loaded state is at or past that snapshot (raft then replays the
// log from the snapshot's index, and the FSM skips what it already applied). An older loaded
// state (one a crash left behind a newer snapshot) gives way to the snapshot. Without any
// snapshot there is nothing to restore.
func (n *Node) skipSnapshotRestore() bool {
	snaps, err := n.stores.snaps.List()
	switch {
	case err != nil:
		return false
	case len(snaps) == 0:
		return true // nothing to restore
	}
	return n.loaded > 0 && snaps[0].Index <= n.loaded
}

// SavedIndex is the applied index a restart serves at once, before any leader exists: the
// state saved on disk, and past it the committed entries the raft log holds (replay.go); with
// --ephemeral, the applied index (nothing is saved).
func (n *Node) SavedIndex() uint64 {
	if n.saver == nil {
		return n.fsm.AppliedIndex()
	}
	applied := n.fsm.AppliedIndex()
	return max(n.saver.SavedIndex(), min(n.stores.db.CommitIndex(), applied))
}

// WaitApplied returns the FSM's applied index once it reaches index, or when ctx ends (it is
// then below). A Node is thus an Applied whose data plane is its FSM (tools and tests; a gateway
// waits for its pool).
func (n *Node) WaitApplied(ctx context.Context, index uint64) uint64 {
	for {
		applied := n.fsm.AppliedSignal() // before the index: no entry slips between
		if got := n.AppliedIndex(); got >= index {
			return got
		}
		select {
		case <-ctx.Done():
			return n.AppliedIndex()
		case <-applied:
		}
	}
}

// WaitSaved returns SavedIndex once it reaches index, or when ctx ends (it is then below): an
// acknowledged write is on disk here, so that a restart serves it from the first request. The
// commit index is stored right after the FSM applies an entry (keepCommit), so the wait ends
// one small bbolt commit after the apply, with no save of the applied state.
func (n *Node) WaitSaved(ctx context.Context, index uint64) uint64 {
	if n.saver == nil {
		return n.fsm.AppliedIndex()
	}
	for {
		// Read before the index, so that no change slips between: a save, the commit index
		// stored with an append, an entry applied (one that changes nothing brings no save).
		saved, committed, applied := *n.saver.savedSig.Load(), n.stores.db.CommitWatch(), n.fsm.AppliedSignal()
		if got := n.SavedIndex(); got >= index {
			return got
		}
		select {
		case <-ctx.Done():
			return n.SavedIndex()
		case <-saved:
		case <-committed:
		case <-applied:
		}
	}
}

// startRaft makes the transport and the raft instance, and bootstraps when there is no state.
func (n *Node) startRaft(bridge *hclogBridge) error {
	cfg := n.cfg
	n.trans = cfg.Transport
	if n.trans == nil {
		t, err := newTCPTransport(cfg, bridge, n.fsm.ClusterID)
		if err != nil {
			return err
		}
		n.trans = t
	}
	rc := raft.DefaultConfig()
	scaleTimings(rc, cfg.RaftMultiplier)
	if cfg.Tune != nil {
		cfg.Tune(rc)
	}
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = bridge
	rc.NotifyCh = n.notifyCh
	n.silence.limit = silenceLimit(rc)
	n.silence.mark(time.Now())
	if err := n.recoverIfAsked(rc); err != nil {
		return errors.Join(err, closeTransport(n.trans))
	}
	rc.NoSnapshotRestoreOnStart = n.skipSnapshotRestore()
	if n.stores.db != nil {
		rc.RestoreCommittedLogs = true // raft stages its commit index with each append (replay.go)
		if rc.NoSnapshotRestoreOnStart {
			n.replayCommitted()
		} else {
			n.restored = true
		}
	}
	existing, err := raft.HasExistingState(n.stores.log, n.stores.stable, n.stores.snaps)
	if err != nil {
		return errors.Join(fmt.Errorf("consensus: read raft state: %w", err), closeTransport(n.trans))
	}
	waits := len(cfg.Join) > 0 || cfg.BootstrapExpect > 0
	rejoining, err := n.startRejoining(existing, waits)
	if err != nil {
		return errors.Join(err, closeTransport(n.trans))
	}
	n.guard = newVoteGuard(n.trans, rc.LocalID, rejoining, n.log)
	n.trans = &contactTransport{voteGuard: n.guard, hb: n.hb}
	r, err := raft.NewRaft(rc, n.fsm, n.stores.log, n.stores.stable, n.stores.snaps, n.trans)
	if err != nil {
		return errors.Join(fmt.Errorf("consensus: start raft: %w", err), closeTransport(n.trans))
	}
	n.raft, n.barrier = r, r.Barrier
	n.guard.setRaft(r)
	switch {
	case existing && waits:
		n.log.Info("raft state found: a restart, so --join and --bootstrap-expect do not bootstrap; raft restores its configuration",
			"join", cfg.Join, "bootstrap_expect", cfg.BootstrapExpect)
		n.electAlone(rc, rejoining)
		return nil
	case existing:
		n.electAlone(rc, rejoining)
		return nil
	case cfg.BootstrapExpect > 0:
		n.log.Info("no raft state: waiting for --bootstrap-expect peers without state to bootstrap together",
			"bootstrap_expect", cfg.BootstrapExpect)
		return nil
	case waits:
		n.log.Info("no raft state: waiting for the raft leader to add this node (--join)", "join", cfg.Join)
		return nil
	}
	servers := cfg.BootstrapServers
	if len(servers) == 0 {
		servers = []raft.Server{{ID: rc.LocalID, Address: n.trans.LocalAddr(), Suffrage: raft.Voter}}
	}
	if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		_ = r.Shutdown().Error()
		return fmt.Errorf("consensus: bootstrap: %w", err)
	}
	n.bootstrapped = true
	n.log.Info("bootstrapped a new raft cluster", "voters", len(servers))
	n.electAlone(rc, rejoining)
	return nil
}

// electAlone has the node elect itself at once when it is its configuration's one voter
// (solo.go). A rejoining node asks no vote, its own included.
func (n *Node) electAlone(rc *raft.Config, rejoining bool) {
	if !rejoining && electAloneAtOnce(n.raft, rc.LocalID, rc.LeaderLeaseTimeout) {
		n.log.Info("this node is the one voter of its raft configuration: it elects itself without waiting for the heartbeat timeout")
	}
}

func closeTransport(t raft.Transport) error {
	if c, ok := t.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// Shutdown stops raft, the node's goroutines and the stores. It does not take a snapshot (raft
// replays the log at the next start). Calling it again returns the first result.
func (n *Node) Shutdown() error {
	n.shutdown.Do(func() {
		n.closed.Store(true)
		err := n.raft.Shutdown().Error() // also closes the transport
		close(n.stop)
		n.wg.Wait()
		if n.saver != nil {
			n.saver.close() // the last applies, before the store closes
		}
		n.met.unregister()
		n.shutErr = errors.Join(err, n.stores.close())
		n.log.Info("raft stopped")
	})
	return n.shutErr
}

// ID returns this node's raft server id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Address returns the raft address this node advertises.
func (n *Node) Address() string { return string(n.trans.LocalAddr()) }

// HasLeader reports whether this node knows a raft leader (itself or another) and is not cut
// off from it (CutOff): whether the control plane has a quorum as far as this node can tell.
// A follower cut off still names its old leader for raft's heartbeat timeout; HasLeader says
// false from the silence limit on.
func (n *Node) HasLeader() bool {
	addr, _ := n.raft.LeaderWithID()
	return addr != "" && n.CutOff() == nil
}

// RaftMultiplier is the factor raft's timings run at (Config.RaftMultiplier, at least 1): the
// waits built on them (forwarding, say) scale alike.
func (n *Node) RaftMultiplier() int { return n.cfg.RaftMultiplier }

// IsLeader reports whether this node is the raft leader right now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader this node knows, itself when it leads; ok is false when it knows
// none. A shut-down node counts as knowing one, "", so that a caller waiting for a leader stops
// waiting and its next attempt says ErrShutdown.
func (n *Node) Leader() (id string, ok bool) {
	if n.closed.Load() {
		return "", true
	}
	if n.IsLeader() {
		return n.ID(), true
	}
	_, lid := n.raft.LeaderWithID()
	if lid == "" || string(lid) == n.ID() {
		return "", false
	}
	return string(lid), true
}

// WatchLeader returns a channel that receives after changes of the leader this node knows
// (raft's LeaderObservation), coalesced in a buffer of one, and a function that stops the
// watch.
func (n *Node) WatchLeader() (<-chan raft.Observation, func()) {
	changes := make(chan raft.Observation, 1)
	obs := raft.NewObserver(changes, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	return changes, func() { n.raft.DeregisterObserver(obs) }
}

// Worker returns a copy of the applied record of id.
func (n *Node) Worker(id worker.ID) (fsm.Record, bool) { return n.fsm.Worker(id) }

// Workers returns copies of every applied record, sorted by id.
func (n *Node) Workers() []fsm.Record { return n.fsm.Workers() }

// WorkersShared returns every applied record sharing the stored specs' maps and slices; see
// fsm.FSM.WorkersShared.
func (n *Node) WorkersShared() []fsm.Record { return n.fsm.WorkersShared() }

// ChangedSince returns the applied records changed after version v and the version they lead
// to, or ok=false when the reader must read every record; see fsm.FSM.ChangedSince.
func (n *Node) ChangedSince(v uint64) (fsm.Changes, bool) { return n.fsm.ChangedSince(v) }

// Draining returns the peers marked draining (fsm.OperatorReassign), sorted by id.
func (n *Node) Draining() []fsm.DrainingPeer { return n.fsm.Draining() }

// Journal returns copies of the open weight-update records.
func (n *Node) Journal() []fsm.JournalRecord { return n.fsm.Journal() }

// ClusterID returns the cluster id, "" until the first leader has set it.
func (n *Node) ClusterID() string { return n.fsm.ClusterID() }

// AppliedIndex returns the raft index of the last command applied on this node: what it
// publishes for fleet-acknowledged writes.
func (n *Node) AppliedIndex() uint64 { return n.fsm.AppliedIndex() }

// AppliedFor returns the index of the last entry proposed by node from (Apply, or a write it
// forwarded) that this node applied; see fsm.FSM.AppliedFor.
func (n *Node) AppliedFor(from string) uint64 { return n.fsm.AppliedFor(from) }

// AppliedSignal returns a channel closed the next time the applied index changes, by any
// entry (fsm.FSM.AppliedSignal).
func (n *Node) AppliedSignal() <-chan struct{} { return n.fsm.AppliedSignal() }

// Version grows with every change of the applied state; see Watch.
func (n *Node) Version() uint64 { return n.fsm.Version() }

// Watch returns a channel that receives after changes of the applied state, coalesced in a
// buffer of one, and a function that stops the watch. A consumer reconciles by reading the
// state, so a dropped signal costs nothing.
func (n *Node) Watch() (<-chan struct{}, func()) { return n.fsm.Watch() }

// Info is what GET /mesh/raft answers and meshctl raft prints.
type Info struct {
	// Leader is the leader's node id, "" when there is none.
	Leader        string   `json:"leader"`
	LeaderAddress string   `json:"leader_address"`
	Term          uint64   `json:"term"`
	AppliedIndex  uint64   `json:"applied_index"`
	Servers       []Server `json:"servers"`
	// Voters is how many servers of the configuration vote.
	Voters int `json:"voters"`
	// VotersWanted is how many voters the leader works towards: --raft-voters, or the count it
	// chooses by the fleet's size (VotersAuto), as the planner counts the fleet (voters.Shown;
	// the server sets it). 0 when not known.
	VotersWanted int `json:"voters_wanted,omitempty"`
	// VotersAuto says VotersWanted is the automatic count (--raft-voters 0, voters.AutoCount).
	VotersAuto bool `json:"voters_auto,omitempty"`
	// FaultTolerant says the configuration keeps a quorum when any one voter is lost: it has at
	// least three voters. A cluster of three gateways whose joined ones are still non-voters is
	// not yet fault-tolerant: the first one's death stops every write.
	FaultTolerant bool `json:"fault_tolerant"`
}

// Server is one member of the raft configuration.
type Server struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// Suffrage is "voter", "nonvoter" or "staging".
	Suffrage string `json:"suffrage"`
}

// Info returns the leader, term, applied index and the raft configuration as this node sees
// them.
func (n *Node) Info() (Info, error) {
	if n.closed.Load() {
		return Info{}, ErrShutdown
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return Info{}, fmt.Errorf("consensus: read configuration: %w", err)
	}
	addr, id := n.raft.LeaderWithID()
	info := Info{
		Leader:        string(id),
		LeaderAddress: string(addr),
		Term:          n.raft.CurrentTerm(),
		AppliedIndex:  n.fsm.AppliedIndex(),
		Servers:       []Server{},
	}
	for _, s := range f.Configuration().Servers {
		info.Servers = append(info.Servers, Server{
			ID:       string(s.ID),
			Address:  string(s.Address),
			Suffrage: strings.ToLower(s.Suffrage.String()),
		})
		if s.Suffrage == raft.Voter {
			info.Voters++
		}
	}
	info.FaultTolerant = info.Voters >= 3
	return info, nil
}

// Snapshot makes raft take a snapshot now and compact its log behind it (raft also does so on
// its own every 8,192 entries). It returns once the snapshot is persisted;
// raft.ErrNothingNewToSnapshot means the last one is current.
func (n *Node) Snapshot() error {
	if n.closed.Load() {
		return ErrShutdown
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("consensus: snapshot: %w", err)
	}
	return nil
}

// recoverLog turns a panic in a background goroutine into an error line with its stack.
func (n *Node) recoverLog(what string) {
	if r := recover(); r != nil {
		n.log.Error("panic in background goroutine", "goroutine", what, "panic", r, "stack", string(debug.Stack()))
	}
}

// recoverLog turns a panic in a background goroutine into an error line on log with its stack.
// Deferred directly, as recover requires.
func recoverLog(log *slog.Logger, what string) {
	if r := recover(); r != nil {
		log.Error("panic in background goroutine", "goroutine", what, "panic", r, "stack", string(debug.Stack()))
	}
}
