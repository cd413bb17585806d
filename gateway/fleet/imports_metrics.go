package fleet

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	importedDesc = prometheus.NewDesc("meshgw_mesh_imported_workers",
		"Workers owned by other gateways whose state this gateway imported from their bulletins.", nil, nil)
	staleDesc = prometheus.NewDesc("meshgw_mesh_stale_imports",
		"Imported workers shown stale: nothing heard from their owner for three of its probe intervals. They keep their last state (fail-static).", nil, nil)
)

// Collector returns the importer's meshgw_mesh_imported_workers and meshgw_mesh_stale_imports
// gauges, counted at scrape time as Imported judges staleness, so nothing has to keep them
// current. Register it with the gateway's registry.
func (im *Importer) Collector() prometheus.Collector { return importCollector{im} }

type importCollector struct{ im *Importer }

func (c importCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- importedDesc
	ch <- staleDesc
}

func (c importCollector) Collect(ch chan<- prometheus.Metric) {
	n, stale := c.im.countStale()
	ch <- prometheus.MustNewConstMetric(importedDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, float64(stale))
}

// countStale counts the imported workers and the stale ones. The owners' last news is asked
// for outside the importer's lock (the mesh calls the importer with its own locks held), once
// per owner.
func (im *Importer) countStale() (n, stale int) {
	type entry struct {
		owner    string
		at       int64
		interval time.Duration
	}
	im.mu.Lock()
	entries := make([]entry, 0, len(im.state))
	for _, c := range im.state {
		entries = append(entries, entry{c.owner, c.at, c.probeInterval})
	}
	im.mu.Unlock()
	now := im.cfg.Now()
	heard := make(map[string]time.Time)
	for _, e := range entries {
		last := time.Unix(0, e.at)
		if im.refreshed(e.owner) {
			h, ok := heard[e.owner]
			if !ok {
				h = im.cfg.Heard(e.owner)
				heard[e.owner] = h
			}
			if h.After(last) {
				last = h
			}
		}
		if now.Sub(last) > staleAfter(e.interval) {
			stale++
		}
	}
	return len(entries), stale
}
