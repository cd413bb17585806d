// Package engine is a minimal, fast fake inference engine for the benchmark harness: fixed
// chat completions and SSE streams served by fasthttp, so that the proxy is what gets measured.
package engine

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// Markers that the harness looks for in answers.
const (
	// CompletionMarker is in every non-streamed answer.
	CompletionMarker = `"object":"chat.completion"`
	// DoneEvent ends every stream.
	DoneEvent = "data: [DONE]"
)

// Per-request overrides, read from request headers so that both proxies forward them untouched.
const (
	// HeaderEvents overrides Config.Events for one streamed request.
	HeaderEvents = "X-Bench-Events"
	// HeaderEventDelayMs overrides Config.EventDelay for one streamed request, in milliseconds.
	HeaderEventDelayMs = "X-Bench-Event-Delay-Ms"
)

// Limits of the per-request overrides, so a request cannot make the engine stream for long.
const (
	maxEvents     = 10_000
	maxEventDelay = 10 * time.Second
)

// Config sets how streams are answered.
type Config struct {
	// Events is the number of SSE events before "data: [DONE]". Default 20.
	Events int
	// EventDelay is the pause between two events (not before the first). Default 0.
	EventDelay time.Duration
	// MaxBody, when above 0, makes NewServer read request bodies as streams, up to MaxBody
	// bytes, so that uploads (POST /v1/audio/transcriptions) of any size cost it no memory.
	// Default 0: fasthttp's 4 MiB limit, bodies read whole.
	MaxBody int
}

var (
	completionBody = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,` +
		`"model":"fake-model","choices":[{"index":0,"message":{"role":"assistant",` +
		`"content":"Hello from the bench engine."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":12,"completion_tokens":6,"total_tokens":18}}`)
	chunkEvent = []byte(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,` +
		`"model":"fake-model","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}` + "\n\n")
	doneEvent   = []byte(DoneEvent + "\n\n")
	notFound    = []byte(`{"error":{"message":"not found","type":"invalid_request_error","code":404}}`)
	healthBody  = []byte(`{"status":"ok"}`)
	streamTrue  = []byte(`"stream":true`)
	streamTrue2 = []byte(`"stream": true`)
	jsonType    = []byte("application/json")
	sseType     = []byte("text/event-stream")
)

// Handler returns the engine's request handler: POST /v1/chat/completions answers a fixed
// chat.completion, or with "stream": true in the body cfg.Events SSE events then [DONE];
// POST /v1/audio/transcriptions reads the body to its end and answers how many bytes it had;
// GET /health answers 200.
func Handler(cfg Config) fasthttp.RequestHandler {
	if cfg.Events <= 0 {
		cfg.Events = 20
	}
	return func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/v1/chat/completions":
			if !ctx.IsPost() {
				ctx.Error("method not allowed", fasthttp.StatusMethodNotAllowed)
				return
			}
			body := ctx.PostBody()
			if bytes.Contains(body, streamTrue) || bytes.Contains(body, streamTrue2) {
				stream(ctx, overrides(&ctx.Request.Header, cfg))
				return
			}
			ctx.SetContentTypeBytes(jsonType)
			ctx.SetBody(completionBody)
		case "/v1/audio/transcriptions":
			upload(ctx)
		case "/health", "/health_generate":
			ctx.SetContentTypeBytes(jsonType)
			ctx.SetBody(healthBody)
		default:
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			ctx.SetContentTypeBytes(jsonType)
			ctx.SetBody(notFound)
		}
	}
}

// upload answers {"text":"...","bytes":N}, N the bytes of the body, read to its end as a stream
// when the server streams bodies.
func upload(ctx *fasthttp.RequestCtx) {
	n := int64(len(ctx.Request.Body()))
	if r := ctx.RequestBodyStream(); r != nil {
		var err error
		if n, err = io.Copy(io.Discard, r); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadRequest)
			return
		}
	}
	ctx.SetContentTypeBytes(jsonType)
	ctx.SetBodyString(`{"text":"bench upload","bytes":` + strconv.FormatInt(n, 10) + `}`)
}

// overrides applies the per-request headers to cfg, within bounds.
func overrides(h *fasthttp.RequestHeader, cfg Config) Config {
	if v := h.Peek(HeaderEvents); len(v) > 0 {
		if n, err := strconv.Atoi(string(v)); err == nil && n > 0 && n <= maxEvents {
			cfg.Events = n
		}
	}
	if v := h.Peek(HeaderEventDelayMs); len(v) > 0 {
		if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 {
			cfg.EventDelay = min(time.Duration(n)*time.Millisecond, maxEventDelay)
		}
	}
	return cfg
}

// stream answers cfg.Events SSE events and [DONE], flushing each one as an engine flushes each
// token, so the proxy sees one write per event.
func stream(ctx *fasthttp.RequestCtx, cfg Config) {
	ctx.SetContentTypeBytes(sseType)
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		for i := range cfg.Events {
			if i > 0 && cfg.EventDelay > 0 {
				time.Sleep(cfg.EventDelay)
			}
			if _, err := w.Write(chunkEvent); err != nil {
				return
			}
			if err := w.Flush(); err != nil {
				return
			}
		}
		_, _ = w.Write(doneEvent)
		_ = w.Flush()
	})
}

// NewServer returns a fasthttp server for Handler(cfg), tuned like a keep-alive engine.
func NewServer(cfg Config) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:               Handler(cfg),
		Name:                  "bench-engine",
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		IdleTimeout:           90 * time.Second,
		ReadBufferSize:        16 << 10,
		WriteBufferSize:       16 << 10,
		StreamRequestBody:     cfg.MaxBody > 0,
		MaxRequestBodySize:    cfg.MaxBody,
	}
}
