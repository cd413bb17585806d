package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/mesh"
)

// cluster is n mesh nodes in this process, each on 127.0.0.1 with a free port and a metrics
// registry of its own.
type cluster struct {
	nodes []*mesh.Mesh
	regs  []*prometheus.Registry
	lv    *slog.LevelVar
}

// startCluster starts n nodes with the profile; they are not joined yet. On an error it shuts
// down the nodes it started.
func startCluster(n int, profile string, stderr io.Writer, level slog.Level) (*cluster, error) {
	c := &cluster{lv: new(slog.LevelVar)} // this run's nodes only: some log for a moment after Shutdown
	c.lv.Set(level)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.lv}))
	for i := range n {
		reg := prometheus.NewRegistry()
		m, err := mesh.Start(mesh.Config{
			NodeID:     fmt.Sprintf("gw-%03d", i),
			BindAddr:   "127.0.0.1",
			Profile:    profile,
			Meta:       benchMeta(i),
			Logger:     logger,
			Registerer: reg,
		})
		if err != nil {
			c.shutdown()
			return nil, err
		}
		c.nodes, c.regs = append(c.nodes, m), append(c.regs, reg)
	}
	return c, nil
}

// shutdown stops every node at once, their logs of each other's failure silenced.
func (c *cluster) shutdown() {
	c.lv.Set(slog.LevelError + 1)
	var wg sync.WaitGroup
	for _, m := range c.nodes {
		wg.Go(func() { _ = m.Shutdown() })
	}
	wg.Wait()
}

// join joins every node but the first to the first, all at once, and returns the time from the
// first join until every node sees every node alive.
func (c *cluster) join(ctx context.Context) (time.Duration, error) {
	n := len(c.nodes)
	w := newWatch(c.nodes)
	defer w.stop()
	seed := []string{c.nodes[0].Addr()}
	joinErr := make(chan error, n)
	start := time.Now()
	for _, m := range c.nodes[1:] {
		go func() {
			_, err := m.Join(seed)
			joinErr <- err
		}()
	}
	joined := 1
	for {
		select {
		case err := <-joinErr:
			if err != nil {
				return 0, err
			}
			joined++
		case at := <-w.done:
			took := at.Sub(start)
			for joined < n { // every join has returned once every node sees every other
				if err := <-joinErr; err != nil {
					return 0, err
				}
				joined++
			}
			return took, nil
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d nodes saw all %d alive before the timeout (%d joins returned)", w.count(), n, n, joined-1)
		}
	}
}

// counter returns the value of the counter named name in node i's registry (0 when absent).
func (c *cluster) counter(i int, name string) (float64, error) {
	mfs, err := c.regs[i].Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		return sum, nil
	}
	return 0, nil
}

// benchMeta is metadata of a realistic size (about 130 bytes), as a gateway publishes it.
func benchMeta(i int) mesh.Meta {
	return mesh.Meta{Version: "v0.6.0", Region: "local", Color: "blue",
		HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 30000+i), RPCAddr: fmt.Sprintf("127.0.0.1:%d", 31000+i),
		RaftAddr:  fmt.Sprintf("127.0.0.1:%d", 32000+i),
		ClusterID: "5f0c6c1e-3f3b-4b8e-9d2a-8f1f2e3d4c5b", AppliedIndex: 1000 + uint64(i), OwnedWorkers: 10}
}

// watch follows every node's membership and sends on done the first time all of them see
// every node alive.
type watch struct {
	done  chan time.Time
	quit  chan struct{}
	wg    sync.WaitGroup
	n     int
	mu    sync.Mutex
	full  int // nodes that now see all alive
	fired bool
}

func newWatch(nodes []*mesh.Mesh) *watch {
	w := &watch{done: make(chan time.Time, 1), quit: make(chan struct{}), n: len(nodes)}
	for _, m := range nodes {
		ch, stop := m.Watch()
		w.wg.Go(func() {
			defer stop()
			full := false
			for {
				if now := m.Count(mesh.StatusAlive) == len(nodes); now != full {
					full = now
					w.change(full)
				}
				select {
				case <-ch:
				case <-w.quit:
					return
				}
			}
		})
	}
	return w
}

// change counts a node that started (or stopped) seeing every node alive.
func (w *watch) change(full bool) {
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if full {
		w.full++
	} else {
		w.full--
	}
	if w.full == w.n && !w.fired {
		w.fired = true
		w.done <- at
	}
}

// count returns how many nodes see every node alive.
func (w *watch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.full
}

// stop ends the watching goroutines.
func (w *watch) stop() {
	close(w.quit)
	w.wg.Wait()
}
