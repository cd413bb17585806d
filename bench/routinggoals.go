package bench

import "fmt"

// The goals of the routing section (issue 28's "done when"): at goalRoutingGateways gateways,
// cache_aware against round_robin on the standard workload.
const (
	goalRoutingGateways       = 5
	goalFollowUpsShare        = 0.85 // follow-ups served from cache, absolute
	goalFollowUpsOfOne        = 0.95 // follow-ups served from cache ÷ cache_aware's at 1 gateway
	goalRoutingTTFTP50Ratio   = 0.5  // TTFT p50 ÷ round_robin's, at most
	goalRoutingThroughput     = 1.2  // req/s ÷ round_robin's, at least
	goalRoutingCoV            = 0.15 // CoV of requests per engine, at most
	routingGoalPolicy         = "cache_aware"
	routingGoalBaselinePolicy = "round_robin"
)

// routingGoals are the goal rows of the routing section, read at the largest gateway count
// with both a cache_aware and a round_robin row: a verdict only at goalRoutingGateways
// gateways or more (a quick run's 3 gives the figures alone), and none for a figure whose row
// failed. The open loop's rows follow, its TTFT and follow-ups alone and without a verdict: the
// targets are read on the standard workload's closed loop (under an open one both policies
// serve the offered rate).
func routingGoals(v any) []Goal {
	r, ok := v.(RoutingResult)
	if !ok {
		return nil
	}
	gs := loopGoals(r.Rows, 0)
	if r.OpenLoop != nil {
		gs = append(gs, loopGoals(r.OpenLoop.Rows, r.OpenLoop.SessionRate)...)
	}
	return gs
}

// loopGoals are the goal rows of one loop's rows: the closed loop's (rate 0), or the open
// loop's at rate sessions per second.
func loopGoals(rows []RoutingRow, rate float64) []Goal {
	row := func(policy string, g int) *RoutingRow {
		for i := range rows {
			if x := &rows[i]; x.Policy == policy && x.Gateways == g && x.Error == "" && x.Requests > 0 {
				return x
			}
		}
		return nil
	}
	g := 0
	for _, x := range rows {
		if x.Gateways > g && row(routingGoalPolicy, x.Gateways) != nil && row(routingGoalBaselinePolicy, x.Gateways) != nil {
			g = x.Gateways
		}
	}
	if g == 0 {
		return nil
	}
	ca, rr, one := row(routingGoalPolicy, g), row(routingGoalBaselinePolicy, g), row(routingGoalPolicy, 1)
	verdict := func(ok bool) *bool {
		if g < goalRoutingGateways || rate > 0 {
			return nil
		}
		return met(ok)
	}
	gateways := "gateways"
	if g == 1 {
		gateways = "gateway"
	}
	loop := ""
	if rate > 0 {
		loop = fmt.Sprintf(", open loop of %g sessions/s", rate)
	}
	name := func(what string) string { return fmt.Sprintf("cache_aware %s, %d %s%s", what, g, gateways, loop) }
	gs := []Goal{{name("follow-ups cached"), fmt.Sprintf("%.2f (%d of %d)", ca.FollowUpShare, ca.FollowUpsCached, ca.FollowUps),
		fmt.Sprintf("≥ %.2f", goalFollowUpsShare), verdict(ca.FollowUpShare >= goalFollowUpsShare)}}
	if one != nil && g > 1 && one.FollowUpsCached > 0 {
		ratio := float64(ca.FollowUpsCached) / float64(one.FollowUpsCached)
		gs = append(gs, Goal{name("follow-ups cached ÷ 1 gateway's"), fmt.Sprintf("%.3f (%d ÷ %d)", ratio, ca.FollowUpsCached, one.FollowUpsCached),
			fmt.Sprintf("≥ %.2f", goalFollowUpsOfOne), verdict(ratio >= goalFollowUpsOfOne)})
	}
	p50 := safeDiv(ca.TTFTP50Ms, rr.TTFTP50Ms)
	tput := safeDiv(ca.RequestsPerSec, rr.RequestsPerSec)
	gs = append(gs,
		Goal{name("TTFT p50 ÷ round_robin's"), fmt.Sprintf("%.2f (%.0f ÷ %.0f ms; means %.0f ÷ %.0f ms)", p50, ca.TTFTP50Ms, rr.TTFTP50Ms, ca.TTFTMeanMs, rr.TTFTMeanMs),
			fmt.Sprintf("≤ %.2f", goalRoutingTTFTP50Ratio), verdict(rr.TTFTP50Ms > 0 && p50 <= goalRoutingTTFTP50Ratio)},
		Goal{name("TTFT p99"), fmt.Sprintf("%.0f ms (round_robin %.0f ms)", ca.TTFTP99Ms, rr.TTFTP99Ms),
			"≤ round_robin's", verdict(ca.TTFTP99Ms <= rr.TTFTP99Ms)})
	if rate > 0 { // the offered rate sets the throughput, and spare engines may take uneven shares
		return gs
	}
	return append(gs,
		Goal{name("req/s ÷ round_robin's"), fmt.Sprintf("%.2f (%.0f ÷ %.0f)", tput, ca.RequestsPerSec, rr.RequestsPerSec),
			fmt.Sprintf("≥ %.1f", goalRoutingThroughput), verdict(tput >= goalRoutingThroughput)},
		Goal{name("CoV of requests per engine"), fmt.Sprintf("%.2f", ca.RequestsCoV),
			fmt.Sprintf("≤ %.2f", goalRoutingCoV), verdict(ca.RequestsCoV <= goalRoutingCoV)})
}
