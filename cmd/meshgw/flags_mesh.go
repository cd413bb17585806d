package main

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/server"
)

// clusterFlags are the gateway cluster's (DESIGN.md sections 3, 4 and 11): the mesh listener and
// its profile, joining, bootstrapping together, the forwarding listener, the voters and the
// failover of a gone owner's workers.
type clusterFlags struct {
	meshPort           int
	meshBindHost       string
	meshAdvertiseHost  string
	meshProfile        string
	meshEncryptKey     string // a secret: never logged, echoed or put in an error
	meshEncryptKeyFile string
	join               []string
	bootstrapExpect    int
	rpcPort            int
	rpcHost            string
	raftVoters         int
	deadVoterGrace     int
	reconcileInterval  int
	ownerFailoverGrace int
	fleetAckTimeout    int
	leaveOnTerminate   bool
	drainTimeout       int
	autoRebalance      bool

	gw    *gatewayFlags // for --host, which the listeners default to
	state *stateFlags   // for --raft-advertise, which makes a gateway clustered (standalone)
}

func (f *clusterFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.meshPort, "mesh-port", mesh.DefaultPort, "port of the mesh (memberlist), TCP and UDP (0 picks a free one)")
	fs.StringVar(&f.meshBindHost, "mesh-bind-host", "", "address the mesh listens on (default: --host; 127.0.0.1 for a gateway without --join, --bootstrap-expect or an advertised address)")
	fs.StringVar(&f.meshAdvertiseHost, "mesh-advertise-host", "", "address peers reach this gateway on, for the mesh, raft, gRPC and HTTP (required with --join or --bootstrap-expect when binding 0.0.0.0)")
	fs.StringVar(&f.meshProfile, "mesh-profile", mesh.ProfileLAN, "mesh timings: lan, wan or local (one host: tests, demos)")
	fs.StringVar(&f.meshEncryptKey, "mesh-encrypt-key", "", "base64 AES key (16, 24 or 32 bytes) encrypting the mesh's gossip; every peer needs the same; prefer --mesh-encrypt-key-file or the variable: a command line is readable by every local user")
	fs.StringVar(&f.meshEncryptKeyFile, "mesh-encrypt-key-file", "", "file holding --mesh-encrypt-key's base64 key, or several one per line, the primary first")
	fs.StringSliceVar(&f.join, "join", nil, "mesh addresses (host[:port], default port 39527) of gateways to join, repeatable and comma-separated")
	fs.IntVar(&f.bootstrapExpect, "bootstrap-expect", 0, "number of new gateways that bootstrap a cluster together once they see each other (0 = off)")
	fs.IntVar(&f.rpcPort, "rpc-port", consensus.DefaultRPCPort, "port of the gRPC listener serving writes forwarded to the raft leader (0 picks a free one)")
	fs.StringVar(&f.rpcHost, "rpc-host", "", "address the gRPC listener binds (default: --host; 127.0.0.1 for a gateway without --join, --bootstrap-expect or an advertised address)")
	fs.IntVar(&f.raftVoters, "raft-voters", voters.DefaultVoters,
		"raft voters the leader keeps; other gateways are non-voters. 0: chosen by the fleet's size (1 or 2 gateways: 1, 3 or 4: 3, 5 or more: 5), counting gateways that are down, and those that left or drained until --dead-voter-grace-secs after")
	fs.IntVar(&f.deadVoterGrace, "dead-voter-grace-secs", int(voters.DefaultDeadVoterGrace/time.Second), "seconds a voter may be dead before a live non-voter takes its seat")
	fs.IntVar(&f.ownerFailoverGrace, "owner-failover-grace-secs", int(ownership.DefaultFailoverGrace/time.Second), "seconds a worker's owner may be dead or gone from the mesh before the leader gives its workers to live peers")
	fs.IntVar(&f.fleetAckTimeout, "fleet-ack-timeout-secs", int(fleetack.DefaultTimeout/time.Second), "seconds an admin write waits for every live gateway to apply it before it answers naming the ones that lag")
	fs.BoolVar(&f.leaveOnTerminate, "leave-on-terminate", false, "on SIGTERM, drain this gateway as meshctl drain does (its workers, raft leadership and voter seat go to other gateways, then it leaves) before it stops; without it a quick restart comes back as the owner")
	fs.IntVar(&f.drainTimeout, "drain-timeout-secs", int(server.DefaultDrainTimeout/time.Second), "seconds a drain (POST /mesh/drain, --leave-on-terminate) waits for the drained gateways to hand everything over and leave before it answers what is left")
	fs.BoolVar(&f.autoRebalance, "auto-rebalance", false, "the raft leader evens out worker ownership (as meshctl rebalance does) once membership settles after a join or a failover")
	fs.IntVar(&f.reconcileInterval, "reconcile-interval-secs", int(voters.DefaultReconcileInterval/time.Second), "seconds between the leader's full passes reconciling the mesh into the raft configuration")
}

func (f *clusterFlags) validate() error {
	if err := keyFromFile(&f.meshEncryptKey, "mesh-encrypt-key", "mesh-encrypt-key-file", f.meshEncryptKeyFile); err != nil {
		return err
	}
	if err := checkKey(f.meshEncryptKey); err != nil && f.meshEncryptKeyFile != "" {
		return valuef("mesh-encrypt-key-file", "%s: %v", f.meshEncryptKeyFile, err)
	}
	for _, e := range []error{
		checkPort("mesh-port", f.meshPort, true),
		checkPort("rpc-port", f.rpcPort, true),
		checkOneOf("mesh-profile", f.meshProfile, []string{mesh.ProfileLAN, mesh.ProfileWAN, mesh.ProfileLocal}),
		checkMin("bootstrap-expect", f.bootstrapExpect, 0),
		checkMin("raft-voters", f.raftVoters, 0),
		checkMin("dead-voter-grace-secs", f.deadVoterGrace, 1),
		checkMin("reconcile-interval-secs", f.reconcileInterval, 1),
		checkMin("owner-failover-grace-secs", f.ownerFailoverGrace, 1),
		checkMin("fleet-ack-timeout-secs", f.fleetAckTimeout, 1),
		checkMin("drain-timeout-secs", f.drainTimeout, 1),
		checkHost("mesh-bind-host", f.meshBindHost),
		checkHost("rpc-host", f.rpcHost),
		checkKey(f.meshEncryptKey),
	} {
		if e != nil {
			return e
		}
	}
	if h := f.meshAdvertiseHost; h != "" {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			return valuef("mesh-advertise-host", "%q is an unspecified address; peers cannot reach it", h)
		}
		if strings.ContainsAny(h, ":/ ") && net.ParseIP(h) == nil {
			return valuef("mesh-advertise-host", "%q is not an IP address or a host name", h)
		}
	}
	joins := make([]string, 0, len(f.join))
	for _, j := range f.join {
		if j = strings.TrimSpace(j); j == "" {
			continue
		}
		addr, err := joinAddr(j)
		if err != nil {
			return err
		}
		joins = append(joins, addr)
	}
	f.join = joins
	if f.state.raftMultiplier == 0 { // auto: raft's timings follow the mesh's
		f.state.raftMultiplier = 1
		if f.meshProfile == mesh.ProfileWAN {
			f.state.raftMultiplier = wanRaftMultiplier
		}
	}
	if f.clustered() && f.meshAdvertiseHost == "" {
		for _, h := range []string{f.meshBind(), f.rpcBind(), f.gw.host} {
			if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
				return usagef("--mesh-advertise-host is required with --join or --bootstrap-expect when a listener binds %s: peers need an address to reach this gateway", h)
			}
		}
	}
	return nil
}

// joinAddr checks one --join entry and adds the default mesh port when it has none.
func joinAddr(j string) (string, error) {
	host, port, err := net.SplitHostPort(j)
	if err != nil {
		host, port = j, strconv.Itoa(mesh.DefaultPort)
		if strings.Contains(j, ":") && net.ParseIP(j) == nil {
			return "", valuef("join", "%q is not host[:port]", j)
		}
	}
	n, perr := strconv.Atoi(port)
	if host == "" || perr != nil || n < 1 || n > 65535 {
		return "", valuef("join", "%q is not host[:port]", j)
	}
	return net.JoinHostPort(host, port), nil
}

// checkHost accepts "" (the default), an IP address or localhost.
func checkHost(name, v string) error {
	if v == "" || v == "localhost" || net.ParseIP(v) != nil {
		return nil
	}
	return valuef(name, "%q is not an IP address", v)
}

// checkKey validates --mesh-encrypt-key as the mesh will (one key, or several separated by
// commas or newlines, the primary first: mesh.ParseEncryptKeys), without ever quoting it.
func checkKey(k string) error {
	if k == "" {
		return nil
	}
	if _, err := mesh.ParseEncryptKeys(k); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// clustered reports whether this gateway expects peers from the start (--join or
// --bootstrap-expect); without either it is a mesh of one that others may join.
func (f *clusterFlags) clustered() bool { return len(f.join) > 0 || f.bootstrapExpect > 0 }

// meshBind is the mesh's bind address, an IP (memberlist takes no host name): see
// controlHost.
func (f *clusterFlags) meshBind() string { return f.controlHost(f.meshBindHost) }

// rpcBind is the gRPC listener's bind address: see controlHost.
func (f *clusterFlags) rpcBind() string { return f.controlHost(f.rpcHost) }

// advertiseHost is the host peers reach a listener bound on bind at: --mesh-advertise-host,
// else the bind address itself, else (an unspecified bind address, allowed only without --join
// and --bootstrap-expect) 127.0.0.1, as raft advertises.
func (f *clusterFlags) advertiseHost(bind string) string {
	switch ip := net.ParseIP(ipOf(bind)); {
	case f.meshAdvertiseHost != "":
		return f.meshAdvertiseHost
	case ip == nil || ip.IsUnspecified():
		return "127.0.0.1"
	}
	return ipOf(bind)
}

func (f *clusterFlags) deadVoterGraceDuration() time.Duration {
	return time.Duration(f.deadVoterGrace) * time.Second
}

func (f *clusterFlags) ownerFailoverGraceDuration() time.Duration {
	return time.Duration(f.ownerFailoverGrace) * time.Second
}

func (f *clusterFlags) drainTimeoutDuration() time.Duration {
	return time.Duration(f.drainTimeout) * time.Second
}

func (f *clusterFlags) reconcileIntervalDuration() time.Duration {
	return time.Duration(f.reconcileInterval) * time.Second
}

// ipOf maps localhost to 127.0.0.1 and leaves anything else alone.
func ipOf(h string) string {
	if h == "localhost" {
		return "127.0.0.1"
	}
	return h
}
