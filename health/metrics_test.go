package health

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		p := newFake()
		c := newChecker(t, DefaultConfig(), p, nil, func(o *Options) {
			o.Registerer = reg
			o.Modes[worker.ModeGRPC] = Mode{Prober: p}
		})
		ready := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1), SuccessThreshold: ptr(1)})
		down := worker.Spec{URL: "grpc://127.0.0.1:9001", Health: &worker.Health{CheckIntervalSecs: ptr(1)}}
		gone := engine(8003, &worker.Health{CheckIntervalSecs: ptr(1)})
		rank := engine(8001, &worker.Health{CheckIntervalSecs: ptr(1), SuccessThreshold: ptr(1)})
		rank.DPRank = ptr(1)
		p.set(idOf(t, down), errDown)
		for _, s := range []worker.Spec{ready, down, gone, rank} {
			if err := c.Add(s, Pending); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Advance(1500 * time.Millisecond) // two probes each
		c.Remove(idOf(t, gone))
		synctest.Wait()
		want := `
# HELP meshgw_worker_health Health of each owned worker: 1 ready, 0 not ready (pending, not_ready, failed, draining), -1 removed.
# TYPE meshgw_worker_health gauge
meshgw_worker_health{worker="grpc://127.0.0.1:9001"} 0
meshgw_worker_health{worker="http://127.0.0.1:8001"} 1
meshgw_worker_health{worker="http://127.0.0.1:8001@1"} 1
meshgw_worker_health{worker="http://127.0.0.1:8003"} -1
# HELP meshgw_worker_health_checks_total Health probes run, by worker connection mode and result.
# TYPE meshgw_worker_health_checks_total counter
meshgw_worker_health_checks_total{result="failure",worker_type="external"} 0
meshgw_worker_health_checks_total{result="failure",worker_type="grpc"} 2
meshgw_worker_health_checks_total{result="failure",worker_type="http"} 0
meshgw_worker_health_checks_total{result="failure",worker_type="zmq"} 0
meshgw_worker_health_checks_total{result="success",worker_type="external"} 0
meshgw_worker_health_checks_total{result="success",worker_type="grpc"} 0
meshgw_worker_health_checks_total{result="success",worker_type="http"} 6
meshgw_worker_health_checks_total{result="success",worker_type="zmq"} 0
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
			"meshgw_worker_health", "meshgw_worker_health_checks_total"); err != nil {
			t.Error(err)
		}
		if n, err := testutil.GatherAndCount(reg); err != nil || n != 12 {
			t.Errorf("GatherAndCount = %d, %v; want 12 series", n, err)
		}
		// A second Checker on the same registry is refused rather than silently unregistered.
		if _, err := New(Options{Config: DefaultConfig(), Registerer: reg}); err == nil {
			t.Error("duplicate registration did not fail")
		}
	})
}

func TestMetricsNeverHoldTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "sk-metric-key-456"
		reg := prometheus.NewRegistry()
		c := newChecker(t, DefaultConfig(), newFake(), nil, func(o *Options) { o.Registerer = reg })
		s := engine(8001, nil)
		s.APIKey = key
		c.Add(s, Pending)
		synctest.Wait()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if strings.Contains(mf.String(), key) {
				t.Errorf("key in metric %s", mf.GetName())
			}
		}
	})
}
