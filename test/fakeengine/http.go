package fakeengine

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// GatewayHeader names the gateway that sent a request; the counters of /_stats split by it.
const GatewayHeader = "X-Mesh-Gateway"

// Handler returns the engine's whole HTTP API: the model routes, SGLang's health, model-info and
// weight routes, and the /_fault and /_stats control routes.
func (e *Engine) Handler() http.Handler { return e.handler }

// ControlHandler returns only /_fault and /_stats, for the control port of the ZMQ mode.
func (e *Engine) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	e.controlRoutes(mux)
	return mux
}

func (e *Engine) routes() http.Handler {
	mux := http.NewServeMux()
	for _, route := range []string{RouteChat, RouteCompletions, RouteEmbeddings, RouteGenerate} {
		mux.HandleFunc("POST "+route, e.modelHandler(route))
	}
	mux.HandleFunc("GET /v1/models", e.handleModels)
	mux.HandleFunc("GET /health", e.handleHealth)
	mux.HandleFunc("GET /health_generate", e.handleHealth)
	mux.HandleFunc("GET /get_model_info", e.handleModelInfo)
	mux.HandleFunc("GET /get_weight_version", e.handleWeightVersion)
	mux.HandleFunc("POST /update_weights_from_disk", e.handleUpdateWeights)
	e.controlRoutes(mux)
	return mux
}

func (e *Engine) controlRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_fault", e.handleGetFault)
	mux.HandleFunc("POST /_fault", e.handlePostFault)
	mux.HandleFunc("GET /_stats", e.handleStats)
}

// Start serves Handler over HTTP/1.1 on addr ("127.0.0.1:0" picks a port) and returns the base
// URL, such as "http://127.0.0.1:40123". Close stops it.
func (e *Engine) Start(addr string) (string, error) {
	return e.startHTTP(addr, e.handler)
}

// StartControl serves ControlHandler on addr and returns its base URL.
func (e *Engine) StartControl(addr string) (string, error) {
	return e.startHTTP(addr, e.ControlHandler())
}

func (e *Engine) startHTTP(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	e.nameFromAddr(ln.Addr())
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelDebug),
	}
	if err := e.addCloser(srv.Close); err != nil {
		ln.Close()
		return "", err
	}
	e.goSafe("http server", func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("fakeengine: http server stopped", "addr", ln.Addr().String(), "err", err)
		}
	})
	return "http://" + ln.Addr().String(), nil
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads a request body into a pooled buffer; put it back with bodyPool.Put.
func (e *Engine) readBody(w http.ResponseWriter, r *http.Request) (*bytes.Buffer, error) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, e.cfg.MaxBodyBytes))
	if err != nil {
		bodyPool.Put(buf)
		return nil, err
	}
	return buf, nil
}

func (e *Engine) modelHandler(route string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		buf, err := e.readBody(w, r)
		if err != nil {
			e.stats.countRequest(r.Header.Get(GatewayHeader))
			writeReply(w, errorReply(400, "invalid_request_error", "reading the body: "+err.Error()))
			return
		}
		defer bodyPool.Put(buf)
		req := modelRequest{route: route, body: buf.Bytes(), gateway: r.Header.Get(GatewayHeader)}
		out := &httpSink{w: w}
		if err := e.serve(r.Context(), req, out); errors.Is(err, ErrClosed) {
			_ = out.cut() // a closing engine breaks its connections rather than answer 200
		}
	}
}

// httpSink writes an answer to an HTTP/1.1 response: SSE events framed and flushed one by one.
type httpSink struct {
	w   http.ResponseWriter
	sse bool
	buf []byte
}

func (s *httpSink) start(status int, contentType string, size int) error {
	h := s.w.Header()
	h.Set("Content-Type", contentType)
	if size >= 0 {
		h.Set("Content-Length", strconv.Itoa(size))
	} else {
		s.sse = true
		h.Set("Cache-Control", "no-cache")
	}
	s.w.WriteHeader(status)
	return nil
}

func (s *httpSink) send(p []byte) error {
	if !s.sse {
		_, err := s.w.Write(p)
		return err
	}
	s.buf = append(append(append(s.buf[:0], "data: "...), p...), "\n\n"...)
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return http.NewResponseController(s.w).Flush()
}

// cut flushes what was written, then closes the TCP connection under the response, so that the
// client sees a broken stream rather than a clean end.
func (s *httpSink) cut() error {
	conn, _, err := http.NewResponseController(s.w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream instead
	}
	return conn.Close()
}

// writeReply writes a whole non-streamed reply.
func writeReply(w http.ResponseWriter, r reply) {
	_ = deliverBody(r, false, &httpSink{w: w})
}

// writeJSON writes v as a JSON answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = 500, []byte(`{"error":"encoding the answer failed"}`)
	}
	writeReply(w, reply{status: status, contentType: contentJSON, body: append(b, '\n')})
}

func (e *Engine) handleHealth(w http.ResponseWriter, r *http.Request) {
	e.stats.countProbe(r.Header.Get(GatewayHeader))
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(e.Faults().HealthStatus)
}

func (e *Engine) handleGetFault(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, e.Faults())
}

// handlePostFault applies a fault patch; a bad one answers 400 {"error": "<one line>"} and
// changes nothing.
func (e *Engine) handlePostFault(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeJSON(w, 400, map[string]string{"error": "reading the body: " + err.Error()})
		return
	}
	f, err := e.patchFaults(body)
	if err != nil {
		writeJSON(w, 400, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, 200, f)
}

func (e *Engine) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, e.Stats())
}
