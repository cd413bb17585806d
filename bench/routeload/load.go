package routeload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/meshgw/meshgw/ctxtime"
)

// Options configure a load. Zero fields take the defaults in their comments.
type Options struct {
	// Gateways are the base URLs the turns are sprayed over, uniformly at random. Required.
	Gateways []string
	// Model is the model the requests name ("fake-model").
	Model string
	// InFlight is how many sessions run at once (96); each sends its turns one after another,
	// with no pause between them: a closed loop, whose rate is what the fleet serves.
	InFlight int
	// SessionRate, above 0, makes the load an open loop instead: sessions start at this rate
	// per second, at exponentially distributed intervals (Poisson arrivals), each playing its
	// turns one after another however many others are running, so the offered rate is the
	// same under every policy (InFlight is unused).
	SessionRate float64
	// Sleep waits d, or until ctx ends with its error: the open loop's pacing. nil waits on a
	// timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// FollowUpMatch is the share of the previous turn's prompt tokens a follow-up turn's cached
	// tokens must reach for it to count as served from cache (0.9).
	FollowUpMatch float64
	// RequestTimeout bounds one turn (60 s); Deadline bounds the whole load (10 min).
	RequestTimeout, Deadline time.Duration
	// Seed seeds the gateway picks.
	Seed uint64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o *Options) setDefaults() {
	if o.Model == "" {
		o.Model = "fake-model"
	}
	if o.InFlight <= 0 {
		o.InFlight = 96
	}
	if o.FollowUpMatch <= 0 {
		o.FollowUpMatch = 0.9
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = time.Minute
	}
	if o.Deadline <= 0 {
		o.Deadline = 10 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = ctxtime.Sleep
	}
}

// Result is what a load measured, from the client's side and the engines' answers.
type Result struct {
	// Requests counts the turns answered in full; Failed the turns that were not (a failed turn
	// ends its session), Unsent the turns of sessions ended early or never started.
	Requests   int    `json:"requests"`
	Failed     int    `json:"failed"`
	Unsent     int    `json:"unsent"`
	FirstError string `json:"first_error,omitempty"`
	// PromptTokens and CachedTokens sum the engines' usage; CachedShare is their ratio.
	PromptTokens int64   `json:"prompt_tokens"`
	CachedTokens int64   `json:"cached_tokens"`
	CachedShare  float64 `json:"cached_share"`
	// FollowUps counts answered turns after a session's first; FollowUpsCached those whose
	// cached tokens reached FollowUpMatch of the previous turn's prompt tokens; FollowUpShare is
	// their ratio.
	FollowUps       int     `json:"follow_ups"`
	FollowUpsCached int     `json:"follow_ups_cached"`
	FollowUpShare   float64 `json:"follow_up_share"`
	// TTFT is the time from sending a turn to its first SSE event, over every answered turn.
	// Its mean is what compares with the engines' mean wait and prefill: the difference is the
	// time a turn spends outside the engine (client, gateway, network) before its first event.
	TTFTP50Ms  float64 `json:"ttft_p50_ms"`
	TTFTP99Ms  float64 `json:"ttft_p99_ms"`
	TTFTMeanMs float64 `json:"ttft_mean_ms"`
	// RequestsPerSec is Requests over DurationS, the time from the first turn sent to the last
	// answer.
	RequestsPerSec float64 `json:"requests_per_s"`
	DurationS      float64 `json:"duration_s"`
}

// tally is one session runner's counts, merged at the end.
type tally struct {
	requests, failed, unsent  int
	prompt, cached            int64
	followUps, followUpsCache int
	ttft                      []time.Duration
	firstErr                  error
}

func (t *tally) merge(o *tally) {
	t.requests += o.requests
	t.failed += o.failed
	t.unsent += o.unsent
	t.prompt += o.prompt
	t.cached += o.cached
	t.followUps += o.followUps
	t.followUpsCache += o.followUpsCache
	t.ttft = append(t.ttft, o.ttft...)
	if t.firstErr == nil {
		t.firstErr = o.firstErr
	}
}

// Run plays every session of s, o.InFlight at a time or, with o.SessionRate, starting at that
// rate, and returns what it measured. It stops early when ctx ends or o.Deadline passes; the
// turns left count as unsent.
func Run(ctx context.Context, s Script, o Options) Result {
	o.setDefaults()
	if len(o.Gateways) == 0 {
		return Result{FirstError: "no gateway to send to", Unsent: turnsOf(s)}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Deadline)
	defer cancel()
	// Runners play the sessions they take from next, one after another: InFlight of them in
	// the closed loop, where next holds every session from the start; one for each session in
	// the open loop, where next gets each session at its arrival, so none waits for a runner.
	runners := o.InFlight
	if o.SessionRate > 0 {
		runners = len(s.Sessions)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: runners, DisableCompression: true, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	c := &client{http: &http.Client{Transport: tr}, model: o.Model, timeout: o.RequestTimeout, now: o.Now}
	next := make(chan int, len(s.Sessions))
	var mu sync.Mutex
	var all tally
	var wg sync.WaitGroup
	start := o.Now()
	for w := range runners {
		wg.Go(func() {
			var t tally
			defer func() {
				if p := recover(); p != nil { // a harness bug: report it, with its stack
					t.failed++
					t.firstErr = fmt.Errorf("session runner panicked: %v\n%s", p, debug.Stack())
				}
				mu.Lock()
				all.merge(&t)
				mu.Unlock()
			}()
			rng := rand.New(rand.NewPCG(o.Seed, uint64(w)))
			for i := range next {
				if ctx.Err() != nil {
					t.unsent += len(s.Sessions[i].Users)
					continue
				}
				c.session(ctx, s.Systems[s.Sessions[i].System], s.Sessions[i], o, rng, &t)
			}
		})
	}
	unstarted := feed(ctx, next, s, o)
	close(next)
	wg.Wait()
	all.unsent += unstarted
	return all.result(o.Now().Sub(start))
}

// feed puts the sessions of s into next: all at once in the closed loop, each at its arrival
// in the open loop. When the open loop's wait fails (ctx ended), it stops and returns the
// turns of the sessions it did not start.
func feed(ctx context.Context, next chan<- int, s Script, o Options) (unstarted int) {
	arrivals := rand.New(rand.NewPCG(o.Seed, 0xa771))
	for i := range s.Sessions {
		if o.SessionRate > 0 && i > 0 && o.Sleep(ctx, interarrival(arrivals, o.SessionRate)) != nil {
			return turnsOf(Script{Sessions: s.Sessions[i:]})
		}
		next <- i
	}
	return 0
}

// interarrival draws the time to the next session's start, exponential with mean 1/rate
// seconds, so that sessions arrive as a Poisson process.
func interarrival(rng *rand.Rand, rate float64) time.Duration {
	return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
}

func turnsOf(s Script) int {
	n := 0
	for _, ss := range s.Sessions {
		n += len(ss.Users)
	}
	return n
}

// session plays one conversation's turns in order, each through a gateway rng picks; a failed
// turn ends it.
func (c *client) session(ctx context.Context, system string, ss Session, o Options, rng *rand.Rand, t *tally) {
	msgs := []message{{Role: "system", Content: system}}
	prevPrompt := 0
	for turn, user := range ss.Users {
		msgs = append(msgs, message{Role: "user", Content: user})
		a, err := c.turn(ctx, o.Gateways[rng.IntN(len(o.Gateways))], msgs)
		if err != nil {
			t.failed++
			t.unsent += len(ss.Users) - turn - 1
			if t.firstErr == nil {
				t.firstErr = err
			}
			return
		}
		t.requests++
		t.prompt += int64(a.promptTokens)
		t.cached += int64(a.cachedTokens)
		t.ttft = append(t.ttft, a.ttft)
		if turn > 0 {
			t.followUps++
			if float64(a.cachedTokens) >= o.FollowUpMatch*float64(prevPrompt) {
				t.followUpsCache++
			}
		}
		prevPrompt = a.promptTokens
		msgs = append(msgs, message{Role: "assistant", Content: a.text})
	}
}

func (t *tally) result(elapsed time.Duration) Result {
	r := Result{Requests: t.requests, Failed: t.failed, Unsent: t.unsent, PromptTokens: t.prompt,
		CachedTokens: t.cached, FollowUps: t.followUps, FollowUpsCached: t.followUpsCache,
		DurationS: elapsed.Seconds()}
	if t.firstErr != nil {
		r.FirstError = t.firstErr.Error()
	}
	r.CachedShare = ratio(float64(t.cached), float64(t.prompt))
	r.FollowUpShare = ratio(float64(t.followUpsCache), float64(t.followUps))
	r.RequestsPerSec = ratio(float64(t.requests), elapsed.Seconds())
	slices.Sort(t.ttft)
	r.TTFTP50Ms, r.TTFTP99Ms = ms(percentile(t.ttft, 0.50)), ms(percentile(t.ttft, 0.99))
	if len(t.ttft) > 0 {
		var sum time.Duration
		for _, d := range t.ttft {
			sum += d
		}
		r.TTFTMeanMs = ms(sum / time.Duration(len(t.ttft)))
	}
	return r
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// percentile returns the q-quantile (nearest rank) of sorted d; 0 when d is empty.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
