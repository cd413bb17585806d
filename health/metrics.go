package health

import (
	"github.com/meshgw/meshgw/worker"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Checker's Prometheus series (DESIGN.md section 13).
type metrics struct {
	health *prometheus.GaugeVec   // meshgw_worker_health{worker}: 1 ready, 0 other, -1 removed
	checks *prometheus.CounterVec // meshgw_worker_health_checks_total{worker_type,result}
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
		for _, c := range []prometheus.Collector{m.health, m.checks} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) setState(label string, s State) {
	v := 0.0
	if s == Ready {
		v = 1
	}
	m.health.WithLabelValues(label).Set(v)
}

func (m *metrics) removed(label string) { m.health.WithLabelValues(label).Set(-1) }

func (m *metrics) checked(mode string, ok bool) {
	res := "failure"
	if ok {
		res = "success"
	}
	m.checks.WithLabelValues(mode, res).Inc()
}
