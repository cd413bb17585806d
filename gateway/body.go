package gateway

import (
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/meshgw/meshgw/gateway/reqmeta"
)

// bodyPool recycles request body buffers; buffers above bodyPoolMax are left to the GC.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

const bodyPoolMax = 4 << 20

func putBody(b *[]byte) {
	if b != nil && cap(*b) <= bodyPoolMax {
		*b = (*b)[:0]
		bodyPool.Put(b)
	}
}

// chunkedStep is the first share of the budget a body of unknown length takes; each later share
// doubles what it holds.
const chunkedStep = 64 << 10

var (
	errTooLarge   = errors.New("request body over the payload limit")
	errOverBudget = errors.New("no room in the buffered-body budget")
)

// readBody reads the request body into *c.body, within the payload limit and the body budget,
// and returns it. A body larger than the whole budget is never read whole: only its first bytes
// are (streamFrom), and the worker gets the rest as it arrives.
func (c *call) readBody() ([]byte, error) {
	ctx, g := c.ctx, c.g
	buf := (*c.body)[:0]
	cl := ctx.Request.Header.ContentLength()
	if int64(cl) > g.cfg.MaxPayload {
		return buf, errTooLarge
	}
	r := ctx.RequestBodyStream()
	switch {
	case r == nil: // fasthttp read it whole already: it fit in its read buffer
		b := ctx.Request.Body()
		if err := c.reserve(min(int64(len(b)), g.budget.max)); err != nil {
			return buf, err
		}
		return append(buf, b...), nil
	case cl < 0:
		return c.readChunked(r, buf)
	case int64(cl) > g.budget.max:
		return c.readPrefix(r, cl, buf)
	}
	if err := c.reserve(int64(cl)); err != nil {
		return buf, err
	}
	buf = slices.Grow(buf, cl)[:cl]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// reserve takes n bytes of the budget for this request, waiting up to the bound.
func (c *call) reserve(n int64) error {
	if !c.g.budget.take(n, c.g.cfg.BodyBudgetWait) {
		return errOverBudget
	}
	c.reserved += n
	return nil
}

// readChunked reads a body of unknown length, taking budget as the body grows. A body that
// outgrows the whole budget is streamed, starting with what was read.
func (c *call) readChunked(r io.Reader, buf []byte) ([]byte, error) {
	b, limit := c.g.budget, c.g.cfg.MaxPayload
	for {
		if int64(len(buf)) == c.reserved {
			if c.reserved == b.max {
				c.streamFrom(buf, r, -1)
				return buf, nil
			}
			if err := c.reserve(min(max(c.reserved, chunkedStep), b.max-c.reserved)); err != nil {
				return buf, err
			}
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(cap(buf), 16<<10), int(c.reserved)-len(buf)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), int(c.reserved))])
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

// readPrefix reads the first bytes of a body of known length larger than the whole budget, as
// much as routing scans (reqmeta.ScanLimit), and streams the body.
func (c *call) readPrefix(r io.Reader, cl int, buf []byte) ([]byte, error) {
	n := min(reqmeta.ScanLimit, int(c.g.budget.max))
	if err := c.reserve(int64(n)); err != nil {
		return buf, err
	}
	buf = slices.Grow(buf, n)[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return buf, err
	}
	c.streamFrom(buf, r, cl)
	return buf, nil
}

// streamFrom makes the request's body the prefix already read followed by rest, of size bytes
// in all (-1: unknown, sent chunked). Such a request gets one attempt: the body cannot be sent
// twice.
func (c *call) streamFrom(prefix []byte, rest io.Reader, size int) {
	c.streamed = true
	c.sbody = streamedBody{c: c, prefix: prefix, rest: rest, left: c.g.cfg.MaxPayload - int64(len(prefix))}
	c.ctx.Request.SetBodyStream(&c.sbody, size)
	c.g.budget.streamed.Add(1)
}

// dropBody gives back the body's buffer and its share of the budget once no attempt needs it.
func (c *call) dropBody() {
	c.ctx.Request.ResetBody()
	switch {
	case !c.streamed || c.sbody.eof:
	case c.streaming: // a relay answers after the handler; the rest of the body is on the wire
		c.ctx.SetConnectionClose()
	default: // the worker answered before it took the whole body
		c.g.closeLingering(c.ctx)
	}
	c.streamed, c.sbody = false, streamedBody{}
	c.g.budget.give(c.reserved)
	c.reserved = 0
	putBody(c.body)
	c.body = nil
}

// streamedBody is the body of a request larger than the budget, as the worker gets it: the
// first bytes, which routing read, then the rest straight from the client's connection. The
// prefix's share of the budget is given back as soon as it has been sent.
type streamedBody struct {
	c         *call
	prefix    []byte
	rest      io.Reader
	left      int64 // bytes the rest may still bring within the payload limit
	eof       bool  // the rest was read to its end
	overLimit bool  // the rest ran past the payload limit
}

func (s *streamedBody) Read(p []byte) (int, error) {
	if len(s.prefix) > 0 {
		n := copy(p, s.prefix)
		if s.prefix = s.prefix[n:]; len(s.prefix) == 0 {
			s.c.g.budget.give(s.c.reserved)
			s.c.reserved, s.prefix = 0, nil
			*s.c.body = nil // up to the whole budget for a chunked body: let it go now
		}
		return n, nil
	}
	n, err := s.rest.Read(p)
	if s.left -= int64(n); s.left < 0 {
		s.overLimit = true
		return n, errTooLarge
	}
	if err == io.EOF {
		s.eof = true
	}
	return n, err
}
