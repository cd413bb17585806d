package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Topology is the set of network namespaces of an isolated run: a hub holding a bridge, the
// harness and the engines, and one namespace per gateway joined to the bridge by a veth pair.
//
// Why not every node on its own 127.0.0.x in one namespace: a connection to a local address
// takes 127.0.0.1 as its source whatever the destination, so iptables cannot tell one
// gateway's outgoing raft, gRPC and memberlist TCP connections from another's. A namespace per
// gateway gives each one address that every packet it sends carries.
type Topology struct {
	Prefix string // namespace names start with it
	Nodes  int
}

// Subnet addresses: the hub's bridge is .1, gateway i (from 0) is .11+i, engine j is .101+j.
const subnet = "10.77.0."

// HubNS is the namespace the harness and the engines run in.
func (t Topology) HubNS() string { return t.Prefix + "-hub" }

// NodeNS is the namespace of gateway i (from 0).
func (t Topology) NodeNS(i int) string { return fmt.Sprintf("%s-n%d", t.Prefix, i+1) }

// NodeAddr is gateway i's address.
func NodeAddr(i int) string { return fmt.Sprintf("%s%d", subnet, 11+i) }

// EngineAddr is engine j's address.
func EngineAddr(j int) string { return fmt.Sprintf("%s%d", subnet, 101+j) }

// Create makes the namespaces, the bridge and the veth pairs; on error it removes what it made.
func (t Topology) Create(engines int) error {
	hub := t.HubNS()
	steps := [][]string{
		{"netns", "add", hub},
		{"-n", hub, "link", "set", "lo", "up"},
		{"-n", hub, "link", "add", "br0", "type", "bridge"},
		{"-n", hub, "link", "set", "br0", "up"},
		{"-n", hub, "addr", "add", subnet + "1/24", "dev", "br0"},
	}
	for j := range engines {
		steps = append(steps, []string{"-n", hub, "addr", "add", EngineAddr(j) + "/24", "dev", "br0"})
	}
	for i := range t.Nodes {
		ns, veth := t.NodeNS(i), fmt.Sprintf("v%d", i+1)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", hub, "link", "set", veth, "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", NodeAddr(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			t.Delete()
			return err
		}
	}
	return nil
}

// Delete kills whatever still runs in the namespaces (only the run's own processes live there)
// and removes them; it is safe to call twice.
func (t Topology) Delete() {
	names := []string{t.HubNS()}
	for i := range t.Nodes {
		names = append(names, t.NodeNS(i))
	}
	for _, ns := range names {
		if _, err := os.Stat("/var/run/netns/" + ns); err != nil {
			continue
		}
		_ = exec.Command("ip", "netns", "pids", ns).Run()
		if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, pid := range strings.Fields(string(out)) {
				_ = exec.Command("kill", "-9", pid).Run()
			}
		}
		_ = ip("netns", "del", ns)
	}
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Usable reports whether an isolated run can work here (root, ip, iptables and nsenter), and if not why.
func Usable() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not root"
	}
	for _, tool := range []string{"ip", "iptables", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, tool + " not found"
		}
	}
	return true, ""
}
