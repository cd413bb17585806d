package chaos

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/test/chaos/check"
	"github.com/meshgw/meshgw/test/chaos/cluster"
	"github.com/meshgw/meshgw/test/chaos/history"
	"github.com/meshgw/meshgw/test/chaos/workload"
)

// RegionCut is the measurement of one region cut of a run over a simulated WAN (issue 29's
// targets: the cut region serves every request its own workers can, its writes fail within
// 1 s with the no-quorum answer, and the fleet converges within 10 s of the heal).
type RegionCut struct {
	Region     string   `json:"region"`
	Gateways   []string `json:"gateways"`
	HeldLeader bool     `json:"held_leader"` // the region held the raft leader when it was cut
	FromS      float64  `json:"from_s"`
	HoldS      float64  `json:"hold_s"`
	// Requests are the client requests through the region's gateways sent during the cut, by
	// class (gateway_down: a process fault held their gateway).
	Requests check.Requests `json:"requests"`
	// ServedShare is ok / (ok + failed_gateway) of Requests: of the requests a running gateway
	// had a worker for, the share served.
	ServedShare float64 `json:"served_share"`
	// ServedLocal is how many of the ok requests the region's own workers served; LostAway how
	// many failed_gateway requests named a worker of another region (X-Mesh-Worker): its own
	// workers were not routable for them (disabled, open-circuited, hung) and they spilled into
	// the cut; LostFaulted how many others an engine fault of the nemesis explains (engine_hang,
	// engine_error: not a healthy worker). HomeShare is ServedLocal / (ServedLocal + the other
	// failed_gateway requests): of the requests the region's own healthy workers were there for,
	// the share they served (target 1).
	ServedLocal int     `json:"served_local"`
	LostAway    int     `json:"lost_away"`
	LostFaulted int     `json:"lost_faulted"`
	HomeShare   float64 `json:"home_share"`
	// Writes are the writes (an enable of a worker record) sent through the region's gateways
	// during the cut, one after another per gateway; NoQuorum of them answered 503 no_leader
	// (no leader: the gateway cannot reach a quorum), FirstNoQuorumS after the cut the first
	// (-1: none), with those answers' median and slowest time; OtherWrites counts the other
	// answers by "status code".
	Writes         int            `json:"writes"`
	NoQuorum       int            `json:"writes_no_quorum"`
	FirstNoQuorumS float64        `json:"first_no_quorum_s"`
	NoQuorumP50Ms  float64        `json:"no_quorum_p50_ms"`
	NoQuorumMaxMs  float64        `json:"no_quorum_max_ms"`
	OtherWrites    map[string]int `json:"writes_other,omitempty"`
	OtherMaxMs     float64        `json:"other_max_ms,omitempty"`
	// Unanswered counts the writes still waiting when the cut healed (they are then cut
	// short), UnansweredMaxS the longest of their waits.
	Unanswered     int     `json:"writes_unanswered"`
	UnansweredMaxS float64 `json:"unanswered_max_s,omitempty"`
	// ConvergedS is the time from the heal until every running gateway named one leader, listed
	// the region's gateways alive, and listed the same records; -1 when not within convergeCut.
	ConvergedS float64 `json:"converged_s"`

	noQuorum, otherTook []time.Duration
}

// convergeCut bounds the wait for the fleet to converge after a region cut healed.
const convergeCut = 60 * time.Second

// writeGap is the pause between two writes of one gateway's probe during a cut.
const writeGap = 250 * time.Millisecond

// cutClient numbers the probe writes' admin client of gateway i (from 0) in the history.
func cutClient(i int) int { return 40 + i }

// cutWatch measures the region cuts of a run as they happen (the nemesis's OnCut): writes
// through the cut region's gateways, and the fleet's convergence after the heal. The served
// share comes from the history afterwards (measureCuts).
type cutWatch struct {
	ctx     context.Context
	c       *cluster.Cluster
	admin   *workload.Admin
	rec     *history.Recorder
	target  workload.Worker   // the record the probe writes enable
	workers []workload.Worker // the records whose lists must agree

	mu   sync.Mutex
	cuts []*RegionCut
	wg   sync.WaitGroup
}

// onCut starts the probe writes through the cut region's gateways; the function it returns
// stops them and measures the convergence in the background (wait ends it).
func (w *cutWatch) onCut(region string, gws []*cluster.Node) func() {
	start := time.Now()
	leader := w.c.Leader()
	rc := &RegionCut{Region: region, Gateways: nodeIDs(gws), FromS: w.rec.Now().Seconds(), FirstNoQuorumS: -1,
		OtherWrites: map[string]int{}, ConvergedS: -1}
	rc.HeldLeader = slices.Contains(rc.Gateways, leader)
	w.mu.Lock()
	w.cuts = append(w.cuts, rc)
	w.mu.Unlock()
	ctx, stop := context.WithCancel(w.ctx)
	var probes sync.WaitGroup
	for _, g := range gws {
		i := slices.Index(w.c.Nodes, g)
		probes.Go(func() { w.probe(ctx, rc, start, g, cutClient(i)) })
	}
	return func() {
		healed := time.Now()
		stop()
		probes.Wait()
		w.mu.Lock()
		rc.HoldS = healed.Sub(start).Seconds()
		w.mu.Unlock()
		w.wg.Go(func() {
			if w.converged(w.ctx, gws) {
				w.mu.Lock()
				rc.ConvergedS = math.Round(time.Since(healed).Seconds()*1000) / 1000
				w.mu.Unlock()
			}
		})
	}
}

// probe sends a write through node every writeGap until ctx ends (the heal), each on its own
// (one that hangs holds up none of the next), at most maxInFlight at once, and counts their
// answers into rc. A write still unanswered at the heal is counted apart, with its wait. One
// sent while a process fault held the gateway (killed, stopped) is left out: it measures the
// cut, not the fault.
func (w *cutWatch) probe(ctx context.Context, rc *RegionCut, start time.Time, node *cluster.Node, client int) {
	g := workload.Gateway{ID: node.ID, URL: node.URL()}
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	slots := make(chan struct{}, maxInFlight)
	for i := 0; i < workload.MaxPerLoop && ctx.Err() == nil; i++ {
		if node.Running() {
			select {
			case slots <- struct{}{}:
				inFlight.Go(func() {
					defer func() { <-slots }()
					w.write(ctx, rc, start, node, g, client)
				})
			default: // maxInFlight writes wait already: the next tick tries again
			}
		}
		ctxtime.Sleep(ctx, writeGap)
	}
}

// maxInFlight bounds one gateway's probe writes waiting at once during a cut.
const maxInFlight = 64

// write sends one probe write and counts its answer.
func (w *cutWatch) write(ctx context.Context, rc *RegionCut, start time.Time, node *cluster.Node, g workload.Gateway, client int) {
	sent := time.Now()
	op := w.admin.Do(ctx, client, history.Enable, w.target, g)
	took := time.Since(sent)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		rc.Unanswered++
		rc.UnansweredMaxS = max(rc.UnansweredMaxS, math.Round(took.Seconds()*1000)/1000)
	case !node.Running() || w.rec.IsDown(node.ID):
	case op.Status == 503 && op.Code == "no_leader":
		rc.Writes++
		rc.NoQuorum++
		rc.noQuorum = append(rc.noQuorum, took)
		if at := time.Since(start).Seconds(); rc.FirstNoQuorumS < 0 || at < rc.FirstNoQuorumS {
			rc.FirstNoQuorumS = math.Round(at*1000) / 1000
		}
	default:
		rc.Writes++
		rc.OtherWrites[strings.TrimSpace(fmt.Sprintf("%d %s", op.Status, op.Code))]++
		rc.otherTook = append(rc.otherTook, took)
	}
}

// converged waits until every running gateway names one leader, lists each of gws alive, and
// lists the same records (up to convergeCut); false when it did not.
func (w *cutWatch) converged(ctx context.Context, gws []*cluster.Node) bool {
	deadline := time.Now().Add(convergeCut)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if w.agree(gws) {
			return true
		}
		ctxtime.Sleep(ctx, 100*time.Millisecond)
	}
	return false
}

func (w *cutWatch) agree(gws []*cluster.Node) bool {
	leader := ""
	views := map[string]map[string]history.Final{}
	running := 0
	for _, n := range w.c.Nodes {
		if !n.Running() {
			continue
		}
		running++
		var r cluster.Raft
		var p cluster.Peers
		if !cluster.GetJSON(n.URL()+"/mesh/raft", &r) || r.Leader == "" || (leader != "" && r.Leader != leader) ||
			!cluster.GetJSON(n.URL()+"/mesh/peers", &p) {
			return false
		}
		leader = r.Leader
		for _, g := range gws {
			if !slices.ContainsFunc(p.Peers, func(peer cluster.Peer) bool {
				return peer.ID == g.ID && peer.Status == "alive" && !peer.Rejoining
			}) {
				return false
			}
		}
		v, ok := list(workload.Gateway{ID: n.ID, URL: n.URL()}, w.workers)
		if !ok {
			return false
		}
		views[n.ID] = v
	}
	return running > 0 && agree(views, running)
}

// wait waits for the convergence measurements still running.
func (w *cutWatch) wait() { w.wg.Wait() }

// measureCuts completes the cuts' measurements with their requests from the history: those
// through the cut region's gateways sent during the cut. workerRegion maps a
// worker id to its engine's region.
func (w *cutWatch) measureCuts(h history.History, workerRegion map[string]string) []RegionCut {
	w.mu.Lock()
	defer w.mu.Unlock()
	type key struct {
		gateway string
		invoke  time.Duration
		stream  bool
	}
	causes := map[key]string{}
	for _, l := range check.Losses(h, cluster.RequestTimeout) {
		causes[key{l.Request.Gateway, l.Request.Invoke, l.Request.Stream}] = l.Cause
	}
	out := make([]RegionCut, 0, len(w.cuts))
	for i, rc := range w.cuts {
		r := *rc
		if i < len(h.Cuts) {
			c := h.Cuts[i]
			lostHome := 0
			for _, q := range h.Requests {
				if !slices.Contains(c.Gateways, q.Gateway) || q.Invoke < c.From || q.Invoke > c.To {
					continue
				}
				one := h
				one.Requests = []history.Request{q}
				n := check.CountRequests(one)
				r.Requests.OK += n.OK
				r.Requests.NoWorker += n.NoWorker
				r.Requests.Drained += n.Drained
				r.Requests.GatewayLost += n.GatewayLost
				r.Requests.GatewayDown += n.GatewayDown
				home := q.Worker == "" || workerRegion[q.Worker] == c.Region
				switch {
				case n.OK == 1 && home && q.Worker != "":
					r.ServedLocal++
				case n.GatewayLost == 1 && !home:
					r.LostAway++
				case n.GatewayLost == 1:
					switch causes[key{q.Gateway, q.Invoke, q.Stream}] {
					case check.CauseEngineHang, check.CauseEngineError:
						r.LostFaulted++
					default:
						lostHome++
					}
				}
			}
			r.ServedShare = share(r.Requests.OK, r.Requests.OK+r.Requests.GatewayLost)
			r.HomeShare = share(r.ServedLocal, r.ServedLocal+lostHome)
		}
		if len(r.noQuorum) > 0 {
			d := slices.Clone(r.noQuorum)
			sort.Slice(d, func(a, b int) bool { return d[a] < d[b] })
			r.NoQuorumP50Ms = ms(d[len(d)/2])
			r.NoQuorumMaxMs = ms(d[len(d)-1])
		}
		if len(r.otherTook) > 0 {
			r.OtherMaxMs = ms(slices.Max(r.otherTook))
		}
		r.noQuorum, r.otherTook = nil, nil
		out = append(out, r)
	}
	return out
}

// share is n/of to 4 places, 0 when of is 0.
func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return math.Round(float64(n)/float64(of)*10000) / 10000
}

func ms(d time.Duration) float64 { return math.Round(d.Seconds()*10000) / 10 }

func nodeIDs(nodes []*cluster.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// printCuts writes a line per region cut.
func printCuts(w io.Writer, cuts []RegionCut) {
	for _, c := range cuts {
		leader := ""
		if c.HeldLeader {
			leader = ", held the leader"
		}
		first := "none"
		if c.FirstNoQuorumS >= 0 {
			first = fmt.Sprintf("first %.2fs after the cut", c.FirstNoQuorumS)
		}
		other := "none"
		if len(c.OtherWrites) > 0 {
			var parts []string
			for _, k := range sortedKeys(c.OtherWrites) {
				parts = append(parts, fmt.Sprintf("%s ×%d", k, c.OtherWrites[k]))
			}
			other = strings.Join(parts, ", ")
		}
		converged := "not within 60s"
		if c.ConvergedS >= 0 {
			converged = fmt.Sprintf("%.2fs", c.ConvergedS)
		}
		if c.OtherMaxMs > 0 {
			other += fmt.Sprintf(" (slowest %.0fms)", c.OtherMaxMs)
		}
		fmt.Fprintf(w, "region cut %s (%s) at %.1fs for %.1fs%s: served %.4f of %d, its own workers %.4f (%d served; %d spilled away and lost, %d lost to engine faults), "+
			"%d no worker, %d gateway down; writes answered %d, %d no quorum (%s, p50 %.0fms, max %.0fms), other %s; "+
			"%d unanswered at the heal (the longest waiting %.1fs); converged %s after the heal\n",
			c.Region, strings.Join(c.Gateways, ","), c.FromS, c.HoldS, leader, c.ServedShare, c.Requests.OK+c.Requests.GatewayLost,
			c.HomeShare, c.ServedLocal, c.LostAway, c.LostFaulted, c.Requests.NoWorker, c.Requests.GatewayDown, c.Writes, c.NoQuorum, first,
			c.NoQuorumP50Ms, c.NoQuorumMaxMs, other, c.Unanswered, c.UnansweredMaxS, converged)
	}
}
