package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/meshgw/meshgw/gateway/locality"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// regionEnv is a gateway of region eu (locality as given) with two workers in eu and two in us,
// the draw that chooses a request's region held in draw (default 0.5).
type regionEnv struct {
	*testEnv
	draw atomic.Uint64 // math.Float64bits
	eu   []*pool.Worker
	us   []*pool.Worker
}

func newRegionEnv(t *testing.T, loc locality.Config, handler func(name string) http.HandlerFunc) *regionEnv {
	r := &regionEnv{}
	r.draw.Store(math.Float64bits(0.5))
	cfg := Config{Region: "eu", Policy: "round_robin", Locality: loc}
	cfg.localityDraw = func() float64 { return math.Float64frombits(r.draw.Load()) }
	r.testEnv = newEnv(t, cfg)
	for _, region := range []string{"eu", "eu", "us", "us"} {
		name := fmt.Sprintf("%s-%d", region, len(r.eu)+len(r.us))
		_, w := r.upstream(handler(name), func(s *worker.Spec) { s.Region = region })
		if region == "eu" {
			r.eu = append(r.eu, w)
		} else {
			r.us = append(r.us, w)
		}
	}
	return r
}

// send posts n chat requests and counts them by X-Mesh-Worker-Region.
func (r *regionEnv) send(n int) map[string]int {
	r.t.Helper()
	got := map[string]int{}
	for range n {
		st, h, body := r.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
		if st != 200 {
			r.t.Fatalf("status %d: %s", st, body)
		}
		got[h.Get(hdrWorkerRegion)]++
	}
	return got
}

func (r *regionEnv) requests(gw, wk string) float64 {
	return counterValue(r.t, r.testEnv, "meshgw_locality_requests_total", map[string]string{"gateway_region": gw, "worker_region": wk})
}

// TestLocalityRouting: a gateway of region eu keeps every request in eu while its workers are
// routable, spills by the 1.4 rule when one of two is not, and sends everything to us when none
// is; X-Mesh-Worker-Region and meshgw_locality_requests_total say where each went.
func TestLocalityRouting(t *testing.T) {
	r := newRegionEnv(t, locality.Config{}, okHandler)

	if got := r.send(40); got["eu"] != 40 {
		t.Fatalf("healthy eu workers: %v, want all 40 in eu", got)
	}
	if n := r.requests("eu", "eu"); n != 40 {
		t.Fatalf("meshgw_locality_requests_total{eu,eu} = %v, want 40", n)
	}

	// One of two eu workers broken: eu keeps 1.4 × 1/2 = 70 % of the requests.
	if _, err := r.gw.Pool().SetHealth(r.eu[0].ID, health.NotReady); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		draw float64
		want string
	}{{0, "eu"}, {0.699, "eu"}, {0.7, "us"}, {0.999, "us"}} {
		r.draw.Store(math.Float64bits(tc.draw))
		if got := r.send(2); got[tc.want] != 2 {
			t.Errorf("one eu worker broken, draw %v: %v, want both in %s", tc.draw, got, tc.want)
		}
	}

	// Both broken (one unhealthy, one with an open circuit): everything goes to us.
	if err := r.gw.Pool().SetBreaker(r.eu[1].ID, openBreaker{}); err != nil {
		t.Fatal(err)
	}
	r.draw.Store(math.Float64bits(0))
	if got := r.send(10); got["us"] != 10 {
		t.Fatalf("no eu worker routable: %v, want all 10 in us", got)
	}
	if eu, us := r.requests("eu", "eu"), r.requests("eu", "us"); eu != 44 || us != 14 {
		t.Fatalf("meshgw_locality_requests_total: eu %v, us %v; want 44 and 14", eu, us)
	}

	// An eu worker an operator disabled is not counted: the other, healthy again, keeps all.
	if _, err := r.gw.Pool().SetHealth(r.eu[0].ID, health.Ready); err != nil {
		t.Fatal(err)
	}
	if _, err := r.gw.Pool().SetFlags(r.eu[1].ID, true, false); err != nil {
		t.Fatal(err)
	}
	r.draw.Store(math.Float64bits(0.999))
	if got := r.send(4); got["eu"] != 4 {
		t.Fatalf("one eu worker disabled, the other healthy: %v, want all 4 in eu", got)
	}
}

// TestLocalityModelServedElsewhere: a model no eu worker serves goes to us, whatever the draw,
// while eu's own model stays in eu.
func TestLocalityModelServedElsewhere(t *testing.T) {
	e := newEnv(t, Config{Region: "eu", Policy: "round_robin"})
	e.upstream(okHandler("eu-a"), func(s *worker.Spec) { s.Region, s.Models = "eu", []string{"a"} })
	e.upstream(okHandler("us-a"), func(s *worker.Spec) { s.Region, s.Models = "us", []string{"a"} })
	e.upstream(okHandler("us-b"), func(s *worker.Spec) { s.Region, s.Models = "us", []string{"b"} })
	for _, tc := range []struct{ model, want string }{{"a", "eu"}, {"b", "us"}, {"a", "eu"}, {"b", "us"}} {
		st, h, body := e.post("/v1/completions", `{"model":"`+tc.model+`","prompt":"x"}`)
		if st != 200 || h.Get(hdrWorkerRegion) != tc.want {
			t.Fatalf("model %s: status %d, region %q (%s); want %s", tc.model, st, h.Get(hdrWorkerRegion), body, tc.want)
		}
	}
}

// TestLocalityOff: with --locality-routing off the policy sees every region's workers, and the
// requests are still counted by region.
func TestLocalityOff(t *testing.T) {
	r := newRegionEnv(t, locality.Config{Mode: locality.Off}, okHandler)
	if got := r.send(8); got["eu"] != 4 || got["us"] != 4 {
		t.Fatalf("locality off: %v, want round robin over all four", got)
	}
	if eu, us := r.requests("eu", "eu"), r.requests("eu", "us"); eu != 4 || us != 4 {
		t.Fatalf("meshgw_locality_requests_total: eu %v, us %v; want 4 and 4", eu, us)
	}
}

// TestLocalityRetryLeavesTheRegion: when the only routable eu worker fails a request, the retry
// goes to us rather than back to it.
func TestLocalityRetryLeavesTheRegion(t *testing.T) {
	r := newRegionEnv(t, locality.Config{}, func(name string) http.HandlerFunc {
		if name == "eu-1" {
			return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
		}
		return okHandler(name)
	})
	if _, err := r.gw.Pool().SetHealth(r.eu[0].ID, health.NotReady); err != nil {
		t.Fatal(err)
	}
	r.draw.Store(math.Float64bits(0)) // eu's share is 70 %: the first attempt goes to eu-1
	st, h, body := r.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	if st != 200 || h.Get(hdrWorkerRegion) != "us" || h.Get(hdrAttempt) != "2" {
		t.Fatalf("status %d, region %q, attempt %q (%s); want 200 from us at the second attempt", st, h.Get(hdrWorkerRegion), h.Get(hdrAttempt), body)
	}
}

// TestLocalityRegionlessWorkersAreLocal: a worker without a region is local to every gateway,
// and its answers carry no X-Mesh-Worker-Region (an upstream's own is dropped).
func TestLocalityRegionlessWorkersAreLocal(t *testing.T) {
	e := newEnv(t, Config{Region: "eu", Policy: "round_robin"})
	e.upstream(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(hdrWorkerRegion, "inner")
		_, _ = io.WriteString(w, `{}`)
	})
	e.upstream(okHandler("us"), func(s *worker.Spec) { s.Region = "us" })
	for range 6 {
		st, h, _ := e.post("/v1/completions", `{"prompt":"x"}`)
		if st != 200 || h.Get(hdrWorkerRegion) != "" || len(h.Values(hdrWorkerRegion)) != 0 {
			t.Fatalf("status %d, X-Mesh-Worker-Region %q: want 200 from the region-less worker, no header", st, h.Values(hdrWorkerRegion))
		}
	}
	if n := counterValue(t, e, "meshgw_locality_requests_total", map[string]string{"gateway_region": "eu", "worker_region": ""}); n != 6 {
		t.Fatalf("meshgw_locality_requests_total{eu,\"\"} = %v, want 6", n)
	}
}

// TestLocalityNoRegion: a gateway without a region routes over every worker and counts nothing
// by region; answers still name the worker's region.
func TestLocalityNoRegion(t *testing.T) {
	e := newEnv(t, Config{Policy: "round_robin"})
	e.upstream(okHandler("eu"), func(s *worker.Spec) { s.Region = "eu" })
	e.upstream(okHandler("us"), func(s *worker.Spec) { s.Region = "us" })
	got := map[string]int{}
	for range 4 {
		_, h, _ := e.post("/v1/completions", `{"prompt":"x"}`)
		got[h.Get(hdrWorkerRegion)]++
	}
	if got["eu"] != 2 || got["us"] != 2 {
		t.Fatalf("no gateway region: %v, want 2 and 2", got)
	}
	if e.gw.loc != nil || e.gw.locCount != nil {
		t.Fatal("locality routing or its counter is set up without a region")
	}
}

// TestLocalityStreamHeader: a streamed answer carries X-Mesh-Worker-Region too.
func TestLocalityStreamHeader(t *testing.T) {
	e := newEnv(t, Config{Region: "eu"})
	e.upstream(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {}\n\ndata: [DONE]\n\n")
	}, func(s *worker.Spec) { s.Region = "eu" })
	st, h, body := e.post("/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if st != 200 || h.Get("Content-Type") != "text/event-stream" || h.Get(hdrWorkerRegion) != "eu" {
		t.Fatalf("status %d, content type %q, region %q (%s)", st, h.Get("Content-Type"), h.Get(hdrWorkerRegion), body)
	}
}

// TestLocalityCandidatesDoNotAllocate: choosing the region and the candidates costs no
// allocation once warm.
func TestLocalityCandidatesDoNotAllocate(t *testing.T) {
	r := newRegionEnv(t, locality.Config{}, okHandler)
	c := &call{g: r.gw, cands: make([]*pool.Worker, 0, 8)}
	snap := r.gw.Pool().Snapshot()
	if a := testing.AllocsPerRun(100, func() { c.candidates(snap, r.eu[0]) }); a != 0 {
		t.Errorf("%v allocations per selection, want 0", a)
	}
}

// BenchmarkSelect is one attempt's selection, the candidates and round_robin's pick, among n
// workers half in eu and half in us: by a gateway without a region (locality skipped), one of
// region eu with every worker routable, and one of eu whose first eu worker is down (a share
// spills to us).
func BenchmarkSelect(b *testing.B) {
	for _, n := range []int{8, 64} {
		for _, tc := range []struct {
			name, region string
			down         bool
		}{{"no-region", "", false}, {"eu", "eu", false}, {"eu-spill", "eu", true}} {
			b.Run(fmt.Sprintf("%s/%d", tc.name, n), func(b *testing.B) {
				gw, err := New(Config{Region: tc.region, Policy: "round_robin", Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				defer gw.Close()
				for i := range n {
					region := []string{"eu", "us"}[i%2]
					w, _, err := gw.Pool().Upsert(worker.Spec{URL: fmt.Sprintf("http://127.0.0.%d:8000", i+1), Region: region}, pool.OriginLocal)
					if err != nil {
						b.Fatal(err)
					}
					if tc.down && i == 0 {
						if _, err := gw.Pool().SetHealth(w.ID, health.NotReady); err != nil {
							b.Fatal(err)
						}
					}
				}
				c := &call{g: gw, cands: make([]*pool.Worker, 0, 64)}
				c.meta.Caps = worker.CapChat
				b.ReportAllocs()
				for b.Loop() {
					c.candidates(gw.pool.Snapshot(), nil)
					gw.policy.Pick(c.cands, &c.preq)
				}
			})
		}
	}
}
