package fakeengine

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
)

// Config configures an Engine. The zero value works.
type Config struct {
	// Model is the model id the engine serves ("fake-model").
	Model string
	// CheckModel answers 404 NotFoundError, as vLLM does, to an OpenAI request (chat, completion,
	// embeddings) whose model is set and is not Model; SGLang's /generate names no model. Off
	// (false), any model name is served, as a gateway's tests that route any name expect; the
	// fakeworker command turns it on unless --any-model.
	CheckModel bool
	// NodeName names the engine in its answers; empty means "fake-<port>" of the first listener
	// started.
	NodeName string
	// Seed seeds the draws of error_rate, so that a run can be replayed (0 is a fixed seed too).
	Seed uint64
	// MaxBodyBytes bounds a request body (64 MiB).
	MaxBodyBytes int64
	// Logger receives start, stop and panic records, never one per request (slog.Default()).
	Logger *slog.Logger
	// Compute models the engine's prefix cache, prefill and decode times, and concurrent slots.
	// The zero value answers at once, without a cache and without a bound.
	Compute Compute
}

// InitialWeightVersion is the weight version of a fresh engine, as SGLang reports it.
const InitialWeightVersion = "default"

// ErrClosed is returned by calls on a closed Engine.
var ErrClosed = errors.New("fakeengine: engine closed")

// Engine is one fake engine: its faults, counters and weight version, shared by every listener
// it serves on. It is safe for concurrent use.
type Engine struct {
	cfg  Config
	log  *slog.Logger
	name atomic.Pointer[string]

	faultMu sync.Mutex // serializes fault changes; readers load state without it
	state   atomic.Pointer[faultState]

	hanging atomic.Int64 // requests held by hang or weight_update_hang, for tests

	stats   counters
	version atomic.Pointer[string]
	nextID  atomic.Uint64

	randMu sync.Mutex
	rng    *rand.Rand

	handler http.Handler

	cache   *prefixCache // nil without Compute.CacheBlocks
	slots   *slots       // nil without Compute.Slots
	lanes   *slots       // nil without Compute.PrefillLanes
	running atomic.Int64 // admitted requests not yet answered

	mu      sync.Mutex
	closers []func() error
	done    chan struct{} // closed by Close: ends hangs and waits
	closed  bool
}

// faultState is one immutable setting of the knobs; changed is closed when it is replaced, which
// wakes the requests that hang on it.
type faultState struct {
	f       Faults
	changed chan struct{}
}

// New returns an engine with cfg's defaults filled in and no listener yet.
func New(cfg Config) *Engine {
	if cfg.Model == "" {
		cfg.Model = "fake-model"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Compute.BlockChars <= 0 {
		cfg.Compute.BlockChars = DefaultBlockChars
	}
	e := &Engine{
		cfg:   cfg,
		log:   cfg.Logger,
		rng:   rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		done:  make(chan struct{}),
		slots: newSlots(cfg.Compute.Slots),
		lanes: newSlots(cfg.Compute.PrefillLanes),
	}
	if cfg.Compute.CacheBlocks > 0 {
		e.cache = newPrefixCache(cfg.Compute.CacheBlocks, cfg.Compute.BlockChars)
	}
	if cfg.NodeName != "" {
		e.name.Store(&cfg.NodeName)
	}
	v := InitialWeightVersion
	e.version.Store(&v)
	e.state.Store(&faultState{f: DefaultFaults(), changed: make(chan struct{})})
	e.handler = e.routes()
	return e
}

// NodeName is the name the engine puts in its answers.
func (e *Engine) NodeName() string { return e.nodeName() }

func (e *Engine) nodeName() string {
	if p := e.name.Load(); p != nil {
		return *p
	}
	return "fake"
}

// nameFromAddr sets the default node name from the port of the first listener.
func (e *Engine) nameFromAddr(addr net.Addr) {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		name := "fake-" + strconv.Itoa(tcp.Port)
		e.name.CompareAndSwap(nil, &name)
	}
}

// Model is the model id the engine serves.
func (e *Engine) Model() string { return e.cfg.Model }

// Faults returns the current knobs.
func (e *Engine) Faults() Faults { return e.state.Load().f }

// SetFaults replaces every knob at once (start from DefaultFaults), as a POST /_fault does.
func (e *Engine) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	e.faultMu.Lock()
	defer e.faultMu.Unlock()
	e.storeFaultsLocked(f)
	return nil
}

// patchFaults applies a POST /_fault body and returns the knobs it left.
func (e *Engine) patchFaults(body []byte) (Faults, error) {
	e.faultMu.Lock()
	defer e.faultMu.Unlock()
	f, err := ParseFaults(e.state.Load().f, body)
	if err != nil {
		return e.state.Load().f, err
	}
	e.storeFaultsLocked(f)
	return f, nil
}

func (e *Engine) storeFaultsLocked(f Faults) {
	old := e.state.Swap(&faultState{f: f, changed: make(chan struct{})})
	close(old.changed)
}

// Stats returns the counters, as GET /_stats answers them.
func (e *Engine) Stats() Stats {
	s := e.stats.snapshot()
	s.WeightVersion = e.WeightVersion()
	if !e.cfg.Compute.modeled() {
		s.ComputeStats = nil // the answer keeps the shape of DESIGN.md section 15
		return s
	}
	s.Running = e.running.Load()
	_, s.Waiting = e.slots.load()
	if e.cache != nil {
		s.CacheBlocks, s.CacheEvictions = e.cache.usage()
	}
	return s
}

// WeightVersion is the version the last successful weight update set.
func (e *Engine) WeightVersion() string { return *e.version.Load() }

// roll reports whether a request falls in the error_rate fraction.
func (e *Engine) roll(rate float64) bool {
	switch {
	case rate >= 1:
		return true
	case rate <= 0:
		return false
	}
	e.randMu.Lock()
	defer e.randMu.Unlock()
	return e.rng.Float64() < rate
}

// addCloser registers what Close must stop; it refuses once the engine is closed.
func (e *Engine) addCloser(c func() error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.closers = append(e.closers, c)
	return nil
}

// Close stops every listener, ends hanging requests and breaks open connections. It returns the
// first error and is safe to call twice.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.done)
	closers := e.closers
	e.closers = nil
	e.mu.Unlock()
	var first error
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// goSafe runs f in a goroutine that logs a panic with its stack instead of crashing the process.
func (e *Engine) goSafe(what string, f func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				e.log.Error("fakeengine: goroutine panicked", "goroutine", what, "panic", r,
					"stack", string(debug.Stack()))
			}
		}()
		f()
	}()
}
