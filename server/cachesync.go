package server

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
// policy routes on and the Sync that keeps it with the owners.
type fleetCache struct {
	sync *cachesync.Sync
	idx  *prefixindex.Index
}

// newFleetCache builds it on the pool p, with cache_aware's configuration cfg; Start builds it
// when the policy is cache_aware and Config.CacheFleet is set (a nil *fleetCache is none).
// Register its service on the gRPC server before it serves, then start it.
func newFleetCache(nodeID string, cfg policy.CacheAwareConfig, p *pool.Pool, owns func(worker.ID) bool, peers func() []string,
	resolve func(string) (string, bool), dial []grpc.DialOption, reg prometheus.Registerer, log *slog.Logger) (*fleetCache, error) {
	fc := &fleetCache{}
	fc.idx = prefixindex.New(prefixindex.Config{MaxChars: cfg.MaxTreeSize, EvictionInterval: cfg.EvictionInterval, OnEvict: fc.evicted})
	sy, err := cachesync.New(cachesync.Config{NodeID: nodeID, Index: fc.idx, Workers: func() []*pool.Worker { return p.Snapshot().All },
		Owns: owns, Peers: peers, Resolve: resolve, DialOptions: dial, Logger: log})
	if err != nil {
		return nil, err
	}
	fc.sync = sy
	st := sy.Stats()
	for _, c := range []struct {
		Name, Help string // Name: as deploy/check finds every metric the code registers
		v          *atomic.Int64
	}{
		{Name: "meshgw_cache_sync_report_bytes_total", Help: "Bytes of cache_aware index and load reports this gateway sent to owners.", v: &st.ReportBytes},
		{Name: "meshgw_cache_sync_report_blocks_total", Help: "Index blocks this gateway reported to owners.", v: &st.ReportBlocks},
		{Name: "meshgw_cache_sync_update_bytes_total", Help: "Bytes of index and load publications this gateway sent subscribers as owner.", v: &st.UpdateBytes},
		{Name: "meshgw_cache_sync_applied_blocks_total", Help: "Index blocks this gateway took from owners' publications.", v: &st.AppliedBlocks},
		{Name: "meshgw_cache_sync_dropped_total", Help: "Index blocks never sent (a full batch, a peer down) or entries refused (not the owner).", v: &st.Dropped},
	} {
		v := c.v
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.Name, Help: c.Help},
			func() float64 { return float64(v.Load()) })); err != nil {
			return nil, err
		}
	}
	if err := reg.Register(indexBytes{fc.idx}); err != nil {
		return nil, err
	}
	return fc, nil
}

// newLocalIndex makes cache_aware's index for --cache-scope local, as the policy would make it
// itself, and exports its size as the fleet scope does, so that --max-tree-size can be watched
// in either scope.
func newLocalIndex(cfg policy.CacheAwareConfig, reg prometheus.Registerer) (*prefixindex.Index, error) {
	idx := prefixindex.New(prefixindex.Config{MaxChars: cfg.MaxTreeSize, EvictionInterval: cfg.EvictionInterval})
	if err := reg.Register(indexBytes{idx}); err != nil {
		return nil, err
	}
	return idx, nil
}

// indexBytesDesc describes meshgw_cache_index_bytes.
var indexBytesDesc = prometheus.NewDesc("meshgw_cache_index_bytes",
	"Bytes of routing text this gateway's cache_aware prefix index holds, per model, all workers together "+
		"(its own choices and, with --cache-scope fleet, what owners published).", []string{"model"}, nil)

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

// evicted is the index's OnEvict, which tells the Sync: the Sync is built on the index, and
// fc.sync is set before the gateway, which runs the index's evictions, is built.
func (fc *fleetCache) evicted(model string, w prefixindex.Worker, gone []prefixindex.BlockUse) {
	fc.sync.Evicted(model, w, gone)
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

// start starts the sync; nil does nothing.
func (fc *fleetCache) start() {
	if fc != nil {
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
