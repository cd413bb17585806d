package mesh

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// NodeIDTakenError is Join's error when a live process at another address already uses this
// node's id. Its peers refuse every message of this node for as long as that one runs, logging
// "Conflicting address" each time, so this node cannot take part: Shutdown it, without Leave,
// whose message would speak for that node's name.
//
// The process that answered may be this node itself: a node bound to every interface of a host
// that still has the address its previous run advertised answers there too (ReachesBind). The
// ping cannot tell the two apart; the caller, which knows where it bound, can.
type NodeIDTakenError struct {
	NodeID string
	// Addr is the mesh address (host:port) of the process that holds the id.
	Addr string
	// Started is when that process started (its metadata's Started), so that of two processes
	// with one id the later one can stop. Zero when unknown (a build that does not publish it).
	Started time.Time
}

func (e *NodeIDTakenError) Error() string {
	return fmt.Sprintf("mesh: node id %s is already used by a live peer at %s", e.NodeID, e.Addr)
}

// ReachesBind reports whether a datagram to Addr reaches a socket bound to bind (ip:port, as
// Listener.Addr gives it): one of bind's port, at bind's IP, or at any address of this host
// (a loopback one, or an interface's) when bind's IP is unspecified (0.0.0.0 or ::, the
// default). A node bound there answered Join's ping itself: the id is not another's.
func (e *NodeIDTakenError) ReachesBind(bind string) bool { return reaches(bind, e.Addr, hostHas) }

// reaches is ReachesBind, with local telling whether an IP is an address of this host.
func reaches(bind, addr string, local func(netip.Addr) bool) bool {
	b, err := netip.ParseAddrPort(bind)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddrPort(addr)
	if err != nil || a.Port() != b.Port() {
		return false
	}
	ip := a.Addr().Unmap()
	if b.Addr().IsUnspecified() { // Go binds either as a dual-stack socket: IPv4 and IPv6
		return local(ip)
	}
	return ip == b.Addr().Unmap()
}

// hostHas reports whether ip is an address of this host: a loopback one (on Linux, all of
// 127.0.0.0/8 and ::1), or one of its interfaces'.
func hostHas(ip netip.Addr) bool {
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok && x.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// The process behind a conflicting address gets at least pingTries pings, for at least
// pingWait in all, to answer one: a lost datagram, a loaded host, or a process stalled for a
// second or two (a pause, a starved CPU; it answers the pings waiting in its socket once it
// runs again) must not make a live duplicate pass for a dead one. Each ping waits memberlist's
// ProbeTimeout (200 ms with the local profile, 500 ms with lan, 3 s with wan), so the wait is
// 3 s with local and lan and 12 s with wan: at least 3 ProbeTimeouts and a fourth.
//
// Only a join that finds nothing answering there waits it all: a node restarted on a new
// address before its peers noticed that its previous run crashed. Its peers list it at the new
// address only once they declare the old one dead, a probe interval and a suspicion timeout
// after the crash (over 3 s with local, over 4 s with lan, over 30 s with wan), so the wait
// adds little or nothing to that. A ping that fails at once (no route to the address) is
// followed by the next one pingGap later, not at once.
const (
	pingTries = 4
	pingWait  = 3 * time.Second
	pingGap   = 100 * time.Millisecond
)

// NotifyConflict is memberlist's report that an alive message names a node it lists at
// another address. When the name is this node's, a peer lists this node's id at another
// address: Join then checks whether a live process is there (takenBy). Conflicts between two
// other nodes are memberlist's to log. memberlist holds its node lock here: the claim is only
// recorded.
func (d delegate) NotifyConflict(existing, other *memberlist.Node) {
	if existing.Name != d.m.name || other == nil {
		return
	}
	claim := *other
	claim.Addr = slices.Clone(other.Addr)
	claim.Meta = slices.Clone(other.Meta)
	d.m.claim.Store(&claim)
	d.m.claims.Add(1)
}

// takenBy checks the last claim on this node's id from another address: a live process there
// answers a ping addressed to this node's name, and then the id is taken (a *NodeIDTakenError,
// with that process's start time from the claim's metadata). A process that does not answer
// is this node's own previous run (a node restarted on a new address, whose peers have not
// declared its old one dead yet): they give the name to this address once they do
// (deadNodeReclaimTime), and takenBy returns nil.
func (m *Mesh) takenBy() error {
	claim := m.claim.Load()
	if claim == nil {
		return nil
	}
	addr := &net.UDPAddr{IP: claim.Addr, Port: int(claim.Port)}
	start := m.now()
	for try := 1; ; try++ {
		sent := m.now()
		if _, err := m.ml.Ping(m.name, addr); err == nil {
			meta, _ := DecodeMeta(claim.Meta) // undecodable: Started unknown
			return &NodeIDTakenError{NodeID: m.name, Addr: claim.Address(), Started: meta.Started}
		}
		if try >= pingTries && m.now().Sub(start) >= pingWait {
			break
		}
		if d := pingGap - m.now().Sub(sent); d > 0 {
			time.Sleep(d)
		}
	}
	m.log.Warn("a peer lists this node's id at another address, where nothing answers: taken for this node's previous run, "+
		"which peers give up once they declare it dead", "node", m.name, "other", claim.Address(), "waited", m.now().Sub(start).Round(time.Millisecond))
	return nil
}
