package gateway

import (
	"bytes"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Lingering close, as nginx does it (lingering_close): a request refused while its client is
// still sending the body (over the in-flight limit, over the payload limit, no room in the body
// budget) would otherwise be answered on a connection that closes with unread bytes in it. The
// kernel then resets the connection, and a client still writing its body gets the reset instead
// of the answer. So the answer is sent, the gateway's side of the connection is shut for writing,
// and what the client still sends is read and dropped, for at most lingerTime, before the
// connection closes. It costs a goroutine and no buffer per connection; past maxLingering such
// connections at once, a refused connection simply closes.
const (
	lingerTime   = 10 * time.Second
	maxLingering = 256
)

// lingerBufs are the scratch buffers the dropped bytes are read into.
var lingerBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// closeLingering closes ctx's connection after its answer, lingering while the unread body
// still arrives. The answer must be complete when it is called; it goes out with Connection:
// close. fasthttp hijacks a connection only when it keeps it open, so the gateway writes the
// answer itself, from the hijack.
func (g *Gateway) closeLingering(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	if g.lingering.Add(1) > maxLingering {
		g.lingering.Add(-1)
		return
	}
	var answer bytes.Buffer
	if _, err := ctx.Response.WriteTo(&answer); err != nil {
		g.lingering.Add(-1)
		return
	}
	ctx.Response.Header.ResetConnectionClose()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer g.lingering.Add(-1)
		raw := c
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			raw = u.UnsafeConn()
		}
		_ = raw.SetDeadline(time.Now().Add(lingerTime))
		if _, err := raw.Write(answer.Bytes()); err != nil {
			return
		}
		if hc, ok := raw.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		}
		buf := lingerBufs.Get().(*[]byte)
		defer lingerBufs.Put(buf)
		for {
			if _, err := c.Read(*buf); err != nil {
				return // the client closed, or lingerTime ran out; fasthttp closes c
			}
		}
	})
}
