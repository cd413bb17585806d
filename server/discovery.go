package server

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/discovery/kube"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/mesh"
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

// connectKube connects to the API server when discovery or --router-selector is on (every
// gateway may come to lead, so every one connects, and fails at start when it cannot).
func (c *cluster) connectKube() error {
	if c.cfg.Discovery == nil {
		return nil
	}
	client, from, err := kube.Connect("meshgw/" + version.Short())
	if err != nil {
		return err
	}
	c.kube = client
	c.log.Info("kubernetes API server found", "config_from", from)
	return nil
}

// discoveryDuty returns the duty; nil without --service-discovery.
func (c *cluster) discoveryDuty() (*discovery, leader.Duty, error) {
	dc := c.cfg.Discovery
	if dc == nil || dc.Selector == nil {
		return nil, nil, nil
	}
	c.log.Info("kubernetes discovery on: the raft leader registers the Ready pods",
		"selector", kube.SelectorString(dc.Selector), "namespace", dc.Namespace, "port", dc.Rules.Port, "model_id_source", dc.Rules.ModelID.String())
	d := &discovery{cl: c}
	duty, err := kube.NewDuty(kube.DutyConfig{Client: c.kube, Config: *dc, Records: c.node, Sink: d.sink, Logger: c.base})
	if err != nil {
		return nil, nil, err
	}
	return d, duty, nil
}

// routerJoinLoop is --router-selector: it lists the gateway pods and joins those the mesh does
// not list yet, at this gateway's mesh port, every routerJoinInterval (routerJoinRetry while
// this gateway is alone), so that gateways that start together and first find only some of
// each other still end in one mesh. It runs until the gateway stops.
func (c *cluster) routerJoinLoop() {
	dc := c.cfg.Discovery
	_, port, _ := net.SplitHostPort(c.mesh.Addr())
	meshPort, _ := strconv.Atoi(port)
	self := map[string]bool{c.mesh.Addr(): true, net.JoinHostPort(c.cfg.Cluster.MeshAdvertise, port): true}
	lastErr := ""
	joined := false
	for {
		known := map[string]bool{}
		alive := 0
		for _, m := range c.mesh.Members() {
			known[m.Address] = true
			if m.Status == mesh.StatusAlive {
				alive++
			}
		}
		addrs, err := kube.Peers(c.ctx, c.kube, dc.Namespace, dc.RouterSelector, meshPort, func(a string) bool { return self[a] || known[a] })
		switch {
		case err != nil:
			if err.Error() != lastErr {
				c.log.Warn("--router-selector: cannot list the gateway pods; retrying", "err", err)
			}
			lastErr = err.Error()
		case len(addrs) > 0:
			lastErr = ""
			n, err := c.mesh.Join(addrs)
			if taken := (*mesh.NodeIDTakenError)(nil); errors.As(err, &taken) {
				// Of two gateways with one id, the one started later stops, whichever meets
				// the other: not the one alone in its fleet, which may be the first.
				if why := c.idTaken(taken, joined); why != nil {
					c.fail(why)
					return
				}
				err = nil // this gateway goes on, joined (idTaken logged why)
			}
			if err != nil {
				c.log.Warn("--router-selector: joining the gateway pods failed; retrying", "join", strings.Join(addrs, ","), "err", err)
			} else {
				joined = true
				c.log.Info("--router-selector: joined gateway pods", "reached", n, "of", len(addrs), "alive", c.mesh.Count(mesh.StatusAlive))
			}
		}
		wait := routerJoinInterval
		if alive <= 1 {
			wait = routerJoinRetry
		}
		if !c.wait(wait) {
			return
		}
	}
}

// --router-selector's pace: how often it lists the gateway pods while this gateway is alone,
// and once it has peers.
const (
	routerJoinRetry    = time.Second
	routerJoinInterval = 10 * time.Second
)

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
		return nil, kube.ErrNotReady // before the data plane's admin API is configured
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
