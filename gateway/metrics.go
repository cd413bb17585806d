package gateway

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/reqmeta"
)

// Metric route labels: the model routes by path, then these.
const (
	routeModels = int(reqmeta.NumRoutes) + iota
	numMetricRoutes
)

func routeLabel(r int) string {
	if r == routeModels {
		return "/v1/models"
	}
	return reqmeta.Route(r).Path()
}

// metrics holds the data plane's collectors. Hot-path children are resolved once: durations per
// route up front, request counters per (route, status) on first use into a lock-free table.
type metrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	retries   *prometheus.CounterVec
	holds     *prometheus.CounterVec
	durByRt   [numMetricRoutes]prometheus.Observer
	reqByCode [numMetricRoutes][600]atomic.Pointer[prometheus.Counter]
	retried   retried
}

func newMetrics(reg prometheus.Registerer, p *pool.Pool, adm *admission, budget *bodyBudget, refusedLeft *atomic.Uint64, clock func() time.Time) *metrics {
	m := &metrics{retried: retried{pool: p, clock: clock, gone: map[string]time.Time{}},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_http_requests_total", Help: "Model and /v1/models requests answered, by route and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "meshgw_router_request_duration_seconds", Help: "Time from request to the end of the answer, by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"route"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_worker_retries_total", Help: "Attempts retried after a failure on a worker, by that worker's URL.",
		}, []string{"worker"}),
		holds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_worker_hung_holds_total",
			Help: "Times a worker was held out of this gateway's routing because a request to it got no answer within the request timeout, by its URL.",
		}, []string{"worker"}),
	}
	for r := range numMetricRoutes {
		m.durByRt[r] = m.duration.WithLabelValues(routeLabel(r))
	}
	if reg == nil {
		return m
	}
	m.retried.vecs = []*prometheus.CounterVec{m.retries, m.holds}
	reg.MustRegister(m.requests, m.duration, &m.retried,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "meshgw_admission_inflight", Help: "Model requests in flight.",
		}, func() float64 { return float64(adm.inflight.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "meshgw_admission_max_inflight", Help: "Current in-flight limit.",
		}, func() float64 { return float64(adm.max.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "meshgw_admission_rejected_total", Help: "Model requests rejected with 503 at the in-flight limit.",
		}, func() float64 { return float64(adm.rejected.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "meshgw_draining_rejected_total", Help: "Data-plane requests answered 503 draining after the gateway left the mesh at the end of its drain.",
		}, func() float64 { return float64(refusedLeft.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "meshgw_buffered_body_bytes", Help: "Bytes of request bodies buffered now, within --max-buffered-body-mb.",
		}, func() float64 { return float64(budget.used.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "meshgw_buffered_body_refused_total", Help: "Model requests answered 503 after waiting for room in the buffer for request bodies.",
		}, func() float64 { return float64(budget.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "meshgw_streamed_bodies_total", Help: "Model requests whose body, larger than --max-buffered-body-mb, was streamed to the worker without retries.",
		}, func() float64 { return float64(budget.streamed.Load()) }),
		&activeCollector{pool: p},
		newCacheCollector(p, clock),
	)
	return m
}

// observe counts one answered request.
func (m *metrics) observe(route, status int, seconds float64) {
	m.durByRt[route].Observe(seconds)
	if status < 100 || status >= 600 {
		status = 599
	}
	slot := &m.reqByCode[route][status]
	c := slot.Load()
	if c == nil {
		v := m.requests.WithLabelValues(routeLabel(route), strconv.Itoa(status))
		c = &v
		slot.Store(c)
	}
	(*c).Inc()
}

// retry counts a retry after a failure on the worker at url.
func (m *metrics) retry(url string) {
	m.retries.WithLabelValues(url).Inc()
	m.retried.track(url)
}

// hung counts a hung hold of the worker at url.
func (m *metrics) hung(url string) {
	m.holds.WithLabelValues(url).Inc()
	m.retried.track(url)
}

// retried collects meshgw_worker_retries_total and meshgw_worker_hung_holds_total, whose
// series of a worker removed from the pool are deleted breaker.RemovedSeriesTTL after a scrape
// first found it gone, as the owner deletes the worker's breaker and health series.
type retried struct {
	vecs  []*prometheus.CounterVec
	pool  *pool.Pool
	clock func() time.Time
	mu    sync.Mutex
	gone  map[string]time.Time // the labels of the series, and when a scrape found the worker gone (zero: not yet)
}

// track notes a series of the worker at url, pruned once the worker is gone.
func (r *retried) track(url string) {
	r.mu.Lock()
	if _, ok := r.gone[url]; !ok {
		r.gone[url] = time.Time{}
	}
	r.mu.Unlock()
}

func (r *retried) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range r.vecs {
		v.Describe(ch)
	}
}

func (r *retried) Collect(ch chan<- prometheus.Metric) {
	r.prune()
	for _, v := range r.vecs {
		v.Collect(ch)
	}
}

func (r *retried) prune() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.gone) == 0 {
		return
	}
	present := make(map[string]bool, len(r.gone))
	for _, w := range r.pool.Snapshot().All {
		if _, ok := r.gone[w.URL]; ok {
			present[w.URL] = true
		}
	}
	now := r.clock()
	for url, since := range r.gone {
		switch {
		case present[url]:
			r.gone[url] = time.Time{}
		case since.IsZero():
			r.gone[url] = now
		case now.Sub(since) >= breaker.RemovedSeriesTTL:
			for _, v := range r.vecs {
				v.DeleteLabelValues(url)
			}
			delete(r.gone, url)
		}
	}
}

// activeCollector reports each worker's in-flight requests at scrape time, so the hot path pays
// nothing beyond the atomic it keeps anyway for least_request. The workers sharing a URL
// (data-parallel ranks) add up under it: one series per label value.
type activeCollector struct{ pool *pool.Pool }

var activeDesc = prometheus.NewDesc("meshgw_worker_requests_active",
	"Requests in flight from this gateway to the worker.", []string{"worker"}, nil)

func (c *activeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- activeDesc }

func (c *activeCollector) Collect(ch chan<- prometheus.Metric) {
	all := c.pool.Snapshot().All
	// All is sorted by id, and a URL's ranks share their id's prefix: they are adjacent.
	var shared map[string]int64 // the URLs of several workers, and their sums
	for i, w := range all {
		if i > 0 && all[i-1].URL == w.URL || i+1 < len(all) && all[i+1].URL == w.URL {
			if shared == nil {
				shared = map[string]int64{}
			}
			shared[w.URL] += w.Inflight()
			continue
		}
		ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, float64(w.Inflight()), w.URL)
	}
	for url, n := range shared {
		ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, float64(n), url)
	}
}
