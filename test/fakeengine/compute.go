package fakeengine

import (
	"context"
	"time"
)

// DefaultBlockChars is the default size of a prefix-cache block: 64 bytes of text, 16 tokens.
const DefaultBlockChars = 64

// Compute models what makes a real engine slow or fast: a prefix cache, the prefill of the
// prompt tokens it does not hold, the decode of each output token, and a bounded number of
// requests computed at once. A request's time to first token is its wait for a slot plus the
// prefill of its uncached tokens; each further output token (each streamed chunk after the
// first, stream_chunks in all) takes DecodePerToken. Tokens are bytes of text / 4, rounded up.
type Compute struct {
	// CacheBlocks is the prefix cache's capacity in blocks, evicted least recently used first
	// (0: no cache, every prompt token is computed).
	CacheBlocks int
	// BlockChars is the size of a cache block in bytes of the prompt text (DefaultBlockChars).
	BlockChars int
	// PrefillPerToken is the time one uncached prompt token takes (0).
	PrefillPerToken time.Duration
	// DecodePerToken is the time each output token after the first takes (0).
	DecodePerToken time.Duration
	// Slots is how many requests are computed at once; the others wait in arrival order
	// (0: no bound).
	Slots int
	// PrefillLanes is how many admitted requests prefill at once; the others wait their turn in
	// arrival order, holding their slots (0: every admitted request prefills at once). One
	// lane is a GPU's one forward pass at a time: prefill is bound by compute, so two prompts
	// take as long as their tokens together, as in SGLang's prefill batches and vLLM's token
	// budget per step, while decode, bound by memory, runs for every slot at once.
	PrefillLanes int
	// CacheAnswers caches a finished request's answer after its prompt, as SGLang's radix
	// cache (cache_finished_req) and vLLM's prefix cache (full blocks of generated tokens) do:
	// the next turn of a chat, whose prompt repeats the answer, finds it cached. Without it
	// only prompts are cached.
	CacheAnswers bool
}

// modeled reports whether any knob of c is set (BlockChars alone changes nothing).
func (c Compute) modeled() bool {
	return c.CacheBlocks > 0 || c.PrefillPerToken > 0 || c.DecodePerToken > 0 || c.Slots > 0
}

// tokenUsage is the prompt side of an answer's usage, and when its request took a slot.
type tokenUsage struct {
	prompt, cached int
	slotAt         time.Time
}

// admit schedules a parsed request as an engine does: it waits for a slot, looks the prompt
// text up in the prefix cache (and caches it), counts its tokens, then waits for the prefill of
// the uncached part. On success the request holds a slot until finish.
func (e *Engine) admit(ctx context.Context, text string) (tokenUsage, error) {
	if err := e.await(ctx, e.slots, &e.stats.slotWaits); err != nil {
		return tokenUsage{}, err
	}
	e.running.Add(1)
	u := tokenUsage{prompt: promptTokens(text), slotAt: time.Now()}
	if e.cache != nil {
		// As in vLLM and SGLang, the last prompt token is always computed.
		u.cached = min(u.prompt-1, tokensOf(e.cache.admit(text)))
	}
	e.stats.countTokens(u)
	if err := e.prefill(ctx, time.Duration(u.prompt-u.cached)*e.cfg.Compute.PrefillPerToken); err != nil {
		e.finish(u)
		return u, err
	}
	return u, nil
}

// prefill waits d, the prefill of a request's uncached tokens, after its turn for a prefill
// lane (Compute.PrefillLanes).
func (e *Engine) prefill(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if err := e.await(ctx, e.lanes, &e.stats.laneWaits); err != nil {
		return err
	}
	defer e.lanes.release()
	return e.sleepFor(ctx, nil, d)
}

// await takes a place in q (a slot, or a prefill lane) and counts in waits how long the request
// waited for it, when it had to.
func (e *Engine) await(ctx context.Context, q *slots, waits *waitCount) error {
	start := time.Now()
	waited, err := q.acquire(ctx, e.done)
	if waited {
		waits.add(time.Since(start))
	}
	return err
}

// cacheAnswer caches seq, a finished request's prompt and answer as the next turn's prompt
// will repeat them (answerSequence: empty when the engine does not cache answers).
func (e *Engine) cacheAnswer(seq string) {
	if seq != "" {
		e.cache.admit(seq)
	}
}

// finish frees the slot of an admitted request, counting how long it held it.
func (e *Engine) finish(u tokenUsage) {
	e.stats.countSlot(time.Since(u.slotAt))
	e.running.Add(-1)
	e.slots.release()
}

// decodeTime is how long an answer of tokens output tokens takes after its first.
func (e *Engine) decodeTime(tokens int) time.Duration {
	return time.Duration(max(0, tokens-1)) * e.cfg.Compute.DecodePerToken
}

// sleepFor waits d, or less if ctx ends or the engine closes. A non-nil *t is reused between
// calls.
func (e *Engine) sleepFor(ctx context.Context, t **time.Timer, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	var local *time.Timer
	if t == nil {
		t = &local
		defer func() { local.Stop() }()
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-(*t).C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.done:
		return ErrClosed
	}
}
