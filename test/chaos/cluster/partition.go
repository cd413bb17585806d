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

// rule drops, in one namespace, what some sources send: one iptables command for all of them
// (iptables adds a rule per source, and deletes them alike), so that a cut costs one command
// per receiving gateway. Each command runs through nsenter, lighter than ip netns exec (which
// also remounts /sys): on the loaded 2-core machine a partition of 5 gateways took 1 to 3 s
// to make and heal with a command per pair through ip netns exec, all of it counted in the
// fault's time.
type rule struct {
	ns    string
	froms []string
	port  int // 0: every packet; else TCP to this destination port only
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
	var hosts []string
	for _, a := range from {
		hosts = append(hosts, a.Host)
	}
	rules := make([]rule, 0, len(to))
	for _, b := range to {
		rules = append(rules, rule{ns: b.NS, froms: hosts, port: port})
	}
	done, err := each(rules, "-A")
	cut.rules = append(cut.rules, done...)
	return cut, err
}

// each runs op (-A or -D) for every rule, side by side, and returns those it applied.
func each(rules []rule, op string) ([]rule, error) {
	errs := make([]error, len(rules))
	var wg sync.WaitGroup
	for i, r := range rules {
		wg.Go(func() { errs[i] = r.iptables(op) })
	}
	wg.Wait()
	var done []rule
	var msgs []string
	for i, r := range rules {
		if errs[i] != nil {
			msgs = append(msgs, errs[i].Error())
			continue
		}
		done = append(done, r)
	}
	if len(msgs) > 0 {
		return done, fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return done, nil
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
	_, err := each(cut.rules, "-D")
	cut.rules = nil
	if err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	return nil
}

func (r rule) iptables(op string) error {
	args := []string{"--net=/var/run/netns/" + r.ns, "iptables", "-w", op, "INPUT", "-s", strings.Join(r.froms, ",")}
	if r.port != 0 {
		args = append(args, "-p", "tcp", "--dport", strconv.Itoa(r.port))
	}
	args = append(args, "-j", "DROP")
	out, err := exec.Command("nsenter", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nsenter %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
