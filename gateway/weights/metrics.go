package weights

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the weight update's series: meshgw_weight_updates_total{result} and
// meshgw_journal_open_records.
type Metrics struct {
	updates *prometheus.CounterVec
}

// NewMetrics registers the series on reg; open reads the number of open journal records at
// each scrape.
func NewMetrics(reg prometheus.Registerer, open func() int) (*Metrics, error) {
	m := &Metrics{updates: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshgw_weight_updates_total",
		Help: "Weight updates this gateway coordinated, by result: ok, failed (the journal record stays open), not_started (the fleet did not acknowledge the disable; nothing was sent and the record closed), unresolved (nothing was sent, but the record could not be closed: it stays open), outcome_unknown (nothing was sent, and closing the record may or may not have applied), conflict (a record was open), rejected (bad targets), error.",
	}, []string{"result"})}
	for _, r := range []string{"ok", "failed", "not_started", ResultUnresolved, ResultOutcomeUnknown, "conflict", "rejected", "error"} {
		m.updates.WithLabelValues(r)
	}
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "meshgw_journal_open_records",
		Help: "Open weight-update journal records (the same on every gateway): an update running, or one that did not finish and holds its workers disabled.",
	}, func() float64 { return float64(open()) })
	for _, c := range []prometheus.Collector{m.updates, gauge} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) count(result string) {
	if m != nil {
		m.updates.WithLabelValues(result).Inc()
	}
}
