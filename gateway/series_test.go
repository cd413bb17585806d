package gateway

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/breaker"
)

// testClock is a manual clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A removed worker's meshgw_worker_retries_total is deleted breaker.RemovedSeriesTTL after a
// scrape first found the worker gone, as its breaker and health series are.
func TestRemovedWorkerRetriesSeriesDeleted(t *testing.T) {
	clk := &testClock{now: time.Unix(1_700_000_000, 0)}
	e := newEnv(t, Config{Clock: clk.Now, Policy: "round_robin"})
	_, bad := e.upstream(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) })
	e.upstream(okHandler("good"))
	for range 4 {
		e.post("/v1/completions", `{"prompt":"x"}`)
	}
	labels := map[string]string{"worker": bad.URL}
	if n := counterValue(t, e, "meshgw_worker_retries_total", labels); n <= 0 {
		t.Fatalf("retries of the failing worker = %v: the test shows nothing", n)
	}
	if err := e.gw.Pool().Remove(bad.ID); err != nil {
		t.Fatal(err)
	}
	if n := counterValue(t, e, "meshgw_worker_retries_total", labels); n <= 0 {
		t.Fatalf("the series went at once (%v): it stays for the TTL", n)
	}
	clk.Advance(breaker.RemovedSeriesTTL - time.Nanosecond)
	if n := counterValue(t, e, "meshgw_worker_retries_total", labels); n <= 0 {
		t.Fatalf("the series went before the TTL (%v)", n)
	}
	clk.Advance(time.Nanosecond)
	if n := counterValue(t, e, "meshgw_worker_retries_total", labels); n != -1 {
		t.Fatalf("retries series of a worker removed %v ago = %v, want none", breaker.RemovedSeriesTTL, n)
	}
}
