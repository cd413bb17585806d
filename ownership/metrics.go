package ownership

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/consensus/fsm"
)

// Metrics are the ownership metrics every gateway publishes (DESIGN.md section 13):
// meshgw_ownership_handoffs_total{reason}, the workers this gateway moved from one owner to
// another, by reason (drain, transfer, rebalance, failover), each published at zero; and
// meshgw_ownership_workers_owned{peer}, how many workers each peer owns in this gateway's applied
// state, read at each scrape. A nil *Metrics counts nothing.
type Metrics struct {
	handoffs *prometheus.CounterVec
}

// NewMetrics registers meshgw_ownership_handoffs_total on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshgw_ownership_handoffs_total",
		Help: "Workers this gateway moved to another owner, by reason: drain, transfer, rebalance (operators' moves, counted where they were asked) and failover (counted on the raft leader).",
	}, []string{"reason"})}
	for _, r := range Reasons {
		m.handoffs.WithLabelValues(r.String())
	}
	if err := reg.Register(m.handoffs); err != nil {
		return nil, fmt.Errorf("ownership: register metrics: %w", err)
	}
	return m, nil
}

// RegisterOwned registers meshgw_ownership_workers_owned{peer} on reg; owned reads the applied
// records at each scrape.
func RegisterOwned(reg prometheus.Registerer, owned func() []fsm.Record) error {
	if err := reg.Register(ownedCollector(owned)); err != nil {
		return fmt.Errorf("ownership: register metrics: %w", err)
	}
	return nil
}

func (m *Metrics) countMoves(r Reason, n int) {
	if m != nil && n > 0 {
		m.handoffs.WithLabelValues(r.String()).Add(float64(n))
	}
}

var ownedDesc = prometheus.NewDesc("meshgw_ownership_workers_owned",
	"Workers each peer owns, in this gateway's applied raft state.", []string{"peer"}, nil)

// ownedCollector counts the owners of the applied records at each scrape.
type ownedCollector func() []fsm.Record

func (c ownedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- ownedDesc }

func (c ownedCollector) Collect(ch chan<- prometheus.Metric) {
	counts := make(map[string]int)
	for _, r := range c() {
		counts[r.Owner]++
	}
	for peer, n := range counts {
		ch <- prometheus.MustNewConstMetric(ownedDesc, prometheus.GaugeValue, float64(n), peer)
	}
}
