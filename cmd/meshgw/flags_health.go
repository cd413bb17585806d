package main

import (
	"math"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/health"
)

// healthFlags are the health checks of the workers this gateway owns (DESIGN.md section 6).
type healthFlags struct {
	cfg    health.Config
	remove *linkedSet // --remove-unhealthy-workers and its alias
}

func (f *healthFlags) register(fs *pflag.FlagSet) {
	d := health.DefaultConfig()
	fs.IntVar(&f.cfg.CheckIntervalSecs, health.FlagCheckInterval, d.CheckIntervalSecs, "seconds between two health probes of a worker")
	fs.IntVar(&f.cfg.FailureThreshold, health.FlagFailureThreshold, d.FailureThreshold, "consecutive failed probes that take a ready worker out of routing (not_ready)")
	fs.IntVar(&f.cfg.SuccessThreshold, health.FlagSuccessThreshold, d.SuccessThreshold, "consecutive passing probes that make a worker ready")
	fs.IntVar(&f.cfg.TimeoutSecs, health.FlagCheckTimeout, d.TimeoutSecs, "seconds a health probe may take")
	fs.StringVar(&f.cfg.Endpoint, health.FlagCheckEndpoint, d.Endpoint, "path an HTTP health probe GETs")
	fs.BoolVar(&f.cfg.DisableHealthCheck, health.FlagDisableCheck, false, "do not probe workers: they count ready (ZMQ workers keep their local check)")
	f.remove = linkedBools(fs, &f.cfg.RemoveUnhealthyWorkers,
		[2]string{health.FlagRemoveUnhealthy, "remove a failed worker at once instead of probing it until it returns"},
		[2]string{health.FlagRemoveUnhealthyAlias, "alias of --" + health.FlagRemoveUnhealthy + " (SMG's name; =false turns it off)"})
	fs.IntVar(&f.cfg.DrainSettleSecs, health.FlagDrainSettle, d.DrainSettleSecs, "seconds a drained ready worker keeps serving its requests before removal (0 = at once)")
}

func (f *healthFlags) validate() error {
	for _, e := range []error{
		f.remove.check(),
		checkSecs(health.FlagCheckInterval, f.cfg.CheckIntervalSecs, 1),
		checkMin(health.FlagFailureThreshold, f.cfg.FailureThreshold, 1),
		checkMin(health.FlagSuccessThreshold, f.cfg.SuccessThreshold, 1),
		checkSecs(health.FlagCheckTimeout, f.cfg.TimeoutSecs, 1),
		checkSecs(health.FlagDrainSettle, f.cfg.DrainSettleSecs, 0),
	} {
		if e != nil {
			return e
		}
	}
	if err := f.cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// maxSecs bounds the flags given in seconds, so that none overflows a time.Duration.
const maxSecs = math.MaxInt32

// checkSecs checks a flag given in seconds: at least lo, at most maxSecs.
func checkSecs(name string, v, lo int) error {
	if v > maxSecs {
		return valuef(name, "%d is above the maximum %d", v, maxSecs)
	}
	return checkMin(name, v, lo)
}

// linkedBools registers bool flags (name, usage) that set one variable and count as one: given
// on the command line under any name, the setting reads none of their variables, so a flag
// always wins over a variable (parseFlags). Two of them given opposite values, as flags or
// through their variables, contradict each other: validate refuses that (exit 2) rather than
// let one win without a word.
func linkedBools(fs *pflag.FlagSet, v *bool, flags ...[2]string) *linkedSet {
	set := &linkedSet{v: v, given: map[string]bool{}}
	for _, nu := range flags {
		f := fs.VarPF(&linkedBool{set: set, name: nu[0]}, nu[0], "", nu[1])
		f.NoOptDefVal = "true"
		set.flags = append(set.flags, f)
	}
	return set
}

// linkedSet is the state a linkedBools set shares: the variable, its flags, and the value each
// flag was given.
type linkedSet struct {
	v     *bool
	flags []*pflag.Flag
	given map[string]bool // flag name → value, for the flags given
	order []string        // the flags given, in order
}

// anyGiven reports whether any flag of the set was given, on the command line or through its
// variable.
func (s *linkedSet) anyGiven() bool { return len(s.order) > 0 }

// check reports two flags of the set given opposite values, each as it was given: the flag or
// its variable.
func (s *linkedSet) check() error {
	for _, a := range s.order {
		for _, b := range s.order {
			if s.given[a] && !s.given[b] {
				return usagef("%s=true and %s=false contradict each other (one is an alias of the other); give one of them",
					givenAs(flagNamed(s.flags, a)), givenAs(flagNamed(s.flags, b)))
			}
		}
	}
	return nil
}

// linkedBool is one flag of a linkedBools set.
type linkedBool struct {
	set  *linkedSet
	name string
}

func (b *linkedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.set.v = v
	if _, ok := b.set.given[b.name]; !ok {
		b.set.order = append(b.set.order, b.name)
	}
	b.set.given[b.name] = v
	for _, f := range b.set.flags {
		f.Changed = true
	}
	return nil
}

func (b *linkedBool) String() string {
	if b.set == nil { // pflag's zero value, for its help text
		return "false"
	}
	return strconv.FormatBool(*b.set.v)
}

func (b *linkedBool) Type() string { return "bool" }

func (b *linkedBool) namesGiven() []string { return b.set.order }
