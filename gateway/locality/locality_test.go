package locality

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// w is a worker as a test writes it: "eu" routable, "eu-" not, "" region-less routable.
type w struct {
	region   string
	routable bool
}

// ws parses "eu eu eu- us" into workers; "-" alone is a region-less worker that is not routable,
// "." a region-less routable one.
func ws(s string) []w {
	var out []w
	for _, f := range strings.Fields(s) {
		switch f {
		case ".":
			out = append(out, w{"", true})
		case "-":
			out = append(out, w{"", false})
		default:
			r, down := strings.CutSuffix(f, "-")
			out = append(out, w{r, !down})
		}
	}
	return out
}

// choose runs a request's steps: the tally, the choice by draw, and the routable workers of the
// chosen region, as their indexes in workers.
func choose(t *Tally[string], cfg Config, local string, workers []w, draw float64) (Choice[string], []int) {
	idx := make([]int, 0, len(workers))
	regs := make([]int, 0, len(workers))
	if !cfg.On(local) {
		for i, x := range workers {
			if x.routable {
				idx = append(idx, i)
			}
		}
		return Choice[string]{}, idx
	}
	t.Reset(local, "")
	for i, x := range workers {
		r := t.Add(x.region, x.routable)
		if x.routable {
			idx, regs = append(idx, i), append(regs, r)
		}
	}
	c := t.Choose(cfg.FactorOrDefault(), draw)
	for k, i := range idx {
		if c.Has(workers[i].region) != (regs[k] == c.Index) {
			panic("Choice.Has and Choice.Index disagree")
		}
	}
	return c, Filter(idx, regs, c)
}

// TestShares: the local share and every region's share, by Envoy's arithmetic.
func TestShares(t *testing.T) {
	tests := []struct {
		name    string
		local   string
		workers string
		factor  float64
		want    map[string]float64 // "" is the local region
	}{
		{"all local healthy", "eu", "eu eu us us", 1.4, map[string]float64{"": 1, "us": 0}},
		{"one of two local broken", "eu", "eu eu- us us", 1.4, map[string]float64{"": 0.7, "us": 0.3}},
		{"all local broken", "eu", "eu- eu- us us", 1.4, map[string]float64{"": 0, "us": 1}},
		{"no local worker for the model", "eu", "us us", 1.4, map[string]float64{"": 0, "us": 1}},
		{"served only elsewhere, in two regions", "eu", "us ap", 1.4, map[string]float64{"": 0, "us": 0.5, "ap": 0.5}},
		{"exactly 1/1.4 routable", "eu", "eu eu eu eu eu eu- eu- us", 1.4, map[string]float64{"": 1, "us": 0}},
		{"just below 1/1.4", "eu", "eu eu eu eu eu- eu- eu- us", 1.4, map[string]float64{"": 0.8, "us": 0.2}},
		{"factor 1: any broken worker spills its share", "eu", "eu eu eu eu- us", 1, map[string]float64{"": 0.75, "us": 0.25}},
		{"factor 2 keeps half", "eu", "eu eu- us", 2, map[string]float64{"": 1, "us": 0}},
		{"region-less workers are local", "eu", ". . eu- us", 1.4, map[string]float64{"": 0.9333333333333333, "us": 0.06666666666666667}},
		{"region-less broken worker counts against local", "eu", "eu - us", 1.4, map[string]float64{"": 0.7, "us": 0.3}},
		{"only region-less workers", "eu", ". .", 1.4, map[string]float64{"": 1}},
		{"remote share by routable workers", "eu", "eu- us us us us ap ap- ap- ap-", 1.4, map[string]float64{"": 0, "us": 0.8, "ap": 0.2}},
		{"several remote regions, local half", "eu", "eu eu- us us ap", 1.4, map[string]float64{"": 0.7, "us": 0.2, "ap": 0.1}},
		// normalization: local 1/4 (0.35), remote 1/4 (0.35): together 0.7, so 50/50 (Envoy's table).
		{"both levels weak: normalized", "eu", "eu eu- eu- eu- us us- us- us-", 1.4, map[string]float64{"": 0.5, "us": 0.5}},
		{"remote has nothing routable: local keeps all", "eu", "eu eu- eu- us-", 1.4, map[string]float64{"": 1, "us": 0}},
		{"nothing routable anywhere", "eu", "eu- us-", 1.4, map[string]float64{"": 1, "us": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tl Tally[string]
			tl.Reset(tt.local, "")
			for _, x := range ws(tt.workers) {
				tl.Add(x.region, x.routable)
			}
			got := map[string]float64{}
			for r := range tt.want {
				got[r] = tl.Share(r, tt.factor)
			}
			if d := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-12 })); d != "" {
				t.Errorf("shares (-want +got):\n%s", d)
			}
			sum := 0.0
			for _, r := range append([]string{""}, regions(ws(tt.workers), tt.local)...) {
				sum += tl.Share(r, tt.factor)
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Errorf("shares add up to %v", sum)
			}
		})
	}
}

// regions lists the remote regions of workers, once each.
func regions(workers []w, local string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range workers {
		if x.region != "" && x.region != local && !seen[x.region] {
			seen[x.region] = true
			out = append(out, x.region)
		}
	}
	return out
}

// TestChoose: the subset a draw gives, at the edges of each stretch.
func TestChoose(t *testing.T) {
	on := Config{Mode: Auto}
	tests := []struct {
		name    string
		cfg     Config
		local   string
		workers string
		draw    float64
		want    []int // indexes of the workers the policy runs on
	}{
		{"all local healthy: local", on, "eu", "eu eu us us", 0.999, []int{0, 1}},
		{"one local broken, draw in local share", on, "eu", "eu eu- us us", 0.699, []int{0}},
		{"one local broken, draw past local share", on, "eu", "eu eu- us us", 0.7, []int{2, 3}},
		{"all local broken", on, "eu", "eu- eu- us us", 0, []int{2, 3}},
		{"all local broken, two remote: first stretch", on, "eu", "eu- us ap ap", 0.333, []int{1}},
		{"all local broken, two remote: second stretch", on, "eu", "eu- us ap ap", 0.334, []int{2, 3}},
		{"all local broken, two remote: the very end", on, "eu", "eu- us ap ap", math.Nextafter(1, 0), []int{2, 3}},
		{"no local worker for the model", on, "eu", "us us-", 0, []int{0}},
		{"a remote region with none routable is skipped", on, "eu", "eu- us- ap", 0, []int{2}},
		{"region-less workers go with local", on, "eu", "eu . us", 0.5, []int{0, 1}},
		{"region-less workers are not remote", on, "eu", "eu- . us", 0.99, []int{2}},
		{"at 1/1.4 exactly: all local", on, "eu", "eu eu eu eu eu eu- eu- us", math.Nextafter(1, 0), []int{0, 1, 2, 3, 4}},
		{"factor 1.0", Config{Mode: Auto, Factor: 1}, "eu", "eu eu eu eu- us", 0.75, []int{4}},
		{"factor 1.0, local", Config{Mode: Auto, Factor: 1}, "eu", "eu eu eu eu- us", 0.7499, []int{0, 1, 2}},
		{"off: every routable worker", Config{Mode: Off}, "eu", "eu eu- us us", 0.9, []int{0, 2, 3}},
		{"no gateway region: every routable worker", on, "", "eu eu- us us", 0.9, []int{0, 2, 3}},
		{"nothing routable", on, "eu", "eu- us-", 0.5, []int{}},
	}
	var tl Tally[string] // shared, as a pooled request's is
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got := choose(&tl, tt.cfg, tt.local, ws(tt.workers), tt.draw)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("subset (-want +got):\n%s", d)
			}
		})
	}
}

// TestChooseFollowsShares: over evenly spread draws, each region gets its share.
func TestChooseFollowsShares(t *testing.T) {
	var tl Tally[string]
	tl.Reset("eu", "")
	for _, x := range ws("eu eu- eu- us us ap") {
		tl.Add(x.region, x.routable)
	}
	const n = 10000
	got := map[string]int{}
	for i := range n {
		got[tl.Choose(DefaultFactor, (float64(i)+0.5)/n).Region]++
	}
	// local 1.4/3 ≈ 0.4667; the rest 2:1 to us and ap.
	want := map[string]int{"eu": 4667, "us": 3555, "ap": 1778}
	for r, c := range want {
		if math.Abs(float64(got[r]-c)) > 2 {
			t.Errorf("%s: %d of %d, want about %d", r, got[r], n, c)
		}
	}
}

// TestUnroute: a retry whose failed worker is the last routable one of the local region goes
// elsewhere once it is counted out.
func TestUnroute(t *testing.T) {
	var tl Tally[string]
	tl.Reset("eu", "")
	tl.Add("eu", true)
	tl.Add("us", true)
	if c := tl.Choose(DefaultFactor, 0.5); !c.Local {
		t.Fatalf("before: %+v, want local", c)
	}
	tl.Unroute("eu")
	if c := tl.Choose(DefaultFactor, 0.5); c.Local || c.Region != "us" {
		t.Fatalf("after: %+v, want us", c)
	}
	tl.Unroute("eu") // nothing left to unroute
	if got := tl.Of("eu"); got != (Count{Total: 1}) {
		t.Fatalf("count %+v", got)
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		cfg     Config
		wantErr bool
	}{
		{Config{}, false},
		{Config{Mode: Auto, Factor: 1}, false},
		{Config{Mode: Off, Factor: 100}, false},
		{Config{Mode: "on"}, true},
		{Config{Factor: 0.99}, true},
		{Config{Factor: -1}, true},
		{Config{Factor: math.Inf(1)}, true},
		{Config{Factor: math.NaN()}, true},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("%+v: error %v, want error %v", tt.cfg, err, tt.wantErr)
		}
	}
	if (Config{}).On("") || !(Config{}).On("eu") || (Config{Mode: Off}).On("eu") {
		t.Error("On: auto is on with a region only, off never")
	}
}

func TestChooseDoesNotAllocate(t *testing.T) {
	var tl Tally[string]
	workers := ws("eu eu- us us ap ap-")
	idx := make([]int, 0, len(workers))
	regs := make([]int, 0, len(workers))
	if a := testing.AllocsPerRun(100, func() {
		tl.Reset("eu", "")
		idx, regs = idx[:0], regs[:0]
		for i, x := range workers {
			r := tl.Add(x.region, x.routable)
			if x.routable {
				idx, regs = append(idx, i), append(regs, r)
			}
		}
		idx = Filter(idx, regs, tl.Choose(DefaultFactor, 0.9))
	}); a != 0 {
		t.Errorf("%v allocations per choice, want 0", a)
	}
}
