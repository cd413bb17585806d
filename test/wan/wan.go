// Package wan makes a simulated wide-area network for tests and the chaos suite: one network
// namespace per region, whose hosts talk to each other at loopback speed, and links between
// regions that hold every packet for a one-way delay.
//
// This kernel has no netem qdisc (nor fq, which eBPF's departure-time delays need), so the
// delay is made in user space: each region's namespace routes 10.78.0.0/16 to a TUN device,
// and a relay in this process reads each packet from the sender region's device, holds it for
// the link's delay, and writes it to the receiving region's device. It carries TCP and UDP
// alike (raft, gRPC, HTTP and memberlist's gossip), keeps each direction's packets in order,
// and can cut a region off (Cut) and join it again (Heal) with no firewall rule.
//
// Addresses: host h (from 0) of region r (from 0) is 10.78.(r+1).(h+1). A test's own clients
// and servers join a region with DialContext and Listen; processes run in it with
// `ip netns exec NS`, where NS is Namespace(r).
package wan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// The network all regions share, 10.78.0.0/16.
const (
	netA, netB = 10, 78
	maxRegions = 16
	maxHosts   = 200
)

// Config describes a WAN.
type Config struct {
	// Prefix starts every namespace's name; namespaces of that name left by a crashed run are
	// removed first. Keep it short: a namespace's name is at most 255 bytes, an interface's
	// 15, and it appears in `ip netns` listings.
	Prefix string
	// Regions names the regions, in order: region r is Regions[r].
	Regions []string
	// Hosts is the number of addresses in each region (default 8, at most 200).
	Hosts int
	// Delay is the one-way delay of every link between two regions (SetDelay changes one).
	Delay time.Duration
}

// Net is a running WAN. Close removes it.
type Net struct {
	cfg   Config
	relay *relay
}

// New makes the namespaces, their TUN devices and addresses, and starts the relay. On error it
// removes what it made.
func New(cfg Config) (*Net, error) {
	if ok, why := Usable(); !ok {
		return nil, errors.New("wan: " + why)
	}
	if cfg.Hosts == 0 {
		cfg.Hosts = 8
	}
	switch {
	case cfg.Prefix == "":
		return nil, errors.New("wan: Config.Prefix is empty")
	case len(cfg.Regions) < 2 || len(cfg.Regions) > maxRegions:
		return nil, fmt.Errorf("wan: %d regions; want 2 to %d", len(cfg.Regions), maxRegions)
	case cfg.Hosts < 1 || cfg.Hosts > maxHosts:
		return nil, fmt.Errorf("wan: %d hosts per region; want 1 to %d", cfg.Hosts, maxHosts)
	case cfg.Delay < 0:
		return nil, fmt.Errorf("wan: negative delay %s", cfg.Delay)
	}
	n := &Net{cfg: cfg}
	n.removeNamespaces()
	tuns := make([]*os.File, 0, len(cfg.Regions))
	fail := func(err error) (*Net, error) {
		for _, t := range tuns {
			_ = t.Close()
		}
		n.removeNamespaces()
		return nil, fmt.Errorf("wan: %w", err)
	}
	for r := range cfg.Regions {
		ns := n.Namespace(r)
		if err := ip("netns", "add", ns); err != nil {
			return fail(err)
		}
		var tun *os.File
		err := inNamespace(ns, func() (err error) { tun, err = openTUN(tunName); return err })
		if err != nil {
			return fail(err)
		}
		tuns = append(tuns, tun)
		if err := n.address(r); err != nil {
			return fail(err)
		}
	}
	n.relay = newRelay(tuns, cfg.Delay)
	n.relay.start()
	return n, nil
}

// address brings up region r's loopback and TUN device, gives the device the region's
// addresses, and routes the whole network through it.
func (n *Net) address(r int) error {
	ns := n.Namespace(r)
	steps := [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "set", tunName, "up"},
	}
	for h := range n.cfg.Hosts {
		steps = append(steps, []string{"-n", ns, "addr", "add", n.Addr(r, h) + "/32", "dev", tunName})
	}
	steps = append(steps, []string{"-n", ns, "route", "add", fmt.Sprintf("%d.%d.0.0/16", netA, netB), "dev", tunName})
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// Namespace is region r's network namespace.
func (n *Net) Namespace(r int) string { return n.cfg.Prefix + "-" + n.cfg.Regions[r] }

// Region is the index of the region named name, or -1.
func (n *Net) Region(name string) int {
	for r, s := range n.cfg.Regions {
		if s == name {
			return r
		}
	}
	return -1
}

// Addr is the address of host h (from 0) of region r (from 0).
func (n *Net) Addr(r, h int) string {
	return fmt.Sprintf("%d.%d.%d.%d", netA, netB, r+1, h+1)
}

// DialContext dials from region r, as a client there would: net/http's Transport.DialContext
// takes it.
func (n *Net) DialContext(r int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	ns := n.Namespace(r)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNamespace(ns, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// DialByAddress dials an address of the WAN (10.78.R.H) from inside its own region, as a
// client of that region would (no link crossed), and any other address from this process's
// network. net/http's Transport.DialContext takes it: one client then reaches every region's
// hosts, each as a local client.
func (n *Net) DialByAddress(ctx context.Context, network, addr string) (net.Conn, error) {
	if r, ok := n.regionOfAddr(addr); ok {
		return n.DialContext(r)(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// regionOfAddr is the region of a host:port of the WAN's network.
func (n *Net) regionOfAddr(addr string) (int, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, false
	}
	ip := net.ParseIP(host).To4()
	if ip == nil || ip[0] != netA || ip[1] != netB {
		return 0, false
	}
	r := int(ip[2]) - 1
	return r, r >= 0 && r < len(n.cfg.Regions)
}

// Listen listens on host h of region r at port (0 picks one), for a server of the test's own
// process (an engine, say) to live in that region.
func (n *Net) Listen(r, h, port int) (net.Listener, error) {
	var ln net.Listener
	err := inNamespace(n.Namespace(r), func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(n.Addr(r, h), strconv.Itoa(port)))
		return err
	})
	return ln, err
}

// SetDelay sets the one-way delay from region a to region b (the other direction keeps its own).
func (n *Net) SetDelay(a, b int, d time.Duration) { n.relay.delays[a][b].Store(int64(d)) }

// Cut drops every packet into or out of region r from now on, as when its links fail; its
// hosts still reach each other.
func (n *Net) Cut(r int) { n.relay.cut[r].Store(true) }

// Heal carries region r's packets again.
func (n *Net) Heal(r int) { n.relay.cut[r].Store(false) }

// Stats counts the packets the relay delivered to another region and those it dropped (a cut
// region, a full link, a packet for no region).
func (n *Net) Stats() (forwarded, dropped uint64) {
	return n.relay.forwarded.Load(), n.relay.dropped.Load()
}

// Close stops the relay, kills whatever still runs in the namespaces and removes them. It is
// safe to call twice.
func (n *Net) Close() {
	if n.relay != nil {
		n.relay.stop()
		n.relay = nil
	}
	n.removeNamespaces()
}

func (n *Net) removeNamespaces() {
	for r := range n.cfg.Regions {
		removeNamespace(n.Namespace(r))
	}
}
