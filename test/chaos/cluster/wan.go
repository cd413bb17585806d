package cluster

import (
	"fmt"

	"github.com/meshgw/meshgw/test/wan"
)

// WAN is a run over a simulated WAN (test/wan): the gateways and engines spread over its
// regions, each process in its region's namespace, and the links between regions delayed.
type WAN struct {
	Net     *wan.Net
	Regions []string // region r's name, as the gateways' --region and the registrations say it
}

// Place is where a layout puts a gateway or an engine: a region and a host of it (from 0).
type Place struct{ Region, Host int }

// regionNames name the first regions; more are r9, r10...
var regionNames = []string{"eu", "us", "ap", "sa", "af", "me", "oc", "ca"}

// RegionNames returns the names of n regions.
func RegionNames(n int) []string {
	out := make([]string, n)
	for r := range out {
		if r < len(regionNames) {
			out[r] = regionNames[r]
		} else {
			out[r] = fmt.Sprintf("r%d", r+1)
		}
	}
	return out
}

// Layout spreads nodes gateways and engines engines round-robin over regions: gateway i is in
// region i mod regions, engine j likewise. In each region the gateways take the first hosts and
// the engines the hosts after them; hosts is how many a region needs.
func Layout(nodes, engines, regions int) (gateways, engs []Place, hosts int) {
	perRegion := func(n int) int { return (n + regions - 1) / regions }
	g := perRegion(nodes)
	for i := range nodes {
		gateways = append(gateways, Place{Region: i % regions, Host: i / regions})
	}
	for j := range engines {
		engs = append(engs, Place{Region: j % regions, Host: g + j/regions})
	}
	return gateways, engs, max(g+perRegion(engines), 1)
}

// wanPorts are gateway i's ports in a WAN run: gateways of one region share its namespace, so
// each has its own ports besides its own address.
func wanPorts(i int) (http, metrics, mesh, raft, rpc int) {
	return 30000 + i, 29000 + i, 40000 + 10*i, 40001 + 10*i, 40002 + 10*i
}
