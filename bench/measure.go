package bench

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	"github.com/meshgw/meshgw/bench/engine"
	"github.com/meshgw/meshgw/test/proc"
)

var execCommand = exec.CommandContext

// usPer returns cpu in µs divided by n, or nil when n is 0.
func usPer(cpu time.Duration, n int64) *float64 {
	if n <= 0 {
		return nil
	}
	v := float64(cpu.Microseconds()) / float64(n)
	return &v
}

// measureProxy runs wrk against each target, interleaved: round r measures the targets in the
// order rotated by r. A one-second warm-up per target comes first (not in a quick run) and is
// not recorded. After
// each target's loaded run comes a run over one connection, which shows the added latency
// without the queueing of a saturated machine.
func measureProxy(ctx context.Context, ps *procs, o *Options, ts []target, ups []*proc.Proc, rep *Report) error {
	var upPIDs []int
	for _, p := range ups {
		upPIDs = append(upPIDs, p.Pid())
	}
	wo := WrkOptions{Bin: o.WrkBin, Threads: o.Threads, Connections: o.Connections, Marker: engine.CompletionMarker, Dir: o.WorkDir}
	for _, t := range ts {
		if o.Quick {
			break
		}
		w := wo
		w.URL, w.Duration = t.url+chatPath, time.Second
		if _, out, err := RunWrk(ctx, w); err != nil {
			return fmt.Errorf("warm-up of %s: %w\n%s", t.name, err, out)
		}
	}
	rounds := map[string][]ProxyRound{}
	single := map[string][]WrkResult{} // the one-connection runs
	for r := range o.Rounds {
		for _, t := range roundOrder(ts, r) {
			o.Log.Info("wrk", "target", t.name, "round", r+1, "of", o.Rounds, "seconds", o.Duration.Seconds())
			w := wo
			w.URL, w.Duration = t.url+chatPath, o.Duration
			pr, err := loadedRun(ctx, ps, w, t, upPIDs)
			if err != nil {
				return err
			}
			rounds[t.name] = append(rounds[t.name], pr)
			one := wo
			one.URL, one.Duration, one.Threads, one.Connections = t.url+chatPath, o.OneConnDuration, 1, 1
			res1, out, err := RunWrk(ctx, one)
			if err != nil {
				return fmt.Errorf("wrk -c1 against %s: %w\n%s", t.name, err, out)
			}
			single[t.name] = append(single[t.name], res1)
		}
	}
	for name, rs := range rounds {
		rep.Proxy[name] = summarizeProxy(rs)
		rep.Proxy[name].OneConn = summarizeOneConn(single[name])
	}
	return nil
}

// loadedRun runs wrk once against t and measures the CPU the proxy, the engines and everything
// else used meanwhile.
func loadedRun(ctx context.Context, ps *procs, w WrkOptions, t target, upPIDs []int) (ProxyRound, error) {
	upCPU := startCPU(upPIDs...)
	var proxyCPU *cpuMeter
	if t.proxy != nil {
		proxyCPU = startCPU(t.proxy.Pid())
	}
	others := ps.startOthers()
	res, out, err := RunWrk(ctx, w)
	if err != nil {
		return ProxyRound{}, fmt.Errorf("wrk against %s: %w\n%s", t.name, err, out)
	}
	if !res.CheckLoaded {
		return ProxyRound{}, fmt.Errorf("wrk against %s printed no BENCH_CHECK line; is LuaJIT's done() running?\n%s", t.name, out)
	}
	pr := ProxyRound{WrkResult: res, OthersCores: others.stop()}
	if proxyCPU != nil {
		use := proxyCPU.stopUse()
		pr.CPUUsPerReq, pr.CPUUserUsPerReq = usPer(use.total(), res.Checked), usPer(use.user, res.Checked)
	}
	if v := usPer(upCPU.stop(), res.Checked); v != nil {
		pr.UpstreamCPUUsPerReq = *v
	}
	return pr, nil
}

// measureStreams runs the streaming load against each target, interleaved like measureProxy,
// then the paced check through each.
func measureStreams(ctx context.Context, ps *procs, o *Options, ts []target, rep *Report) error {
	s := &StreamSection{Paced: map[string]*StreamResult{}, PacedDelayMs: int(o.PacedDelay.Milliseconds()), PacedEvents: o.PacedEvents}
	rounds := map[string][]StreamRound{}
	for r := range o.StreamRounds {
		for _, t := range roundOrder(ts, r) {
			name := t.name
			o.Log.Info("streams", "target", name, "round", r+1, "of", o.StreamRounds, "seconds", o.StreamDuration.Seconds())
			var cpu *cpuMeter
			if t.proxy != nil {
				cpu = startCPU(t.proxy.Pid())
			}
			others := ps.startOthers()
			res := RunStreams(ctx, StreamOptions{URL: t.url + chatPath, Streams: o.Streams, Duration: o.StreamDuration, Events: o.StreamEvents})
			sr := StreamRound{StreamResult: res, OthersCores: others.stop()}
			if cpu != nil {
				sr.CPUUsPerStream = usPer(cpu.stop(), res.Completed)
			}
			rounds[name] = append(rounds[name], sr)
		}
	}
	for name, rs := range rounds {
		s.setTarget(name, summarizeStream(rs))
	}
	h := http.Header{}
	h.Set(engine.HeaderEventDelayMs, strconv.Itoa(s.PacedDelayMs))
	h.Set(engine.HeaderEvents, strconv.Itoa(o.PacedEvents))
	for _, t := range ts {
		o.Log.Info("paced streams", "target", t.name)
		// Four streams, one each: bounded in count, and in time by the per-stream timeout.
		res := RunStreams(ctx, StreamOptions{URL: t.url + chatPath, Streams: 4, MaxStreams: 4, Duration: time.Minute,
			Events: o.PacedEvents, Header: h, RecordGaps: true, Timeout: 30 * time.Second})
		s.Paced[t.name] = &res
	}
	rep.Stream = s
	return ctx.Err()
}
