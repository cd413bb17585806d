package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/meshgw/meshgw/ctxtime"
)

// The failover runs: three gateways on one host with the local mesh profile.
const (
	failoverGateways = 3
	failoverProfile  = "local"
	// failoverFormWithin bounds the start of the three gateways until g1 lists them alive with
	// a raft leader and three voters, and the registration of the workers.
	failoverFormWithin = 30 * time.Second
	// failoverWithin bounds the wait for the failover after the kill; past it the run fails.
	failoverWithin = 60 * time.Second
	// failoverPoll is how often g1's GET /mesh/owners is read after the kill.
	failoverPoll = 20 * time.Millisecond
)

// FailoverResult is the failover part of the mesh section: how long after an owner is killed
// with SIGKILL every one of its workers is owned again by a live gateway.
type FailoverResult struct {
	Status   string  `json:"status"` // "measured"
	Gateways int     `json:"gateways"`
	Workers  int     `json:"workers"`
	Profile  string  `json:"profile"`
	GraceS   float64 `json:"grace_s"`
	// RunsS is each run's seconds from the kill until g1 showed every worker moved.
	RunsS   []float64 `json:"runs_s"`
	MedianS float64   `json:"median_s"`
	MaxS    float64   `json:"max_s"`
	// KilledLeader says, per run, whether the killed owner was also the raft leader (its
	// failover then waits for an election as well).
	KilledLeader []bool `json:"killed_leader"`
	What         string `json:"what"`
}

// ownerRow is the part of a GET /mesh/owners row the failover reads.
type ownerRow struct {
	Worker string `json:"worker"`
	Owner  string `json:"owner"`
	Epoch  uint64 `json:"epoch"`
}

// parseOwners decodes a GET /mesh/owners answer.
func parseOwners(body []byte) ([]ownerRow, error) {
	var a struct {
		Owners *[]ownerRow `json:"owners"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, err
	}
	if a.Owners == nil {
		return nil, fmt.Errorf("no owners in %.200q", body)
	}
	return *a.Owners, nil
}

// ownedBy returns the epoch of each of the workers ids when every one of them is owned by
// owner in rows, and nil otherwise.
func ownedBy(rows []ownerRow, ids []string, owner string) map[string]uint64 {
	byID := make(map[string]ownerRow, len(rows))
	for _, r := range rows {
		byID[r.Worker] = r
	}
	epochs := make(map[string]uint64, len(ids))
	for _, id := range ids {
		r, ok := byID[id]
		if !ok || r.Owner != owner {
			return nil
		}
		epochs[id] = r.Epoch
	}
	return epochs
}

// allMoved reports whether every worker of before (id → epoch when the owner died) is in rows,
// owned by one of live, at a higher epoch.
func allMoved(rows []ownerRow, before map[string]uint64, live []string) bool {
	moved := 0
	for _, r := range rows {
		e, ok := before[r.Worker]
		if !ok {
			continue
		}
		isLive := false
		for _, l := range live {
			isLive = isLive || r.Owner == l
		}
		if !isLive || r.Epoch <= e {
			return false
		}
		moved++
	}
	return moved == len(before) && moved > 0
}

// failoverGW is one gateway of a failover run.
type failoverGW struct {
	controlGateway
	id   string
	mesh int // mesh port
}

// runFailover measures ownership failover runs times: three fresh gateways (g2 and g3 join g1),
// workers registered through g2, g2 killed with SIGKILL, and the time until g1 shows every
// worker owned by g1 or g3 at a higher epoch.
func runFailover(ctx context.Context, ps *procs, o *Options, workers, runs int, grace time.Duration) (*FailoverResult, error) {
	res := &FailoverResult{Status: "measured", Gateways: failoverGateways, Workers: workers,
		Profile: failoverProfile, GraceS: grace.Seconds(),
		What: fmt.Sprintf("%d meshgw on 127.0.0.1, --mesh-profile %s, --owner-failover-grace-secs %g; %d workers registered "+
			"through g2 (owned by g2); from kill -9 of g2 until g1's GET /mesh/owners shows every one owned by g1 or g3 "+
			"at a higher epoch (polled every %s)", failoverGateways, failoverProfile, grace.Seconds(), workers, failoverPoll)}
	if o.WorkDir == "" {
		return nil, errors.New("no work directory for the gateways' state")
	}
	for run := 1; run <= runs; run++ {
		o.Log.Info("mesh: ownership failover", "run", run, "workers", workers, "grace", grace)
		d, leader, err := failoverRun(ctx, ps, o, run, workers, grace)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", run, err)
		}
		res.RunsS = append(res.RunsS, float64(d.Milliseconds())/1000)
		res.KilledLeader = append(res.KilledLeader, leader)
	}
	res.MedianS = median(res.RunsS)
	for _, s := range res.RunsS {
		res.MaxS = max(res.MaxS, s)
	}
	return res, nil
}

// failoverRun is one run on fresh processes and state; it returns the failover time and
// whether the killed owner was the raft leader. Every gateway is stopped when it returns.
func failoverRun(ctx context.Context, ps *procs, o *Options, run, workers int, grace time.Duration) (time.Duration, bool, error) {
	var gws []*failoverGW
	defer func() {
		for _, g := range gws {
			if !g.p.Exited() {
				g.stop()
			}
		}
	}()
	for i := 1; i <= failoverGateways; i++ {
		var join []string
		if i > 1 {
			join = []string{"--join", "127.0.0.1:" + strconv.Itoa(gws[0].mesh)}
		}
		g, err := startFailoverGateway(ps, o, run, i, grace, join)
		if err != nil {
			return 0, false, err
		}
		gws = append(gws, g)
	}
	g1, owner := gws[0], gws[1]
	ctx1, cancel := context.WithTimeout(ctx, failoverFormWithin)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	leader, err := waitFormed(ctx1, client, g1, gws)
	if err != nil {
		return 0, false, err
	}
	ids, err := registerWorkers(ctx1, client, owner, workers)
	if err != nil {
		return 0, false, err
	}
	var before map[string]uint64
	if err := pollOwners(ctx1, client, g1, gws, 20*time.Millisecond, func(rows []ownerRow) bool {
		before = ownedBy(rows, ids, owner.id)
		return before != nil
	}); err != nil {
		return 0, false, fmt.Errorf("g1 never showed the %d workers owned by %s: %w", workers, owner.id, err)
	}

	if err := syscall.Kill(-owner.p.Pid(), syscall.SIGKILL); err != nil {
		return 0, false, fmt.Errorf("kill -9 %s: %w", owner.id, err)
	}
	killed := time.Now()
	ctx2, cancel2 := context.WithTimeout(ctx, failoverWithin)
	defer cancel2()
	live := []string{gws[0].id, gws[2].id}
	if err := pollOwners(ctx2, client, g1, []*failoverGW{gws[0], gws[2]}, failoverPoll, func(rows []ownerRow) bool {
		return allMoved(rows, before, live)
	}); err != nil {
		return 0, false, fmt.Errorf("the workers of the killed %s did not all move to %v: %w", owner.id, live, err)
	}
	return time.Since(killed), leader == owner.id, nil
}

// startFailoverGateway starts gateway gI of a run on free ports and its own state directory.
func startFailoverGateway(ps *procs, o *Options, run, i int, grace time.Duration, join []string) (*failoverGW, error) {
	var ports [4]int // http, mesh, raft, rpc
	for k := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[k] = p
	}
	id := "g" + strconv.Itoa(i)
	dir, err := tempStateDir(o, filepath.Join(fmt.Sprintf("failover-%d", run), id))
	if err != nil {
		return nil, err
	}
	args := append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--node-id", id,
		"--state-dir", dir, "--mesh-port", strconv.Itoa(ports[1]), "--raft-port", strconv.Itoa(ports[2]),
		"--rpc-port", strconv.Itoa(ports[3]), "--mesh-profile", failoverProfile,
		"--owner-failover-grace-secs", strconv.Itoa(int(grace.Seconds())), "--log-level", "warn",
		"--prometheus-port", "0", "--shutdown-settle-secs", "0"}, join...)
	name := fmt.Sprintf("failover-%d-%s", run, id)
	t0 := time.Now()
	p, err := ps.start(name, nil, o.MeshgwBin, args...)
	if err != nil {
		return nil, err
	}
	return &failoverGW{controlGateway: controlGateway{p: p, started: t0, log: filepath.Join(ps.dir, name+".log"),
		base: "http://127.0.0.1:" + strconv.Itoa(ports[0])}, id: id, mesh: ports[1]}, nil
}

// waitFormed waits until g lists every gateway of gws alive and sees a raft leader with as many
// voters, and returns the leader's node id.
func waitFormed(ctx context.Context, c *http.Client, g *failoverGW, gws []*failoverGW) (string, error) {
	for {
		var peers struct {
			Peers []struct{ ID, Status string } `json:"peers"`
		}
		var rf struct {
			Leader  string                          `json:"leader"`
			Servers []struct{ ID, Suffrage string } `json:"servers"`
		}
		if getJSON(ctx, c, g.base+"/mesh/peers", &peers) == nil && getJSON(ctx, c, g.base+"/mesh/raft", &rf) == nil && rf.Leader != "" {
			alive, voters := 0, 0
			for _, p := range peers.Peers {
				if p.Status == "alive" {
					alive++
				}
			}
			for _, s := range rf.Servers {
				if s.Suffrage == "voter" {
					voters++
				}
			}
			if alive == len(gws) && voters == len(gws) {
				return rf.Leader, nil
			}
		}
		if err := waitTick(ctx, gws, 20*time.Millisecond); err != nil {
			return "", fmt.Errorf("%d gateways alive with %d raft voters on g1: %w", len(gws), len(gws), err)
		}
	}
}

// registerWorkers registers n workers through g (POST /workers, so g owns them) and returns
// their ids. Their URLs are free loopback ports: nothing needs to answer there, as a worker's
// health does not decide its owner. A 503 (raft busy or electing) is retried until ctx ends.
func registerWorkers(ctx context.Context, c *http.Client, g *failoverGW, n int) ([]string, error) {
	seen := map[int]bool{}
	var ids []string
	for len(ids) < n {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if seen[port] {
			continue
		}
		seen[port] = true
		body := fmt.Sprintf(`{"url":"http://127.0.0.1:%d"}`, port)
		for {
			var rec struct {
				ID string `json:"id"`
			}
			err := send(ctx, c, http.MethodPost, g.base+"/workers", body, &rec)
			if err == nil && rec.ID != "" {
				ids = append(ids, rec.ID)
				break
			}
			// A 503 (raft busy or electing) or no answer at all is retried; another refusal is not.
			var se *statusError
			if err == nil || (errors.As(err, &se) && se.Code != http.StatusServiceUnavailable) {
				return nil, fmt.Errorf("POST /workers %s on %s: %v (answer id %q)", body, g.id, err, rec.ID)
			}
			if err := waitTick(ctx, []*failoverGW{g}, 50*time.Millisecond); err != nil {
				return nil, fmt.Errorf("registering worker %d of %d on %s: %w", len(ids)+1, n, g.id, err)
			}
		}
	}
	return ids, nil
}

// pollOwners reads g's GET /mesh/owners every interval until done accepts the rows, ctx ends,
// or a gateway of alive exits.
func pollOwners(ctx context.Context, c *http.Client, g *failoverGW, alive []*failoverGW, interval time.Duration, done func([]ownerRow) bool) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+"/mesh/owners", nil)
		if err != nil {
			return err
		}
		if resp, err := c.Do(req); err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				if rows, err := parseOwners(b); err == nil && done(rows) {
					return nil
				}
			}
		}
		if err := waitTick(ctx, alive, interval); err != nil {
			return err
		}
	}
}

// waitTick waits d, and fails if ctx ends or a gateway of gws exits first.
func waitTick(ctx context.Context, gws []*failoverGW, d time.Duration) error {
	for _, g := range gws {
		if g.p.Exited() {
			return fmt.Errorf("%s exited: %v (see %s)", g.id, g.p.Err(), g.log)
		}
	}
	return ctxtime.Sleep(ctx, d)
}
