package cluster

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// Net cuts traffic between gateways with iptables DROP rules in the INPUT chain of the
// receiving gateway's namespace. It is only usable in an isolated run.
type Net struct {
	mu    sync.Mutex
	rules []rule
}

type rule struct{ ns, from string }

// Drop drops every packet from each node of from at each node of to (one way).
func (nt *Net) Drop(from, to []*Node) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	for _, a := range from {
		for _, b := range to {
			r := rule{ns: b.NS, from: a.Host}
			if err := r.iptables("-A"); err != nil {
				return err
			}
			nt.rules = append(nt.rules, r)
		}
	}
	return nil
}

// Heal removes every rule Drop added.
func (nt *Net) Heal() error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	var errs []string
	for _, r := range nt.rules {
		if err := r.iptables("-D"); err != nil {
			errs = append(errs, err.Error())
		}
	}
	nt.rules = nil
	if len(errs) > 0 {
		return fmt.Errorf("heal: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (r rule) iptables(op string) error {
	args := []string{"netns", "exec", r.ns, "iptables", "-w", op, "INPUT", "-s", r.from, "-j", "DROP"}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
