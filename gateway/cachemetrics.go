package gateway

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/usage"
)

// observeUsage counts the report in the last bytes of w's answer, if there is one.
func observeUsage(w *pool.Worker, b []byte) {
	if t, ok := usage.Scan(b); ok {
		w.ObserveCache(t.Prompt, t.Cached)
	}
}

var (
	promptTokensDesc = prometheus.NewDesc("meshgw_worker_prompt_tokens_total",
		"Prompt tokens of the answers relayed by this gateway whose engine reported their cached part, by worker URL.",
		[]string{"worker"}, nil)
	cachedTokensDesc = prometheus.NewDesc("meshgw_worker_cached_tokens_total",
		"Of those prompt tokens, the ones the engine reported served from its prefix cache, by worker URL.",
		[]string{"worker"}, nil)
	routedTextDesc = prometheus.NewDesc("meshgw_worker_routed_text_bytes_total",
		"Bytes of routing text this gateway's cache_aware picks sent each worker, by worker URL.",
		[]string{"worker"}, nil)
	predictedCachedDesc = prometheus.NewDesc("meshgw_worker_predicted_cached_bytes_total",
		"Of those bytes, the ones this gateway's prefix index predicted the worker held when it picked it, by worker URL.",
		[]string{"worker"}, nil)
)

// cacheCollector reports each worker's prompt and cached token counts, and cache_aware's
// predictions for it, at scrape time, read from the pool's workers, so the data plane pays only
// two atomic additions per answer and two per pick. A worker's
// series appear with its first report; the workers sharing a URL (data-parallel ranks) add up
// under it. A worker removed from the pool keeps its last values for breaker.RemovedSeriesTTL
// after a scrape first found it gone, then its series go, as meshgw_worker_retries_total's do.
type cacheCollector struct {
	pool    *pool.Pool
	clock   func() time.Time
	mu      sync.Mutex
	seen    map[string]*cacheSeries
	scrapes uint64
}

// cacheSeries is one URL's last counts, and when a scrape first found it gone (zero: present).
type cacheSeries struct {
	prompt, cached, text, matched uint64
	gone                          time.Time
	scrape                        uint64 // the scrape that last found it in the pool
}

func newCacheCollector(p *pool.Pool, clock func() time.Time) *cacheCollector {
	return &cacheCollector{pool: p, clock: clock, seen: map[string]*cacheSeries{}}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- promptTokensDesc
	ch <- cachedTokensDesc
	ch <- routedTextDesc
	ch <- predictedCachedDesc
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scrapes++
	scrape := c.scrapes
	for _, w := range c.pool.Snapshot().All {
		prompt, cached := w.CacheTokens()
		text, matched := w.Prediction()
		s := c.seen[w.URL]
		if s == nil {
			if prompt == 0 && text == 0 {
				continue
			}
			s = &cacheSeries{}
			c.seen[w.URL] = s
		}
		if s.scrape != scrape { // the first worker of this URL in this scrape
			s.prompt, s.cached, s.text, s.matched, s.scrape = 0, 0, 0, 0, scrape
		}
		s.prompt += prompt
		s.cached += cached
		s.text += text
		s.matched += matched
		s.gone = time.Time{}
	}
	now := c.clock()
	for url, s := range c.seen {
		if s.scrape != scrape {
			if s.gone.IsZero() {
				s.gone = now
			} else if now.Sub(s.gone) >= breaker.RemovedSeriesTTL {
				delete(c.seen, url)
				continue
			}
		}
		ch <- prometheus.MustNewConstMetric(promptTokensDesc, prometheus.CounterValue, float64(s.prompt), url)
		ch <- prometheus.MustNewConstMetric(cachedTokensDesc, prometheus.CounterValue, float64(s.cached), url)
		ch <- prometheus.MustNewConstMetric(routedTextDesc, prometheus.CounterValue, float64(s.text), url)
		ch <- prometheus.MustNewConstMetric(predictedCachedDesc, prometheus.CounterValue, float64(s.matched), url)
	}
}
