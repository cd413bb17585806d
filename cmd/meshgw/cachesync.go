package main

import (
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/gateway/cachesync"
	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

// fleetCache is cache_aware's fleet-wide index and load (--cache-scope fleet): the index the
// policy routes on and the Sync that keeps it with the owners. Its pool is bound once the
// gateway exists.
type fleetCache struct {
	sync *cachesync.Sync
	idx  *prefixindex.Index
	pool atomic.Pointer[pool.Pool]
}

// newFleetCache builds it when the policy is cache_aware and the scope fleet; nil otherwise.
// Register its service on the gRPC server before it serves, and Start it once the pool is bound.
func newFleetCache(o *options, nodeID string, owns func(worker.ID) bool, peers func() []string,
	resolve func(string) (string, bool), dial []grpc.DialOption, reg prometheus.Registerer, log *slog.Logger) (*fleetCache, error) {
	if o.gw.policy != policy.CacheAware || o.cache.scope != cacheScopeFleet {
		return nil, nil
	}
	fc := &fleetCache{}
	cfg := o.cache.config()
	var s atomic.Pointer[cachesync.Sync]
	fc.idx = prefixindex.New(prefixindex.Config{MaxChars: cfg.MaxTreeSize, EvictionInterval: cfg.EvictionInterval,
		OnEvict: func(model string, w prefixindex.Worker, gone []prefixindex.BlockUse) {
			if s := s.Load(); s != nil {
				s.Evicted(model, w, gone)
			}
		}})
	workers := func() []*pool.Worker {
		if p := fc.pool.Load(); p != nil {
			return p.Snapshot().All
		}
		return nil
	}
	sy, err := cachesync.New(cachesync.Config{NodeID: nodeID, Index: fc.idx, Workers: workers, Owns: owns, Peers: peers,
		Resolve: resolve, DialOptions: dial, Logger: log})
	if err != nil {
		return nil, err
	}
	s.Store(sy)
	fc.sync = sy
	st := sy.Stats()
	for _, c := range []struct {
		name, help string
		v          *atomic.Int64
	}{
		{"meshgw_cache_sync_report_bytes_total", "Bytes of cache_aware index and load reports this gateway sent to owners.", &st.ReportBytes},
		{"meshgw_cache_sync_report_blocks_total", "Index blocks this gateway reported to owners.", &st.ReportBlocks},
		{"meshgw_cache_sync_update_bytes_total", "Bytes of index and load publications this gateway sent subscribers as owner.", &st.UpdateBytes},
		{"meshgw_cache_sync_applied_blocks_total", "Index blocks this gateway took from owners' publications.", &st.AppliedBlocks},
		{"meshgw_cache_sync_dropped_total", "Index blocks never sent (a full batch, a peer down) or entries refused (not the owner).", &st.Dropped},
	} {
		v := c.v
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(v.Load()) })); err != nil {
			return nil, err
		}
	}
	if err := reg.Register(indexBytes{fc.idx}); err != nil {
		return nil, err
	}
	return fc, nil
}

// indexBytesDesc describes meshgw_cache_index_bytes.
var indexBytesDesc = prometheus.NewDesc("meshgw_cache_index_bytes",
	"Bytes of routing text this gateway's cache_aware prefix index holds, per model, all workers together "+
		"(its own choices and what owners published).", []string{"model"}, nil)

// indexBytes exports the index's size per model, read at each scrape.
type indexBytes struct{ idx *prefixindex.Index }

// Describe implements prometheus.Collector.
func (c indexBytes) Describe(ch chan<- *prometheus.Desc) { ch <- indexBytesDesc }

// Collect implements prometheus.Collector: one read lock per model.
func (c indexBytes) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.idx.Models() {
		ch <- prometheus.MustNewConstMetric(indexBytesDesc, prometheus.GaugeValue,
			float64(c.idx.Model([]byte(name)).Size()), name)
	}
}

// register serves the CacheSync service; nil does nothing.
func (fc *fleetCache) register(srv *grpc.Server) {
	if fc != nil {
		fc.sync.Register(srv)
	}
}

// gatewayConfig is what the gateway's config takes of it: nothing when nil.
func (fc *fleetCache) gatewayConfig() gateway.CacheFleet {
	if fc == nil {
		return gateway.CacheFleet{}
	}
	return gateway.CacheFleet{Index: fc.idx, Routes: fc.sync, Load: fc.sync}
}

// start binds the pool and starts the sync; nil does nothing.
func (fc *fleetCache) start(p *pool.Pool) {
	if fc != nil {
		fc.pool.Store(p)
		fc.sync.Start()
	}
}

// close ends its streams (before the gRPC server's graceful stop); nil does nothing.
func (fc *fleetCache) close() {
	if fc != nil {
		fc.sync.Close()
	}
}

// livePeers lists the alive members of the mesh but self.
func livePeers(m interface{ Members() []mesh.Member }, self string) []string {
	var out []string
	for _, p := range m.Members() {
		if p.ID != self && p.Status == mesh.StatusAlive {
			out = append(out, p.ID)
		}
	}
	return out
}
