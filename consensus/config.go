package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	DefaultRaftPort     = 39528
	DefaultApplyTimeout = 10 * time.Second
	// DefaultRPCPort is --rpc-port: the cluster's gRPC listener, which serves forwarded writes
	// (consensus/forward), fleet acknowledgements and read indexes (consensus/fleetack).
	DefaultRPCPort = 39529
	// MaxRaftMultiplier bounds Config.RaftMultiplier, as Consul bounds raft_multiplier: at 10 a
	// dead leader is replaced after 10-20 s.
	MaxRaftMultiplier = 10
	// DefaultRaftLogLevel keeps raft's routine INFO lines (elections, snapshots) out of the log.
	DefaultRaftLogLevel = slog.LevelWarn
)

// Config configures a Node. The zero value of every optional field is a working default.
type Config struct {
	// NodeID is the raft server id: --node-id, else the main listener's host_port. It must stay
	// the same across restarts (the address may change). Required.
	NodeID string

	// BindAddr is the host:port of raft's TCP listener. Default "0.0.0.0:39528"; port 0 picks a
	// free port (tests).
	BindAddr string

	// AdvertiseAddr is the host:port other peers dial. Default: the listener's address, or
	// AdvertiseHost with the listener's port. When it changes between restarts, the node
	// updates its own entry in the raft configuration once it leads (and the leader's voter
	// reconciler updates a follower's from its mesh metadata).
	AdvertiseAddr string

	// AdvertiseHost is the host advertised with the listener's port when AdvertiseAddr is empty
	// (--mesh-advertise-host, which raft follows). Default: the listener's host, or 127.0.0.1
	// when it binds an unspecified address (a mesh of one needs nothing else).
	AdvertiseHost string

	// StateDir is this node's folder, as storage.PrepareNodeDir made it: it holds raft.db (log
	// and stable store) and snapshots/. Required unless Ephemeral.
	StateDir string

	// Ephemeral keeps raft's log, stable store and snapshots in memory: nothing survives the
	// process (--ephemeral, for tests and demos). Start logs a warning.
	Ephemeral bool

	// Join is --join: the mesh addresses of peers to join. The node itself never dials them
	// (the mesh does); their presence means that a node without raft state does not bootstrap:
	// it starts raft with no configuration and waits for the leader to add it.
	Join []string
	// BootstrapExpect is --bootstrap-expect: a node without raft state does not bootstrap at
	// Start; the gateway calls BootstrapWith once it sees that many peers without state. Zero
	// means off.
	BootstrapExpect int

	// RaftMultiplier scales raft's timings (HeartbeatTimeout, ElectionTimeout and
	// LeaderLeaseTimeout, 1 s, 1 s and 500 ms by default) for links slower than a LAN, as
	// Consul's raft_multiplier does: 3 holds over round trips of 100-300 ms with no spurious
	// election. Zero means 1; at most MaxRaftMultiplier.
	RaftMultiplier int

	// ApplyTimeout bounds Apply when its context has no deadline. Zero means
	// DefaultApplyTimeout.
	ApplyTimeout time.Duration

	// LeaderLoop, if set, runs in its own goroutine each time this node gains leadership, after
	// the Barrier and the node's own leader duties. Its context is cancelled when leadership is
	// lost or the node shuts down; Shutdown waits for it to return. A panic is recovered and
	// logged. This is where the leader-only reconcilers of later steps go.
	LeaderLoop func(ctx context.Context)

	// Logger receives the node's lines and raft's. Nil means slog.Default().
	Logger *slog.Logger
	// RaftLogLevel is the lowest level of raft's own lines that reach Logger. Nil means
	// DefaultRaftLogLevel.
	RaftLogLevel slog.Leveler

	// Registerer receives the meshgw_raft_* metrics. Nil means they are not registered.
	Registerer prometheus.Registerer

	// Transport replaces raft's TCP transport (tests use raft.NewInmemTransport). Nil means TCP
	// on BindAddr. Shutdown closes it.
	Transport raft.Transport

	// TLS, when set, runs the TCP transport over mutual TLS (tls.go). Nil means plain TCP.
	TLS *TLSConfig

	// ClusterKey, when set and TLS is not, makes each connection of the TCP transport prove
	// the cluster key both ways before raft reads a byte of it (stream.go): a process that
	// does not hold the key can neither send raft an RPC nor receive raft's traffic. Nil means
	// plain TCP, which trusts whoever reaches the port.
	ClusterKey ClusterKey

	// SendHello reports whether the TCP transport says the raft hello (hello.go) on a
	// connection it opens to raft address addr: false when the gateway there is of a version
	// that does not read it (the mesh lists a member of this cluster at addr without
	// mesh.Meta.RaftHello; mesh.SpeaksRaftHello), which would close the connection. It is
	// called from raft's goroutines, once per connection. Nil means every address reads it.
	// An address the mesh does not list, and every address before the mesh's join merged, gets
	// the hello, which an older gateway there closes until gossip lists it (docs/mesh.md): a
	// connection without the hello is judged by nothing, and it is what keeps a gateway that
	// holds a reused address out.
	SendHello func(addr string) bool

	// JoiningCluster returns the cluster id this node is joining while its raft state holds
	// none yet (a fresh joiner, or a fresh bootstrap before its first leader set one): the one
	// its live mesh peers agree on (JoiningFromMesh), "" while they tell none (the mesh is not
	// started, its join has not merged with a peer, or no peer has an id yet). Set, it makes
	// the hello's check strict until the node has an id of its own: a connection whose hello
	// carries a cluster id is taken only when it is that one. So a fresh gateway on a dead
	// member's raft address refuses that member's cluster even when it reuses the member's node
	// id (a StatefulSet's pod names), from raft's start on, before its mesh join. Nothing is
	// lost: its own cluster's leader adds it only once the mesh shows it alive, after the join;
	// a connection of its own cluster that comes before the id reached the node, in its state
	// or in its peers' metadata (a new cluster's first leader sets the id, then gossips it), is
	// refused and dialed again by raft. A hello without a cluster id is judged by the server
	// id alone, and a connection without a hello (an older gateway's) by nothing. Nil means a
	// node without a cluster id takes any cluster's connections.
	JoiningCluster func() string

	// saveInterval is the least time between two saves of the applied state; zero means
	// defaultSaveInterval. Tests set it.
	saveInterval time.Duration

	// Tune, if set, adjusts raft's configuration before the node starts (shorter timeouts in
	// tests). LocalID, Logger and NotifyCh are the node's and must be left alone.
	Tune func(*raft.Config)

	// BootstrapServers replaces the single-voter configuration a fresh node bootstraps with
	// (every node of a new cluster gets the same list); tests and `make bench` use it to start a
	// cluster. Ignored when the node has raft state already, or waits (Join, BootstrapExpect).
	BootstrapServers []raft.Server
}

// withDefaults validates c and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.NodeID == "" {
		return c, errors.New("consensus: NodeID is required")
	}
	if c.BootstrapExpect < 0 {
		return c, fmt.Errorf("consensus: --bootstrap-expect %d is negative", c.BootstrapExpect)
	}
	if !c.Ephemeral && c.StateDir == "" {
		return c, errors.New("consensus: StateDir is required unless Ephemeral")
	}
	if c.RaftMultiplier < 0 || c.RaftMultiplier > MaxRaftMultiplier {
		return c, fmt.Errorf("consensus: --raft-multiplier %d is outside 1-%d", c.RaftMultiplier, MaxRaftMultiplier)
	}
	if c.RaftMultiplier == 0 {
		c.RaftMultiplier = 1
	}
	if c.BindAddr == "" {
		c.BindAddr = net.JoinHostPort("0.0.0.0", strconv.Itoa(DefaultRaftPort))
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftLogLevel == nil {
		c.RaftLogLevel = DefaultRaftLogLevel
	}
	if c.saveInterval <= 0 {
		c.saveInterval = defaultSaveInterval
	}
	return c, nil
}

// newTCPTransport listens on c.BindAddr and advertises c.AdvertiseAddr or its default. It owns
// the listener (rather than raft.NewTCPTransport) so that port 0 and an unspecified bind address
// both resolve before the advertise address is chosen. With c.TLS the stream layer is TLS's,
// else with c.ClusterKey the cluster key's, else plain TCP; each connection then says or reads
// the hello (hello.go), whose cluster id is what clusterID returns at the time.
func newTCPTransport(c Config, b *hclogBridge, clusterID func() string) (raft.Transport, error) {
	ln, err := net.Listen("tcp", c.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("consensus: raft listener %s: %w", c.BindAddr, err)
	}
	bound := ln.Addr().(*net.TCPAddr)
	adv := c.AdvertiseAddr
	if adv == "" {
		host := c.AdvertiseHost
		switch {
		case host != "":
		case bound.IP.IsUnspecified():
			host = "127.0.0.1"
			c.Logger.Warn("raft advertises a loopback address because it binds every interface; set --mesh-advertise-host before other gateways join",
				"bind", c.BindAddr)
		default:
			host = bound.IP.String()
		}
		adv = net.JoinHostPort(host, strconv.Itoa(bound.Port))
	}
	advAddr, err := net.ResolveTCPAddr("tcp", adv)
	if err == nil && advAddr.IP.IsUnspecified() {
		err = errors.New("an unspecified address cannot be dialled")
	}
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("consensus: raft advertise address %q: %w", adv, err)
	}
	guard, component := plainGuard(), "raft-tcp"
	switch {
	case c.TLS != nil:
		guard, component = tlsGuard(*c.TLS), "raft-tls"
	case c.ClusterKey != nil:
		guard, component = keyGuard(c.ClusterKey), "raft-key"
	}
	log := c.Logger.With("component", component)
	hello := &raftHello{self: c.NodeID, cluster: clusterID, joining: c.JoiningCluster, sendTo: c.SendHello, log: log}
	return targetTransport{raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  newGuardedStream(ln, advAddr, guard, hello, log),
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  b.Named("transport"),
	})}, nil
}

// raftConnectTimeout bounds the TCP connect of a raft connection, below the transport's I/O
// timeout (10 s) that raft passes to Dial. A SYN sent while the peer was cut off is lost, and
// the kernel sends it again only 1, 3 and 7 s later: a leader that began to dial a follower
// during a partition of a few seconds reached it up to 7 s after the partition healed (the
// follower saw no leader all that time; chaos runs measured it). With the bound, that dial
// fails after a second and raft dials again at once (a heartbeat backs off 0.5 s at most). A
// connect within a LAN or a region takes milliseconds; a second is raft's heartbeat timeout,
// past which a heartbeat is late anyway.
const raftConnectTimeout = time.Second

// connectTimeout is the bound of a raft connection's TCP connect when raft allows timeout.
func connectTimeout(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return raftConnectTimeout
	}
	return min(timeout, raftConnectTimeout)
}

// scaleTimings multiplies raft's failure-detection timings by m (Config.RaftMultiplier). The
// commit timeout, which paces idle heartbeats of a busy log rather than detecting failure,
// stays.
func scaleTimings(rc *raft.Config, m int) {
	if m <= 1 {
		return
	}
	rc.HeartbeatTimeout *= time.Duration(m)
	rc.ElectionTimeout *= time.Duration(m)
	rc.LeaderLeaseTimeout *= time.Duration(m)
}
