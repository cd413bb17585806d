package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"
)

// StreamBody is the streamed chat-completions request.
const StreamBody = `{"model":"fake-model","messages":[{"role":"user","content":"Say hello in one short sentence, please."}],"max_tokens":16,"stream":true}`

// StreamOptions describe one streaming load.
type StreamOptions struct {
	URL      string        // full URL of the chat-completions route
	Streams  int           // concurrent streams; default 32
	Duration time.Duration // streams start until then; default 10 s
	// MaxStreams bounds the streams started in all; default 1,000,000.
	MaxStreams int
	Events     int           // events expected before [DONE]; default 20
	Header     http.Header   // added to every request (per-request engine overrides)
	Timeout    time.Duration // bound of one stream; default 30 s
	// RecordGaps keeps the time between consecutive events (the paced check).
	RecordGaps bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// StreamResult is what a streaming load measured. Durations are in milliseconds.
type StreamResult struct {
	Completed     int64   `json:"completed"`
	StreamsPerSec float64 `json:"streams_per_s"`
	TTFBP50Ms     float64 `json:"ttfb_p50_ms"`
	TTFBP99Ms     float64 `json:"ttfb_p99_ms"`
	// Cut counts streams that ended without [DONE], with an error or a status other than 200.
	Cut int64 `json:"cut"`
	// WrongEvents counts streams that ended with [DONE] after a number of events other than
	// Events.
	WrongEvents int64    `json:"wrong_events"`
	FirstError  string   `json:"first_error,omitempty"`
	GapMinMs    *float64 `json:"gap_min_ms,omitempty"`
	GapP50Ms    *float64 `json:"gap_p50_ms,omitempty"`
	GapMaxMs    *float64 `json:"gap_max_ms,omitempty"`
	DurationS   float64  `json:"duration_s"`
}

// streamStats is one goroutine's tally, merged at the end.
type streamStats struct {
	completed, cut, wrong int64
	ttfb, gaps            []time.Duration
	firstErr              error
}

// RunStreams runs o.Streams concurrent streaming requests back to back until o.Duration has
// passed, and reports streams/s, time to first event, and cut streams.
func RunStreams(ctx context.Context, o StreamOptions) StreamResult {
	o.setDefaults()
	tr := &http.Transport{MaxIdleConnsPerHost: o.Streams, DisableCompression: true, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	start := o.Now()
	deadline := start.Add(o.Duration)
	var mu sync.Mutex
	var all streamStats
	var wg sync.WaitGroup
	budget := make(chan struct{}, o.MaxStreams)
	for range o.MaxStreams {
		budget <- struct{}{}
	}
	close(budget)
	for range o.Streams {
		wg.Go(func() {
			var s streamStats
			defer func() {
				// A panic is a harness bug: report it as a cut stream with its stack.
				if p := recover(); p != nil {
					s.add(oneOutcome{err: fmt.Errorf("stream client panicked: %v\n%s", p, debug.Stack())}, o.Events)
				}
				mu.Lock()
				all.merge(&s)
				mu.Unlock()
			}()
			for o.Now().Before(deadline) && ctx.Err() == nil {
				if _, ok := <-budget; !ok {
					break
				}
				s.add(oneStream(ctx, client, &o), o.Events)
			}
		})
	}
	wg.Wait()
	return all.result(o.Now().Sub(start))
}

func (o *StreamOptions) setDefaults() {
	o.Streams = cmp0(o.Streams, 32)
	o.MaxStreams = cmp0(o.MaxStreams, 1_000_000)
	o.Events = cmp0(o.Events, 20)
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// oneOutcome is the outcome of one stream.
type oneOutcome struct {
	ttfb   time.Duration
	gaps   []time.Duration
	events int
	done   bool
	err    error
}

func (s *streamStats) add(r oneOutcome, want int) {
	switch {
	case r.err != nil || !r.done:
		s.cut++
		if s.firstErr == nil {
			s.firstErr = r.err
			if r.err == nil {
				s.firstErr = fmt.Errorf("stream ended after %d events without [DONE]", r.events)
			}
		}
		return
	case r.events != want:
		s.wrong++
	}
	if r.events > 0 {
		s.ttfb = append(s.ttfb, r.ttfb)
	}
	s.completed++
	s.gaps = append(s.gaps, r.gaps...)
}

func (s *streamStats) merge(o *streamStats) {
	s.completed += o.completed
	s.cut += o.cut
	s.wrong += o.wrong
	s.ttfb = append(s.ttfb, o.ttfb...)
	s.gaps = append(s.gaps, o.gaps...)
	if s.firstErr == nil {
		s.firstErr = o.firstErr
	}
}

func (s *streamStats) result(elapsed time.Duration) StreamResult {
	r := StreamResult{Completed: s.completed, Cut: s.cut, WrongEvents: s.wrong, DurationS: elapsed.Seconds()}
	if elapsed > 0 {
		r.StreamsPerSec = float64(s.completed) / elapsed.Seconds()
	}
	if s.firstErr != nil {
		r.FirstError = s.firstErr.Error()
	}
	slices.Sort(s.ttfb)
	r.TTFBP50Ms, r.TTFBP99Ms = ms(percentile(s.ttfb, 0.50)), ms(percentile(s.ttfb, 0.99))
	if len(s.gaps) > 0 {
		slices.Sort(s.gaps)
		lo, mid, hi := ms(s.gaps[0]), ms(percentile(s.gaps, 0.5)), ms(s.gaps[len(s.gaps)-1])
		r.GapMinMs, r.GapP50Ms, r.GapMaxMs = &lo, &mid, &hi
	}
	return r
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

var (
	dataPrefix = []byte("data: ")
	doneData   = []byte("data: [DONE]")
)

// oneStream posts one streamed request and reads it to [DONE].
func oneStream(ctx context.Context, c *http.Client, o *StreamOptions) oneOutcome {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader([]byte(StreamBody)))
	if err != nil {
		return oneOutcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range o.Header {
		req.Header[k] = v
	}
	start := o.Now()
	resp, err := c.Do(req)
	if err != nil {
		return oneOutcome{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return oneOutcome{err: errors.New("status " + strconv.Itoa(resp.StatusCode))}
	}
	var out oneOutcome
	last := start
	br := bufio.NewReaderSize(resp.Body, 4<<10)
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, doneData) {
			out.done = true
			_, _ = io.Copy(io.Discard, br) // read to EOF so the connection is reused
			return out
		}
		if bytes.HasPrefix(line, dataPrefix) && bytes.HasSuffix(line, []byte("\n")) {
			now := o.Now()
			if out.events == 0 {
				out.ttfb = now.Sub(start)
			} else if o.RecordGaps {
				out.gaps = append(out.gaps, now.Sub(last))
			}
			last = now
			out.events++
		}
		if err != nil {
			if !errors.Is(err, bufio.ErrBufferFull) {
				out.err = err
				if errors.Is(err, io.EOF) {
					out.err = fmt.Errorf("stream ended after %d events without [DONE]", out.events)
				}
				return out
			}
		}
	}
}
