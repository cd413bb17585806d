package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// RegistrationRate is sequential registrations through one gateway whose raft state already
// holds Workers records, and how long the gateway then took to stop on SIGTERM (the goals:
// registering one worker costs about the same at 1,000 and 100,000 workers, and a stop takes
// under 10 s whatever the fleet's size).
type RegistrationRate struct {
	Workers       int     `json:"workers"`
	Registrations int     `json:"registrations"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	PerSec        float64 `json:"per_s"`
	// StopS is from SIGTERM to the process's exit, --shutdown-settle-secs (2) included.
	StopS float64 `json:"stop_s"`
}

// registrationSmall is the smaller fleet registrations are compared with.
const registrationSmall = 1_000

// stopBound is how long a timed stop may take before it is killed and reported failed.
const stopBound = time.Minute

// measureRegistrations registers Registrations new workers one after the other through g, whose
// state holds workers records, then stops g with SIGTERM and times the stop. Each worker is an
// address nothing listens on: its health checks fail, which changes no record.
func measureRegistrations(ctx context.Context, o *Options, g *controlGateway, workers int) (*RegistrationRate, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(i int) error {
		body := fmt.Sprintf(`{"url":"http://127.0.0.%d:%d"}`, 2+i/50_000, 10_000+i%50_000)
		return send(ctx, client, http.MethodPost, g.base+"/workers", body, nil)
	}
	const warmup = 20
	for i := range warmup {
		if err := post(i); err != nil {
			return nil, err
		}
	}
	n := o.Control.Registrations
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := range n {
		t0 := time.Now()
		if err := post(warmup + i); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	took := time.Since(start)
	p50, p99, _ := quantiles(lat)
	stop, err := g.timedStop()
	if err != nil {
		return nil, err
	}
	return &RegistrationRate{Workers: workers, Registrations: n, P50Ms: p50, P99Ms: p99,
		PerSec: float64(n) / took.Seconds(), StopS: stop.Seconds()}, nil
}

// timedStop sends SIGTERM to the gateway and returns how long it took to exit; after stopBound
// it is killed and the stop reported failed.
func (g *controlGateway) timedStop() (time.Duration, error) {
	t0 := time.Now()
	if g.p.Stop(stopBound) {
		return 0, fmt.Errorf("meshgw did not stop within %s of SIGTERM (see %s)", stopBound, g.log)
	}
	return time.Since(t0), nil
}

// smallFleetRegistrations fills a state directory with registrationSmall records and measures
// registrations on it.
func smallFleetRegistrations(ctx context.Context, ps *procs, o *Options) (*RegistrationRate, error) {
	if _, err := fillState(ps, o, "state-small", registrationSmall); err != nil {
		return nil, err
	}
	g, err := startControlGateway(ps, o, "meshgw-reg-small", o.WorkDir+"/state-small")
	if err != nil {
		return nil, err
	}
	defer g.stop()
	if _, err := g.waitStatus(ctx, 60*time.Second, func(s gatewayStatus) bool {
		return s.Workers.Total == registrationSmall && s.Raft != nil && s.Raft.Leader == "bench"
	}); err != nil {
		return nil, err
	}
	return measureRegistrations(ctx, o, g, registrationSmall)
}
