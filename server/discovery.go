package server

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/discovery/kube"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/ownership"
	"github.com/meshgw/meshgw/version"
	"github.com/meshgw/meshgw/worker"
)

// discovery is Kubernetes discovery's part of the server: the leader's duty, and the admin
// handler its writes go through, set once the data plane's pool exists.
type discovery struct {
	cl    *cluster
	admin atomic.Pointer[admin.Config] // the admin API's configuration, Writer replaced per term
}

// errNotServing is the sink's error before the data plane's admin API is configured.
var errNotServing = errors.New("the gateway is still starting")

// discoveryDuty connects to the API server (every gateway may come to lead) and returns the
// duty; nil without --service-discovery.
func (c *cluster) discoveryDuty() (*discovery, leader.Duty, error) {
	dc := c.cfg.Discovery
	if dc == nil || dc.Selector == nil {
		return nil, nil, nil
	}
	client, from, err := kube.Connect("meshgw/" + version.Short())
	if err != nil {
		return nil, nil, err
	}
	c.log.Info("kubernetes discovery on: the raft leader registers the Ready pods", "config_from", from,
		"selector", kube.SelectorString(dc.Selector), "namespace", dc.Namespace, "port", dc.Rules.Port, "model_id_source", dc.Rules.ModelID.String())
	d := &discovery{cl: c}
	duty, err := kube.NewDuty(kube.DutyConfig{Client: client, Config: *dc, Records: c.node, Sink: d.sink, Logger: c.base})
	if err != nil {
		return nil, nil, err
	}
	return d, duty, nil
}

// serve hands discovery the admin API's configuration once the data plane has it.
func (d *discovery) serve(cfg admin.Config) {
	if d != nil {
		d.admin.Store(&cfg)
	}
}

// sink is the writer of one term: the admin API's POST and DELETE over a raft writer fenced by
// the term current now.
func (d *discovery) sink() (kube.Sink, error) {
	cfg := d.admin.Load()
	if cfg == nil {
		return nil, errNotServing
	}
	info, err := d.cl.node.Info()
	if err != nil {
		return nil, err
	}
	w := termWriter{node: d.cl.node, term: info.Term}
	if err := w.check(); err != nil {
		return nil, err
	}
	acfg := *cfg
	acfg.Writer, acfg.Fleet, acfg.Logger = w, nil, d.cl.base
	return &discoverySink{d: d, h: admin.New(acfg), region: cfg.Region}, nil
}

// termWriter proposes on this node only while it leads in term: never forwarded, so a former
// leader's write fails (raft refuses it, or it never commits once a newer term began).
type termWriter struct {
	node *consensus.Node
	term uint64
}

func (w termWriter) check() error {
	info, err := w.node.Info()
	if err != nil {
		return err
	}
	if !w.node.IsLeader() || info.Term != w.term {
		return kube.ErrFenced
	}
	return nil
}

func (w termWriter) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if err := w.check(); err != nil {
		return fsm.Result{}, err
	}
	return w.node.Apply(ctx, cmd)
}

// discoverySink writes discovery's actions through the admin handler.
type discoverySink struct {
	d      *discovery
	h      *admin.Handler
	region string // this gateway's, a registration's default
}

// Register registers spec owned by the live gateway of the highest rendezvous hash, those of
// the worker's region first (failover's rule), so that discovered workers spread over the
// fleet rather than all landing on the leader.
func (s *discoverySink) Register(ctx context.Context, spec worker.Spec) error {
	region := spec.Region
	if region == "" {
		region = s.region
	}
	node := s.d.cl.node
	owner := ownership.Pick(spec.ID(), region, ownership.WithDraining(s.d.cl.owners.Peers(), node.Draining()))
	_, err := s.h.Register(ctx, spec, owner)
	return err
}

// Remove is DELETE of the record: a ready worker drains first.
func (s *discoverySink) Remove(ctx context.Context, id worker.ID) error {
	rec, ok := s.d.cl.node.Worker(id)
	if !ok {
		return nil
	}
	_, _, err := s.h.Delete(ctx, rec)
	return err
}
