package chaos

import (
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/meshgw/meshgw/test/chaos/cluster"
	"github.com/meshgw/meshgw/test/wan"
)

// startWAN makes the simulated WAN of a run with cfg.Regions ≥ 2 (nil otherwise) and routes
// the harness's HTTP clients (net/http's DefaultTransport, which all of them use) through it:
// each address is dialed from inside its own region, as a client of that region would, so
// a cut region's clients still reach its gateways. The returned function undoes both; it is
// safe to call twice.
func startWAN(cfg Config) (*cluster.WAN, func(), error) {
	if cfg.Regions < 2 {
		return nil, func() {}, nil
	}
	names := cluster.RegionNames(cfg.Regions)
	_, _, hosts := cluster.Layout(cfg.Nodes, cfg.Engines, cfg.Regions)
	n, err := wan.New(wan.Config{Prefix: fmt.Sprintf("mgcw%d", os.Getpid()), Regions: names, Hosts: hosts, Delay: cfg.WANDelay})
	if err != nil {
		return nil, nil, fmt.Errorf("the simulated WAN: %w", err)
	}
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		n.Close()
		return nil, nil, fmt.Errorf("the simulated WAN: net/http's DefaultTransport is a %T", http.DefaultTransport)
	}
	before := t.DialContext
	t.DialContext = n.DialByAddress
	var once sync.Once
	return &cluster.WAN{Net: n, Regions: names}, func() {
		once.Do(func() {
			t.DialContext = before
			t.CloseIdleConnections()
			n.Close()
		})
	}, nil
}
