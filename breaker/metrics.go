package breaker

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RemovedSeriesTTL is how long a removed worker's series stay, its state reading -1 as in SMG,
// before they are deleted: long enough for several scrapes to see the removal, short enough
// that workers coming and going do not grow the series without bound. The health package's
// meshgw_worker_health follows the same rule.
const RemovedSeriesTTL = 5 * time.Minute

// Metrics publishes breakers' events as SMG's worker_cb_* series under the meshgw_ prefix,
// labelled by worker URL. Wire one breaker with New(cfg, Options{Hooks: m.Hooks(url)}).
type Metrics struct {
	state        *prometheus.GaugeVec
	transitions  *prometheus.CounterVec
	outcomes     *prometheus.CounterVec
	failures     *prometheus.GaugeVec
	successes    *prometheus.GaugeVec
	readmissions *prometheus.CounterVec
	hangs        *prometheus.CounterVec

	clock Clock
	mu    sync.Mutex
	gone  map[string]time.Time // removed workers' labels and when they were removed
}

// NewMetrics registers the breaker metrics on reg. Every worker's
// meshgw_worker_cb_health_readmissions_total and meshgw_worker_cb_hang_opens_total are
// published at zero when Hooks is called, so a dashboard's rate() has a series to start from. clock (nil: time.Now) times the removed
// workers' series (RemovedSeriesTTL).
func NewMetrics(reg prometheus.Registerer, clock Clock) (*Metrics, error) {
	if clock == nil {
		clock = time.Now
	}
	m := &Metrics{clock: clock, gone: map[string]time.Time{},
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
		hangs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_worker_cb_hang_opens_total",
			Help: "Closed circuits opened by the hang rule: requests to the worker got no answer within the request timeout while it answered no request at all.",
		}, []string{"worker"}),
	}
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.state, m.transitions, m.outcomes, m.failures, m.successes, m.readmissions, m.hangs}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector: it first deletes the series of workers removed
// RemovedSeriesTTL ago or more, so that no scrape sees them after that.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.prune()
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// prune deletes every series of the workers removed RemovedSeriesTTL ago or more.
func (m *Metrics) prune() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	for w, at := range m.gone {
		if now.Sub(at) < RemovedSeriesTTL {
			continue
		}
		delete(m.gone, w)
		l := prometheus.Labels{"worker": w}
		m.state.Delete(l)
		m.readmissions.Delete(l)
		m.hangs.Delete(l)
		m.transitions.DeletePartialMatch(l)
		m.outcomes.DeletePartialMatch(l)
	}
}

// Hooks returns the hooks that publish one worker's breaker, and publishes that worker's
// series at their starting values (closed, zero counts). worker is the worker's URL, as in SMG;
// it must not carry credentials.
func (m *Metrics) Hooks(worker string) Hooks {
	m.mu.Lock()
	delete(m.gone, worker) // back before its series were deleted: they go on
	m.mu.Unlock()
	state := m.state.WithLabelValues(worker)
	failures := m.failures.WithLabelValues(worker)
	successes := m.successes.WithLabelValues(worker)
	success := m.outcomes.WithLabelValues(worker, Success.String())
	failure := m.outcomes.WithLabelValues(worker, Failure.String())
	readmissions := m.readmissions.WithLabelValues(worker)
	hangs := m.hangs.WithLabelValues(worker)
	state.Set(float64(Closed))
	failures.Set(0)
	successes.Set(0)
	return Hooks{
		OnTransition: func(from, to State) {
			m.transitions.WithLabelValues(worker, from.String(), to.String()).Inc()
			state.Set(float64(to))
		},
		OnOutcome: func(o Outcome) {
			if o == Success {
				success.Inc()
			} else {
				failure.Inc() // a TimedOut too
			}
		},
		OnCounts: func(f, s int) {
			failures.Set(float64(f))
			successes.Set(float64(s))
		},
		OnReadmission: readmissions.Inc,
		OnHang:        hangs.Inc,
	}
}

// Removed marks a worker's breaker as gone: its state series reads -1 (as SMG does) and its
// consecutive-count gauges are deleted. RemovedSeriesTTL later its other series (state,
// transitions, outcomes, readmissions) are deleted too, unless Hooks published the worker
// again meanwhile; until then its counters stay, so rates over them see the last increments.
func (m *Metrics) Removed(worker string) {
	m.mu.Lock()
	m.gone[worker] = m.clock()
	m.mu.Unlock()
	m.state.WithLabelValues(worker).Set(-1)
	m.failures.DeleteLabelValues(worker)
	m.successes.DeleteLabelValues(worker)
}
