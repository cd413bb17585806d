package main

import (
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/storage"
)

// wanRaftMultiplier is --raft-multiplier's auto value with --mesh-profile wan: raft's
// timings times 3 hold over round trips of 100-300 ms (heartbeats every 300 ms, a follower
// waits 3-6 s before it stands; the leader's lease is 1.5 s).
const wanRaftMultiplier = 3

// stateFlags are the durable state's: where raft keeps it, and the raft listener (DESIGN.md
// section 3).
type stateFlags struct {
	stateDir      string
	ephemeral     bool
	raftPort      int
	raftAdvertise string
	// raftMultiplier is --raft-multiplier; 0 (auto) is resolved by clusterFlags.validate, since
	// it follows --mesh-profile.
	raftMultiplier int
}

func (f *stateFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.stateDir, "state-dir", "", "folder of the durable state, one subfolder per node (default: $"+storage.EnvStateDir+
		", else $XDG_STATE_HOME/meshgw, else ~/.local/state/meshgw)")
	fs.BoolVar(&f.ephemeral, "ephemeral", false, "keep raft in memory: worker records and flags are lost at exit (tests and demos only)")
	fs.IntVar(&f.raftPort, "raft-port", consensus.DefaultRaftPort, "port of raft's TCP listener, on --host (0 picks a free one)")
	fs.IntVar(&f.raftMultiplier, "raft-multiplier", 0, fmt.Sprintf("scales raft's failure detection (heartbeat and election timeouts 1 s, leader lease 500 ms) for slow links, as Consul's raft_multiplier: 1-%d; 0 = auto: %d with --mesh-profile wan, else 1", consensus.MaxRaftMultiplier, wanRaftMultiplier))
	fs.StringVar(&f.raftAdvertise, "raft-advertise", "", "host:port other gateways dial for raft (default: the advertised mesh host with the raft listener's port)")
}

func (f *stateFlags) validate() error {
	if err := checkPort("raft-port", f.raftPort, true); err != nil {
		return err
	}
	if f.raftMultiplier < 0 || f.raftMultiplier > consensus.MaxRaftMultiplier {
		return valuef("raft-multiplier", "%d is outside 0-%d", f.raftMultiplier, consensus.MaxRaftMultiplier)
	}
	if f.raftAdvertise != "" {
		host, port, err := net.SplitHostPort(f.raftAdvertise)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return valuef("raft-advertise", "%q is not host:port", f.raftAdvertise)
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			return valuef("raft-advertise", "%q is an unspecified address; other gateways cannot dial it", f.raftAdvertise)
		}
	}
	return nil
}

// consensus is raft's part of the server's Config: raft listens on host (--host, or loopback
// for a standalone gateway) at --raft-port.
func (f *stateFlags) consensus(host string) consensus.Config {
	return consensus.Config{
		BindAddr:       net.JoinHostPort(host, strconv.Itoa(f.raftPort)),
		AdvertiseAddr:  f.raftAdvertise,
		Ephemeral:      f.ephemeral,
		RaftMultiplier: f.raftMultiplier,
	}
}
