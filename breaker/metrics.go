package breaker

import "github.com/prometheus/client_golang/prometheus"

// Metrics publishes breakers' events as SMG's worker_cb_* series under the meshgw_ prefix,
// labelled by worker URL. Wire one breaker with New(cfg, Options{Hooks: m.Hooks(url)}).
type Metrics struct {
	state        *prometheus.GaugeVec
	transitions  *prometheus.CounterVec
	outcomes     *prometheus.CounterVec
	failures     *prometheus.GaugeVec
	successes    *prometheus.GaugeVec
	readmissions *prometheus.CounterVec
}

// NewMetrics registers the breaker metrics on reg. Every worker's
// meshgw_worker_cb_health_readmissions_total is published at zero when Hooks is called, so a
// dashboard's rate() has a series to start from.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshgw_worker_cb_state",
			Help: "Circuit breaker state per worker (0 closed, 1 open, 2 half_open, -1 removed).",
		}, []string{"worker"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_worker_cb_transitions_total",
			Help: "Circuit breaker state transitions by worker, from and to.",
		}, []string{"worker", "from", "to"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_worker_cb_outcomes_total",
			Help: "Request outcomes recorded by circuit breakers, by worker and outcome (success or failure).",
		}, []string{"worker", "outcome"}),
		failures: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshgw_worker_cb_consecutive_failures",
			Help: "Current consecutive failure count per worker.",
		}, []string{"worker"}),
		successes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshgw_worker_cb_consecutive_successes",
			Help: "Current consecutive success count per worker.",
		}, []string{"worker"}),
		readmissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_worker_cb_health_readmissions_total",
			Help: "Open circuits moved to half-open at once because health checks promoted the worker to ready.",
		}, []string{"worker"}),
	}
	for _, c := range []prometheus.Collector{m.state, m.transitions, m.outcomes, m.failures, m.successes, m.readmissions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Hooks returns the hooks that publish one worker's breaker, and publishes that worker's
// series at their starting values (closed, zero counts). worker is the worker's URL, as in SMG;
// it must not carry credentials.
func (m *Metrics) Hooks(worker string) Hooks {
	state := m.state.WithLabelValues(worker)
	failures := m.failures.WithLabelValues(worker)
	successes := m.successes.WithLabelValues(worker)
	success := m.outcomes.WithLabelValues(worker, Success.String())
	failure := m.outcomes.WithLabelValues(worker, Failure.String())
	readmissions := m.readmissions.WithLabelValues(worker)
	state.Set(float64(Closed))
	failures.Set(0)
	successes.Set(0)
	return Hooks{
		OnTransition: func(from, to State) {
			m.transitions.WithLabelValues(worker, from.String(), to.String()).Inc()
			state.Set(float64(to))
		},
		OnOutcome: func(o Outcome) {
			if o == Failure {
				failure.Inc()
			} else {
				success.Inc()
			}
		},
		OnCounts: func(f, s int) {
			failures.Set(float64(f))
			successes.Set(float64(s))
		},
		OnReadmission: readmissions.Inc,
	}
}

// Removed marks a worker's breaker as gone: its state series reads -1 (as SMG does) and its
// consecutive-count gauges are deleted. Its counters stay, so rates over them stay correct.
func (m *Metrics) Removed(worker string) {
	m.state.WithLabelValues(worker).Set(-1)
	m.failures.DeleteLabelValues(worker)
	m.successes.DeleteLabelValues(worker)
}
