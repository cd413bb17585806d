package breaker

import "time"

// The hang rule. An engine that hangs (it accepts requests and never answers, while its health
// endpoint still passes) is not caught by health checks, and the consecutive-failure threshold
// catches it only after that many requests each waited a whole request timeout. The rule opens
// the circuit sooner, from the outcomes every gateway reports to the worker's owner: once
// HangTimeouts requests, through any gateways, got no answer within the request timeout (T)
// while the worker answered no request at all during each one's wait.
//
// Why it does not take a long prefill for a hang: a slow engine still answers other requests.
// A request that times out counts only when the worker's last recorded answer (a Success, from
// any gateway) is older than T less hangSlack, that is, when nothing came back from the worker
// for the whole time the request waited; any answer resets the count. An engine busy with long
// prefills, or long non-streamed answers, that still answers now and then, is left to the
// consecutive-failure threshold. What trips it is an engine that answered nobody for a whole
// request timeout, twice. A Success is recorded when its request ends (a stream, at its last
// event), so an answer looks later than its first byte: that only makes the rule slower to
// trip, never quicker.
const (
	// HangTimeouts is how many timed-out requests, each in a silence of the worker, open the
	// circuit.
	HangTimeouts = 2
	// hangSlack is taken off T when judging whether a timed-out request waited in silence:
	// outcome reports reach the owner up to a flush interval (100 ms) late, so the success of a
	// request answered just before another was sent may be recorded just after.
	hangSlack = 500 * time.Millisecond
)

// hangWatch is the hang rule's state for one worker: when it last answered and how many
// requests timed out since, each in silence.
type hangWatch struct {
	answered time.Time // the last Success recorded; zero: none since the watch began
	silent   int
}

// next returns the watch after outcome o recorded at now, with T the request timeout, and
// whether the worker is judged hung: the HangTimeouts-th request that timed out in silence.
// Judging hung starts the count again. A T of 0 judges nothing.
func (h hangWatch) next(o Outcome, now time.Time, t time.Duration) (hangWatch, bool) {
	switch o {
	case Success:
		return hangWatch{answered: now}, false
	case TimedOut:
		if t <= 0 {
			return h, false
		}
		quiet := t - min(hangSlack, t/2)
		if !h.answered.IsZero() && now.Sub(h.answered) < quiet {
			return h, false // the worker answered someone while this request waited
		}
		h.silent++
		if h.silent >= HangTimeouts {
			return hangWatch{answered: h.answered}, true
		}
	}
	return h, false
}
