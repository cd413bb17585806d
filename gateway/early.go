package gateway

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/reqmeta"
)

// earlyHeader carries, from HeaderReceived to the handler, the status of a request rejected on
// its headers alone. Any copy a client sends is deleted first, so it cannot be forged.
const earlyHeader = "X-Meshgw-Internal-Early-Reject"

var keyEarly = []byte(earlyHeader) // canonical already: no normalizing per request

var (
	early503 = []byte("503")
	early413 = []byte("413")
)

// headerReceived runs after the request headers are read and before fasthttp reads any of the
// body (it would otherwise pre-read up to 8 KiB before calling the handler). A model request the
// gateway will refuse, over the in-flight limit or with a Content-Length over the payload limit,
// is answered without reading its body: the handler sees no body, and closes the connection
// after the answer (closeLingering) because the unread body is still on the wire.
func (g *Gateway) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.PeekCanonical(keyEarly) != nil {
		h.Del(earlyHeader)
	}
	if !h.IsPost() {
		return fasthttp.RequestConfig{}
	}
	path := h.RequestURI()
	if i := bytes.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if _, ok := reqmeta.RouteOf(path); !ok {
		return fasthttp.RequestConfig{}
	}
	var verdict []byte
	switch {
	case int64(h.ContentLength()) > g.cfg.MaxPayload:
		verdict = early413
	case g.adm.full():
		verdict = early503
		g.adm.rejected.Add(1)
	default:
		return fasthttp.RequestConfig{}
	}
	h.SetCanonical(keyEarly, verdict)
	h.SetContentLength(0)
	h.Del(fasthttp.HeaderExpect)
	return fasthttp.RequestConfig{}
}

// earlyVerdict returns the status headerReceived decided, 0 for none.
func earlyVerdict(ctx *fasthttp.RequestCtx) int {
	switch v := ctx.Request.Header.PeekCanonical(keyEarly); {
	case v == nil:
		return 0
	case bytes.Equal(v, early413):
		return fasthttp.StatusRequestEntityTooLarge
	default:
		return fasthttp.StatusServiceUnavailable
	}
}
