package cluster

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Net cuts traffic between gateways with iptables DROP rules in the INPUT chain of the
// receiving gateway's namespace. It is only usable in an isolated run. Several cuts may hold
// at once (faults on separate lanes); each heals its own rules.
type Net struct {
	mu   sync.Mutex
	cuts map[*Cut]bool
}

// Cut is the rules of one fault, healed together.
type Cut struct{ rules []rule }

type rule struct {
	ns, from string
	port     int // 0: every packet; else TCP to this destination port only
}

// Drop drops every packet from each node of from at each node of to (one way), adding the
// rules to cut (a new Cut when nil), which it returns.
func (nt *Net) Drop(cut *Cut, from, to []*Node) (*Cut, error) {
	return nt.add(cut, from, to, 0)
}

// DropPort is Drop for TCP packets to port only (a raft-only cut: the mesh, gRPC and the data
// plane still pass).
func (nt *Net) DropPort(cut *Cut, from, to []*Node, port int) (*Cut, error) {
	return nt.add(cut, from, to, port)
}

func (nt *Net) add(cut *Cut, from, to []*Node, port int) (*Cut, error) {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if cut == nil {
		cut = &Cut{}
	}
	if nt.cuts == nil {
		nt.cuts = map[*Cut]bool{}
	}
	nt.cuts[cut] = true
	for _, a := range from {
		for _, b := range to {
			r := rule{ns: b.NS, from: a.Host, port: port}
			if err := r.iptables("-A"); err != nil {
				return cut, err
			}
			cut.rules = append(cut.rules, r)
		}
	}
	return cut, nil
}

// Heal removes the rules of cut (nil heals nothing).
func (nt *Net) Heal(cut *Cut) error {
	if cut == nil {
		return nil
	}
	nt.mu.Lock()
	defer nt.mu.Unlock()
	delete(nt.cuts, cut)
	return cut.heal()
}

// HealAll removes every rule of every cut still held.
func (nt *Net) HealAll() error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	var errs []string
	for cut := range nt.cuts {
		if err := cut.heal(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	nt.cuts = nil
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (cut *Cut) heal() error {
	var errs []string
	for _, r := range cut.rules {
		if err := r.iptables("-D"); err != nil {
			errs = append(errs, err.Error())
		}
	}
	cut.rules = nil
	if len(errs) > 0 {
		return fmt.Errorf("heal: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (r rule) iptables(op string) error {
	args := []string{"netns", "exec", r.ns, "iptables", "-w", op, "INPUT", "-s", r.from}
	if r.port != 0 {
		args = append(args, "-p", "tcp", "--dport", strconv.Itoa(r.port))
	}
	args = append(args, "-j", "DROP")
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
