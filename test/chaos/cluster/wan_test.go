package cluster

import (
	"fmt"
	"testing"
)

// Gateways and engines go round-robin over the regions; in a region the gateways take the
// first hosts, the engines the next, no two processes share a host, and hosts covers them.
func TestLayout(t *testing.T) {
	for _, c := range []struct{ nodes, engines, regions, hosts int }{
		{3, 3, 3, 2}, {5, 6, 3, 4}, {3, 3, 2, 4}, {1, 1, 3, 2}, {2, 7, 3, 4},
	} {
		t.Run(fmt.Sprintf("%d gateways %d engines %d regions", c.nodes, c.engines, c.regions), func(t *testing.T) {
			gws, engs, hosts := Layout(c.nodes, c.engines, c.regions)
			if len(gws) != c.nodes || len(engs) != c.engines || hosts != c.hosts {
				t.Fatalf("got %d gateways, %d engines, %d hosts; want %d, %d, %d", len(gws), len(engs), hosts, c.nodes, c.engines, c.hosts)
			}
			used := map[Place]string{}
			place := func(what string, i int, p Place) {
				if p.Region != i%c.regions {
					t.Errorf("%s %d in region %d; want %d (round-robin)", what, i, p.Region, i%c.regions)
				}
				if p.Host < 0 || p.Host >= hosts {
					t.Errorf("%s %d on host %d of %d", what, i, p.Host, hosts)
				}
				if o, ok := used[p]; ok {
					t.Errorf("%s %d shares %+v with %s", what, i, p, o)
				}
				used[p] = fmt.Sprintf("%s %d", what, i)
			}
			for i, p := range gws {
				place("gateway", i, p)
			}
			for j, p := range engs {
				place("engine", j, p)
			}
		})
	}
}

func TestRegionNames(t *testing.T) {
	got := RegionNames(10)
	if got[0] != "eu" || got[1] != "us" || got[2] != "ap" || got[8] != "r9" || got[9] != "r10" {
		t.Errorf("RegionNames(10) = %v", got)
	}
	seen := map[string]bool{}
	for _, n := range got {
		if seen[n] {
			t.Errorf("%q twice in %v", n, got)
		}
		seen[n] = true
	}
}
