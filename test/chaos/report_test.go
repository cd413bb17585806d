package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// The summary prints one line per count, kinds in order; the optional counts only when set.
func TestReportPrintsCounts(t *testing.T) {
	r := Report{Seed: 1, Faults: map[string]int{"pause": 3, "kill": 2}, FaultSeconds: map[string]float64{"kill": 4.4},
		LostByCause: map[string]int{"engine_hang": 1, "gateway_fault": 0}}
	var b strings.Builder
	r.Print(&b)
	out := b.String()
	for _, want := range []string{"\nfaults: kill=2 pause=3\n", "\nfault seconds: kill=4\n", "\nlost by cause: engine_hang=1 gateway_fault=0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	for _, absent := range []string{"refused:", "waited for room:", "of which"} {
		if strings.Contains(out, absent) {
			t.Errorf("%q printed with nothing to count:\n%s", absent, out)
		}
	}
}

// owner_within_bound's bound is wanOwnerBound over a WAN, for a run and for a saved history of
// one (--check), and 20 s otherwise.
func TestOwnerBoundOverAWAN(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		h    history.History
		want string
	}{
		{"plain", Config{}, history.History{}, "bound 20s"},
		{"a run over regions", Config{Regions: 3}, history.History{}, "bound 45s"},
		{"a saved history with region cuts", Config{}, history.History{Cuts: []history.RegionCut{{Region: "eu"}}}, "bound 45s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.LinearizableTimeout = time.Second
			got := Check(c.h, nil, c.cfg)["owner_within_bound"]
			if !strings.Contains(got.Detail, c.want) {
				t.Errorf("owner_within_bound: %q; want %q", got.Detail, c.want)
			}
		})
	}
}
