package mesh

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Directions of meshgw_mesh_bulletins_total.
const (
	dirSent         = "sent"          // bulletins this owner published
	dirReceived     = "received"      // bulletins newer than any seen of their worker
	dirDroppedStale = "dropped_stale" // gossiped bulletins not newer than one already seen
	dirDroppedEpoch = "dropped_epoch" // bulletins whose owner or epoch differ from the raft record
)

// Results of meshgw_mesh_bulletin_resyncs_total.
const (
	resyncAsked    = "asked"    // this node asked an owner for its whole state
	resyncAnswered = "answered" // this owner sent its whole state to a peer that asked
	resyncRefused  = "refused"  // this owner refused a request: too many answers this second
)

// bulletinMetrics are meshgw_mesh_bulletins_total{direction},
// meshgw_mesh_bulletin_bytes_total (the bytes of bulletin traffic this node sent: gossip, beats,
// relays, push/pull state and resync answers) and meshgw_mesh_bulletin_resyncs_total{result}.
type bulletinMetrics struct {
	total   *prometheus.CounterVec
	bytes   prometheus.Counter
	resyncs *prometheus.CounterVec
}

func newBulletinMetrics() *bulletinMetrics {
	m := &bulletinMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_mesh_bulletins_total",
			Help: "Worker bulletins by direction: sent (published here), received (newer than any seen), dropped_stale (not newer), dropped_epoch (owner or epoch differ from the raft record).",
		}, []string{"direction"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshgw_mesh_bulletin_bytes_total",
			Help: "Bytes of bulletin traffic this gateway sent: gossip (its own bulletins, beats and relays, once per transmission), push/pull state and resync answers.",
		}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_mesh_bulletin_resyncs_total",
			Help: "Whole-state resyncs of bulletins: asked (this gateway found it missed an owner's bulletin), answered and refused (as owner).",
		}, []string{"result"}),
	}
	for _, d := range []string{dirSent, dirReceived, dirDroppedStale, dirDroppedEpoch} {
		m.total.WithLabelValues(d)
	}
	for _, r := range []string{resyncAsked, resyncAnswered, resyncRefused} {
		m.resyncs.WithLabelValues(r)
	}
	return m
}

func (m *bulletinMetrics) resync(result string) {
	if m != nil {
		m.resyncs.WithLabelValues(result).Inc()
	}
}

func (m *bulletinMetrics) count(direction string, n int) {
	if m != nil && n > 0 {
		m.total.WithLabelValues(direction).Add(float64(n))
	}
}

func (m *bulletinMetrics) sentBytes(n int) {
	if m != nil && n > 0 {
		m.bytes.Add(float64(n))
	}
}

func (m *bulletinMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.total, m.bytes, m.resyncs}
}
