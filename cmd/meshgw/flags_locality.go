package main

import (
	"math"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/gateway/locality"
)

// localityFlags are locality routing's flags (DESIGN.md section 17, gateway/locality).
type localityFlags struct {
	mode   string
	factor float64
}

func (f *localityFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.mode, "locality-routing", locality.Auto, "auto (with --region: a request goes to the workers of this gateway's region while enough of them are routable, and spills to other regions in proportion below that) or off (every region's workers alike)")
	fs.Float64Var(&f.factor, "locality-overprovisioning-factor", locality.DefaultFactor, "locality routing: this gateway's region keeps every request while at least 1/factor of its workers for the model and capabilities are routable; below that it keeps factor × routable/total of them and the rest go to other regions, as Envoy's priority levels spill (at least 1)")
}

func (f *localityFlags) validate() error {
	if err := checkOneOf("locality-routing", f.mode, locality.Modes()); err != nil {
		return err
	}
	if !(f.factor >= 1) || math.IsInf(f.factor, 1) {
		return valuef("locality-overprovisioning-factor", "%v is not a finite number of at least 1", f.factor)
	}
	return nil
}

// config is the gateway's locality.Config.
func (f *localityFlags) config() locality.Config {
	return locality.Config{Mode: f.mode, Factor: f.factor}
}
