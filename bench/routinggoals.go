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
// failed. An open loop (-routing-session-rate) gives the figures alone too: the targets are
// read on the standard workload's closed loop, and under an open one both policies serve the
// same offered rate.
func routingGoals(v any) []Goal {
	r, ok := v.(RoutingResult)
	if !ok {
		return nil
	}
	row := func(policy string, g int) *RoutingRow {
		for i := range r.Rows {
			if x := &r.Rows[i]; x.Policy == policy && x.Gateways == g && x.Error == "" && x.Requests > 0 {
				return x
			}
		}
		return nil
	}
	g := 0
	for _, x := range r.Rows {
		if x.Gateways > g && row(routingGoalPolicy, x.Gateways) != nil && row(routingGoalBaselinePolicy, x.Gateways) != nil {
			g = x.Gateways
		}
	}
	if g == 0 {
		return nil
	}
	ca, rr, one := row(routingGoalPolicy, g), row(routingGoalBaselinePolicy, g), row(routingGoalPolicy, 1)
	verdict := func(ok bool) *bool {
		if g < goalRoutingGateways || r.SessionRate > 0 {
			return nil
		}
		return met(ok)
	}
	gateways := "gateways"
	if g == 1 {
		gateways = "gateway"
	}
	loop := ""
	if r.SessionRate > 0 {
		loop = fmt.Sprintf(", open loop of %g sessions/s", r.SessionRate)
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
	return append(gs,
		Goal{name("TTFT p50 ÷ round_robin's"), fmt.Sprintf("%.2f (%.0f ÷ %.0f ms; means %.0f ÷ %.0f ms)", p50, ca.TTFTP50Ms, rr.TTFTP50Ms, ca.TTFTMeanMs, rr.TTFTMeanMs),
			fmt.Sprintf("≤ %.2f", goalRoutingTTFTP50Ratio), verdict(rr.TTFTP50Ms > 0 && p50 <= goalRoutingTTFTP50Ratio)},
		Goal{name("TTFT p99"), fmt.Sprintf("%.0f ms (round_robin %.0f ms)", ca.TTFTP99Ms, rr.TTFTP99Ms),
			"≤ round_robin's", verdict(ca.TTFTP99Ms <= rr.TTFTP99Ms)},
		Goal{name("req/s ÷ round_robin's"), fmt.Sprintf("%.2f (%.0f ÷ %.0f)", tput, ca.RequestsPerSec, rr.RequestsPerSec),
			fmt.Sprintf("≥ %.1f", goalRoutingThroughput), verdict(tput >= goalRoutingThroughput)},
		Goal{name("CoV of requests per engine"), fmt.Sprintf("%.2f", ca.RequestsCoV),
			fmt.Sprintf("≤ %.2f", goalRoutingCoV), verdict(ca.RequestsCoV <= goalRoutingCoV)})
}
