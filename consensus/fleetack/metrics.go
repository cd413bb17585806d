package fleetack

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// ackMetrics are a FleetAck's series: how many writes this gateway waited on the fleet for, and
// which peers did not apply them in time. An operator alerts on the second
// (deploy/prometheus/rules.yaml): a peer that lags routes by the state before the write.
type ackMetrics struct {
	reg     prometheus.Registerer
	acks    *prometheus.CounterVec
	lagging *prometheus.CounterVec
}

func newAckMetrics(reg prometheus.Registerer) (*ackMetrics, error) {
	m := &ackMetrics{
		reg: reg,
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_fleet_acks_total",
			Help: "Admin writes this gateway waited on the fleet for, by result: acked (every live peer applied it in time) or lagging (some did not).",
		}, []string{"result"}),
		lagging: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshgw_fleet_ack_lagging_total",
			Help: "Fleet-acknowledged writes of this gateway that a live peer did not apply within --fleet-ack-timeout-secs, by that peer's node id.",
		}, []string{"peer"}),
	}
	m.acks.WithLabelValues("acked")
	m.acks.WithLabelValues("lagging")
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.acks); err != nil {
		return nil, errors.Join(errors.New("fleetack: register fleet-ack metrics"), err)
	}
	if err := reg.Register(m.lagging); err != nil {
		reg.Unregister(m.acks)
		return nil, errors.Join(errors.New("fleetack: register fleet-ack metrics"), err)
	}
	return m, nil
}

// observe counts one acknowledgement's report.
func (m *ackMetrics) observe(rep Report) {
	if len(rep.Lagging) == 0 {
		m.acks.WithLabelValues("acked").Inc()
		return
	}
	m.acks.WithLabelValues("lagging").Inc()
	for _, id := range rep.Lagging {
		m.lagging.WithLabelValues(id).Inc()
	}
}

// unregister removes the series, so that a FleetAck made again in the same process can
// register them.
func (m *ackMetrics) unregister() {
	if m.reg != nil {
		m.reg.Unregister(m.acks)
		m.reg.Unregister(m.lagging)
	}
}
