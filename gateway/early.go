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
	early503      = []byte("503")
	early413      = []byte("413")
	earlyLeftMesh = []byte("left")
)

// earlyReject is what headerReceived decided for a request.
type earlyReject uint8

const (
	earlyNone       earlyReject = iota
	earlyTooLarge               // 413: Content-Length over the payload limit
	earlyOverloaded             // 503 overloaded_error: at the in-flight limit
	earlyLeft                   // 503 draining: the gateway left the mesh (LeaveMesh)
)

// headerReceived runs after the request headers are read and before fasthttp reads any of the
// body (it would otherwise pre-read up to 8 KiB before calling the handler). A model request the
// gateway will refuse, because it left the mesh (one atomic load), over the payload limit by its
// Content-Length or over the in-flight limit, is answered without reading its body: the handler
// sees no body, and closes the connection after the answer (closeLingering) because the unread
// body is still on the wire.
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
	case g.left.Load():
		verdict = earlyLeftMesh
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

// earlyVerdict returns what headerReceived decided.
func earlyVerdict(ctx *fasthttp.RequestCtx) earlyReject {
	switch v := ctx.Request.Header.PeekCanonical(keyEarly); {
	case v == nil:
		return earlyNone
	case bytes.Equal(v, early413):
		return earlyTooLarge
	case bytes.Equal(v, earlyLeftMesh):
		return earlyLeft
	default:
		return earlyOverloaded
	}
}
