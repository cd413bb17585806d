package mesh

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics is the mesh's meshgw_mesh_members{status} gauge, counted from Members at scrape time,
// so nothing has to keep it current.
type metrics struct {
	reg       prometheus.Registerer
	members   *membersCollector
	bulletins *bulletinMetrics
}

func newMetrics(reg prometheus.Registerer, m *Mesh) (*metrics, error) {
	mt := &metrics{reg: reg, members: &membersCollector{m: m, desc: prometheus.NewDesc(
		"meshgw_mesh_members",
		"Members of the mesh as this gateway sees them, itself included, by status.",
		[]string{"status"}, nil)}, bulletins: newBulletinMetrics()}
	if reg == nil {
		return mt, nil
	}
	for i, c := range mt.all() {
		if err := reg.Register(c); err != nil {
			for _, r := range mt.all()[:i] {
				reg.Unregister(r)
			}
			return nil, errors.Join(errors.New("mesh: register metrics"), err)
		}
	}
	return mt, nil
}

func (mt *metrics) all() []prometheus.Collector {
	return append([]prometheus.Collector{mt.members}, mt.bulletins.collectors()...)
}

// unregister removes the series, so that a mesh restarted in the same process can register
// them again.
func (mt *metrics) unregister() {
	if mt.reg != nil {
		for _, c := range mt.all() {
			mt.reg.Unregister(c)
		}
	}
}

// membersCollector reports one gauge per status, zeros included.
type membersCollector struct {
	m    *Mesh
	desc *prometheus.Desc
}

func (c *membersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *membersCollector) Collect(ch chan<- prometheus.Metric) {
	n := counts(c.m.Members())
	for _, s := range statuses {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n[s]), s.String())
	}
}
