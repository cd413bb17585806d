package console

import (
	"bufio"
	"embed"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

//go:embed assets
var assets embed.FS

// Auth is the admin auth; *gateway/admin.Handler implements it. Authorize writes the 401 or 403
// itself when it refuses.
type Auth interface {
	Authorize(ctx *fasthttp.RequestCtx) bool
}

// Config configures a Handler.
type Config struct {
	// Hub feeds the snapshot and the streams. Required.
	Hub *Hub
	// Auth guards the snapshot and the streams. Required.
	Auth Auth
	// MaxStreams bounds the streams open at once; past it a stream answers 503. Default 256.
	MaxStreams int
	// Heartbeat is how often an idle stream sends a comment, which also finds a client that went
	// away. Default 15s.
	Heartbeat time.Duration
}

// Handler serves /ui.
type Handler struct {
	cfg Config
}

// New returns a Handler.
func New(cfg Config) *Handler {
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 256
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	return &Handler{cfg: cfg}
}

// static are the page's files: path under /ui/, file in assets, content type.
var static = map[string][2]string{
	"":          {"assets/index.html", "text/html; charset=utf-8"},
	"app.js":    {"assets/app.js", "text/javascript; charset=utf-8"},
	"app.css":   {"assets/app.css", "text/css; charset=utf-8"},
	"grid.js":   {"assets/grid.js", "text/javascript; charset=utf-8"},
	"stream.js": {"assets/stream.js", "text/javascript; charset=utf-8"},
}

// Serve answers ctx when its path is /ui or under /ui/, and reports whether it was.
func (h *Handler) Serve(ctx *fasthttp.RequestCtx) bool {
	path := string(ctx.Path())
	if path != "/ui" && !strings.HasPrefix(path, "/ui/") {
		return false
	}
	secure(ctx)
	rest := strings.TrimPrefix(strings.TrimPrefix(path, "/ui"), "/")
	api := rest == "api" || strings.HasPrefix(rest, "api/")
	// The data routes are admin routes: authentication comes before anything else, so that
	// nobody learns which of them exist, or what they take, without the key.
	if api && !h.cfg.Auth.Authorize(ctx) {
		return true
	}
	if api && rest != "api/snapshot" && rest != "api/events" {
		notFound(ctx, path)
		return true
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		// ctx.Error resets the headers: Allow goes after it.
		ctx.Error(`{"error":{"code":"method_not_allowed","message":"the console is read-only: GET only"}}`, fasthttp.StatusMethodNotAllowed)
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET, HEAD")
		ctx.SetContentType("application/json")
		return true
	}
	switch rest {
	case "api/snapshot":
		b, v := h.cfg.Hub.Snapshot()
		ctx.Response.Header.Set("X-Console-Version", versionHeader(v))
		ctx.SetContentType("application/json")
		ctx.SetBody(b)
		return true
	case "api/events":
		h.events(ctx)
		return true
	}
	f, ok := static[rest]
	if !ok {
		notFound(ctx, path)
		return true
	}
	b, err := assets.ReadFile(f[0])
	if err != nil { // embedded: cannot happen
		ctx.Error("console asset missing", fasthttp.StatusInternalServerError)
		return true
	}
	ctx.SetContentType(f[1])
	ctx.SetBody(b)
	return true
}

// notFound answers 404 not_found for a path under /ui that the console does not serve.
func notFound(ctx *fasthttp.RequestCtx, path string) {
	ctx.Error(`{"error":{"code":"not_found","message":"no console page `+safePath(path)+`"}}`, fasthttp.StatusNotFound)
	ctx.SetContentType("application/json")
}

// secure sets the headers every console answer carries: nothing cached, nothing framed, no
// script or connection but the gateway's own.
func secure(ctx *fasthttp.RequestCtx) {
	hd := &ctx.Response.Header
	hd.Set(fasthttp.HeaderCacheControl, "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
}

// events serves one stream: the snapshot, then each delta, a heartbeat comment when idle.
func (h *Handler) events(ctx *fasthttp.RequestCtx) {
	hub := h.cfg.Hub
	if hub.Streams() >= h.cfg.MaxStreams {
		ctx.Error(`{"error":{"code":"too_many_streams","message":"this gateway serves as many console streams as it allows; close a page or ask another gateway"}}`, fasthttp.StatusServiceUnavailable)
		ctx.SetContentType("application/json")
		return
	}
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	if ctx.IsHead() {
		return
	}
	beat := h.cfg.Heartbeat
	// ?since=V: the page holds version V already (it fetched the snapshot, or it reconnects),
	// and the stream starts with the whole state only if the Hub is past it.
	since, _ := strconv.ParseUint(string(ctx.QueryArgs().Peek("since")), 10, 64)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) { // fasthttp runs it in its own goroutine
		s := hub.subscribe()
		defer hub.unsubscribe(s)
		sent := hub.version()
		if since == 0 || since != sent {
			var snap []byte
			snap, sent = hub.Snapshot()
			if write(w, frame("snapshot", snap)) != nil {
				return
			}
		} else if write(w, []byte(": up to date\n\n")) != nil {
			return
		}
		t := time.NewTicker(beat)
		defer t.Stop()
		for {
			var out []byte
			select {
			case <-hub.done:
				return
			case ev := <-s.ch:
				if ev.v <= sent {
					continue // already in the snapshot sent
				}
				out, sent = ev.b, ev.v
			case <-s.kick:
			case <-t.C:
				out = []byte(": ping\n\n")
			}
			if s.resync.Swap(false) {
				for len(s.ch) > 0 {
					<-s.ch
				}
				var snap []byte
				snap, sent = hub.Snapshot()
				out = frame("snapshot", snap)
			}
			if out != nil && write(w, out) != nil {
				return
			}
		}
	})
}

func write(w *bufio.Writer, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

// safePath keeps a client's path short in an error message, and free of quotes.
func safePath(p string) string {
	if len(p) > 100 {
		p = p[:100] + "..."
	}
	return strings.NewReplacer(`"`, "", `\`, "", "<", "", ">", "").Replace(p)
}
