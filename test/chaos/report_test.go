package chaos

import (
	"strings"
	"testing"
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
