package gateway

import (
	"bytes"
	"errors"
	"io"
	"sync"

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

// bodyPool recycles request body buffers; buffers above bodyPoolMax are left to the GC.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

const bodyPoolMax = 4 << 20

func putBody(b *[]byte) {
	if b != nil && cap(*b) <= bodyPoolMax {
		*b = (*b)[:0]
		bodyPool.Put(b)
	}
}

var errTooLarge = errors.New("request body over the payload limit")

// readBody reads the whole request body into buf, enforcing the payload limit on a declared
// Content-Length and while reading a chunked body.
func (g *Gateway) readBody(ctx *fasthttp.RequestCtx, buf []byte) ([]byte, error) {
	limit := g.cfg.MaxPayload
	cl := ctx.Request.Header.ContentLength()
	if int64(cl) > limit {
		return buf, errTooLarge
	}
	r := ctx.RequestBodyStream()
	if r == nil {
		return append(buf[:0], ctx.Request.Body()...), nil
	}
	if cl >= 0 {
		if cap(buf) < cl {
			buf = make([]byte, 0, cl)
		}
		buf = buf[:cl]
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
