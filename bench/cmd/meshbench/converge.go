package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/mesh"
)

// ConvergeResult is what `meshbench converge` prints.
type ConvergeResult struct {
	Peers   int       `json:"peers"`
	Profile string    `json:"profile"`
	RunsS   []float64 `json:"runs_s"` // each run's time from the first join to full convergence
	MedianS float64   `json:"median_s"`
	MaxS    float64   `json:"max_s"`
}

func runConverge(ctx context.Context, args []string, stderr io.Writer) (*ConvergeResult, error) {
	fs := flag.NewFlagSet("meshbench converge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	peers := fs.Int("peers", 100, "mesh nodes, all in this process on 127.0.0.1")
	profile := fs.String("profile", mesh.ProfileLocal, "memberlist profile: lan, wan or local")
	runs := fs.Int("runs", 3, "runs, each with fresh nodes")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on the whole command")
	logLevel := fs.String("log-level", "error", "level of the nodes' own log lines on stderr: debug, info, warn or error")
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return nil, toolcmd.BadFlags{Msg: fmt.Sprintf("--log-level %q: want debug, info, warn or error", *logLevel)}
	}
	switch {
	case *peers < 2 || *peers > 1000:
		return nil, toolcmd.BadFlags{Msg: "--peers must be 2..1000"}
	case *runs < 1 || *runs > 100:
		return nil, toolcmd.BadFlags{Msg: "--runs must be 1..100"}
	case *timeout <= 0:
		return nil, toolcmd.BadFlags{Msg: "--timeout must be positive"}
	case *profile != mesh.ProfileLAN && *profile != mesh.ProfileWAN && *profile != mesh.ProfileLocal:
		return nil, toolcmd.BadFlags{Msg: fmt.Sprintf("--profile %q: want lan, wan or local", *profile)}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	stderr = &lockedWriter{w: stderr}
	res := &ConvergeResult{Peers: *peers, Profile: *profile}
	for i := range *runs {
		took, err := converge(ctx, *peers, *profile, stderr, level)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		fmt.Fprintf(stderr, "meshbench: run %d/%d: %d peers (%s) converged in %.3f s\n", i+1, *runs, *peers, *profile, took.Seconds())
		res.RunsS = append(res.RunsS, round3(took.Seconds()))
	}
	sorted := slices.Sorted(slices.Values(res.RunsS))
	res.MedianS, res.MaxS = sorted[len(sorted)/2], sorted[len(sorted)-1]
	if len(sorted)%2 == 0 {
		res.MedianS = round3((sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2)
	}
	return res, nil
}

func round3(s float64) float64 { return float64(int64(s*1000+0.5)) / 1000 }

// lockedWriter serializes the writes of the nodes' loggers and the progress lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// converge starts n nodes, joins all but the first to the first at once, and returns the time
// from the first join until every node sees n alive members. It shuts every node down.
func converge(ctx context.Context, n int, profile string, stderr io.Writer, level slog.Level) (time.Duration, error) {
	lv := new(slog.LevelVar) // this run's nodes only: some log for a moment after Shutdown
	lv.Set(level)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	nodes := make([]*mesh.Mesh, 0, n)
	defer func() {
		lv.Set(slog.LevelError + 1) // peers shut down one by one: their failures are expected
		shutdownAll(nodes)
	}()
	for i := range n {
		m, err := mesh.Start(mesh.Config{
			NodeID:   fmt.Sprintf("gw-%03d", i),
			BindAddr: "127.0.0.1",
			Profile:  profile,
			Meta:     benchMeta(i),
			Logger:   logger,
		})
		if err != nil {
			return 0, err
		}
		nodes = append(nodes, m)
	}
	w := newWatch(nodes)
	defer w.stop()

	seed := []string{nodes[0].Addr()}
	joinErr := make(chan error, n)
	start := time.Now()
	for _, m := range nodes[1:] {
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

// benchMeta is metadata of a realistic size (about 130 bytes), as a gateway publishes it.
func benchMeta(i int) mesh.Meta {
	return mesh.Meta{Version: "v0.6.0", Region: "local", Color: "blue",
		HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 30000+i), RPCAddr: fmt.Sprintf("127.0.0.1:%d", 31000+i),
		RaftAddr:  fmt.Sprintf("127.0.0.1:%d", 32000+i),
		ClusterID: "5f0c6c1e-3f3b-4b8e-9d2a-8f1f2e3d4c5b", AppliedIndex: 1000 + uint64(i), OwnedWorkers: 10}
}

func shutdownAll(nodes []*mesh.Mesh) {
	var wg sync.WaitGroup
	for _, m := range nodes {
		wg.Go(func() { _ = m.Shutdown() })
	}
	wg.Wait()
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
