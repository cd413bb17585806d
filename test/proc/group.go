package proc

import (
	"log/slog"
	"sync"
	"time"
)

// Group is the processes a run started, so that they can be stopped together whatever happens.
// The zero value is ready to use.
type Group struct {
	Log *slog.Logger // starts (debug) and kills (warn); nil logs nothing

	mu    sync.Mutex
	procs []*Proc
}

// Start starts s (Start) and keeps the process.
func (g *Group) Start(s Spec) (*Proc, error) {
	p, err := Start(s)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	if g.Log != nil {
		g.Log.Debug("started", "name", s.Name, "pid", p.Pid())
	}
	return p, nil
}

// Procs returns the processes kept so far, ended ones too.
func (g *Group) Procs() []*Proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*Proc(nil), g.procs...)
}

// Stop ends every process kept (StopAll) and forgets them.
func (g *Group) Stop(grace time.Duration) {
	g.mu.Lock()
	ps := g.procs
	g.procs = nil
	g.mu.Unlock()
	for _, p := range StopAll(grace, ps...) {
		if g.Log != nil {
			g.Log.Warn("process ignored SIGTERM, killing it", "name", p.Name, "pid", p.Pid())
		}
	}
}
