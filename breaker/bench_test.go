package breaker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkAllow is the request hot path on a closed circuit: one atomic load, no allocation.
func BenchmarkAllow(b *testing.B) {
	br := New(DefaultConfig(), Options{})
	b.ReportAllocs()
	for b.Loop() {
		if !br.Allow() {
			b.Fatal("closed breaker refused")
		}
	}
}

// BenchmarkAllowParallel is the closed hot path under contention from every core.
func BenchmarkAllowParallel(b *testing.B) {
	br := New(DefaultConfig(), Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !br.Allow() {
				b.Fatal("closed breaker refused")
			}
		}
	})
}

// BenchmarkAllowOpen is an open circuit before its timeout: a clock read and two atomic loads.
func BenchmarkAllowOpen(b *testing.B) {
	cfg := DefaultConfig()
	cfg.FailureThreshold, cfg.Timeout = 1, time.Hour
	br := New(cfg, Options{})
	br.Record(Failure)
	b.ReportAllocs()
	for b.Loop() {
		if br.Allow() {
			b.Fatal("open breaker allowed")
		}
	}
}

// BenchmarkRecord records alternating outcomes with no hooks: the mutex path.
func BenchmarkRecord(b *testing.B) {
	br := New(DefaultConfig(), Options{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i++; i&1 == 0 {
			br.Record(Success)
		} else {
			br.Record(Failure)
		}
	}
}

// BenchmarkRecordWithMetrics records through the Prometheus hooks, as the gateway does.
func BenchmarkRecordWithMetrics(b *testing.B) {
	m, err := NewMetrics(prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	br := New(DefaultConfig(), Options{Hooks: m.Hooks("http://127.0.0.1:8000")})
	b.ReportAllocs()
	for b.Loop() {
		br.Record(Success)
	}
}

func BenchmarkClassify(b *testing.B) {
	var c Classifier
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Classify(503)
	}
}

func TestAllowAllocatesNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FailureThreshold = 1
	br := New(cfg, Options{})
	for _, s := range []State{Closed, Open} {
		if br.State() != s {
			t.Fatalf("breaker is %v, want %v", br.State(), s)
		}
		if allocs := testing.AllocsPerRun(100, func() { br.Allow() }); allocs != 0 {
			t.Errorf("Allow on a %v circuit allocated %v times", s, allocs)
		}
		br.Record(Failure)
	}
}
