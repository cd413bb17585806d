package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// WriteCost is the cost of the writes of one window of a fill: the Writes that came after Held
// records were written. CPU is the whole process's (user + system, getrusage): the writes
// themselves, raft, bbolt's fsyncs and the saves of the applied state, which run once a second,
// so a window should last a few seconds for its figure to include them.
type WriteCost struct {
	Held           int     `json:"held"`
	Writes         int     `json:"writes"`
	CPUUsPerWrite  float64 `json:"cpu_us_per_write"`
	WallUsPerWrite float64 `json:"wall_us_per_write"`
}

// costWindows measures windows of a fill: each starts when its Held-th write is done and ends
// Writes later. Its methods are safe from the fill's goroutines.
type costWindows struct {
	mu      sync.Mutex
	windows []costWindow
}

type costWindow struct {
	held, writes int
	cpu0         time.Duration
	wall0        time.Time
	cost         *WriteCost
}

// newCostWindows parses --measure-at (a comma-separated list of record counts, "" for none),
// each window window writes long, and returns how many writes the fill needs to close the last.
func newCostWindows(at string, window int) (*costWindows, int, error) {
	c := &costWindows{}
	need := 0
	for f := range strings.SplitSeq(at, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		held, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil || held < 0 {
			return nil, 0, fmt.Errorf("--measure-at: %q is not a record count", f)
		}
		c.windows = append(c.windows, costWindow{held: held, writes: window})
		need = max(need, held+window)
	}
	if len(c.windows) > 0 && window <= 0 {
		return nil, 0, fmt.Errorf("--window must be > 0")
	}
	slices.SortFunc(c.windows, func(a, b costWindow) int { return a.held - b.held })
	return c, need, nil
}

// done notes that the d-th write is done (d counts from 1; 0 opens the windows at 0 held).
func (c *costWindows) done(d int) {
	if len(c.windows) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.windows {
		w := &c.windows[i]
		switch d {
		case w.held:
			w.cpu0, w.wall0 = processCPU(), time.Now()
		case w.held + w.writes:
			cpu, wall := processCPU()-w.cpu0, time.Since(w.wall0)
			w.cost = &WriteCost{Held: w.held, Writes: w.writes,
				CPUUsPerWrite:  float64(cpu.Microseconds()) / float64(w.writes),
				WallUsPerWrite: float64(wall.Microseconds()) / float64(w.writes)}
		}
	}
}

// costs returns the windows that closed, in order of records held.
func (c *costWindows) costs() []WriteCost {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []WriteCost
	for _, w := range c.windows {
		if w.cost != nil {
			out = append(out, *w.cost)
		}
	}
	return out
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
