package health

import (
	"sync"
	"time"

	"github.com/meshgw/meshgw/worker"
	"github.com/prometheus/client_golang/prometheus"
)

// RemovedSeriesTTL is how long meshgw_worker_health of a worker no longer checked here (removed,
// quarantined, owned elsewhere now) reads -1, as in SMG, before the series is deleted; the
// breaker package's series follow the same rule (breaker.RemovedSeriesTTL).
const RemovedSeriesTTL = 5 * time.Minute

// metrics are the Checker's Prometheus series (DESIGN.md section 13).
type metrics struct {
	health *prometheus.GaugeVec   // meshgw_worker_health{worker}: 1 ready, 0 other, -1 removed
	checks *prometheus.CounterVec // meshgw_worker_health_checks_total{worker_type,result}

	now  func() time.Time
	mu   sync.Mutex
	gone map[string]time.Time // labels reading -1, and since when
}

func newMetrics(reg prometheus.Registerer, now func() time.Time) (*metrics, error) {
	m := &metrics{now: now, gone: map[string]time.Time{},
		health: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshgw_worker_health",
			Help: "Health of each owned worker: 1 ready, 0 not ready (pending, not_ready, failed, draining), -1 removed.",
		}, []string{"worker"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_worker_health_checks_total",
			Help: "Health probes run, by worker connection mode and result.",
		}, []string{"worker_type", "result"}),
	}
	for _, mode := range []string{worker.ModeHTTP, worker.ModeGRPC, worker.ModeZMQ, worker.ModeExternal} {
		m.checks.WithLabelValues(mode, "success")
		m.checks.WithLabelValues(mode, "failure")
	}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.health.Describe(ch)
	m.checks.Describe(ch)
}

// Collect implements prometheus.Collector: it first deletes the series that have read -1 for
// RemovedSeriesTTL, so that no scrape sees them after that.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	now := m.now()
	for label, at := range m.gone {
		if now.Sub(at) >= RemovedSeriesTTL {
			delete(m.gone, label)
			m.health.DeleteLabelValues(label)
		}
	}
	m.mu.Unlock()
	m.health.Collect(ch)
	m.checks.Collect(ch)
}

func (m *metrics) setState(label string, s State) {
	v := 0.0
	if s == Ready {
		v = 1
	}
	m.mu.Lock()
	delete(m.gone, label)
	m.mu.Unlock()
	m.health.WithLabelValues(label).Set(v)
}

func (m *metrics) removed(label string) {
	m.mu.Lock()
	m.gone[label] = m.now()
	m.mu.Unlock()
	m.health.WithLabelValues(label).Set(-1)
}

func (m *metrics) checked(mode string, ok bool) {
	res := "failure"
	if ok {
		res = "success"
	}
	m.checks.WithLabelValues(mode, res).Inc()
}
