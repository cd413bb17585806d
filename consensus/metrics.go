package consensus

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the node's meshgw_raft_* series. The gauges are read from raft and the FSM at
// scrape time, so nothing has to keep them current.
type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector
	apply      *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, n *Node) (*metrics, error) {
	m := &metrics{
		reg: reg,
		apply: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "meshgw_raft_apply_duration_seconds",
			Help: "Time from proposing a command on the leader to its result: append, commit and apply.",
			// 0.5 ms to about 8 s.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
		}, []string{"command"}),
	}
	m.collectors = []prometheus.Collector{
		m.apply,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "meshgw_raft_leader",
			Help: "1 if this node is the raft leader, else 0.",
		}, func() float64 {
			if n.raft.State() == raft.Leader {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "meshgw_raft_term",
			Help: "The raft term this node is in.",
		}, func() float64 { return float64(n.raft.CurrentTerm()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "meshgw_raft_applied_index",
			Help: "The raft index of the last command applied to this node's state.",
		}, func() float64 { return float64(n.fsm.AppliedIndex()) }),
	}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			return nil, errors.Join(errors.New("consensus: register metrics"), err)
		}
	}
	return m, nil
}

func (m *metrics) observeApply(command string, d time.Duration) {
	m.apply.WithLabelValues(command).Observe(d.Seconds())
}

// unregister removes the series, so that a node restarted in the same process can register
// them again.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
