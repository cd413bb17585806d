package health

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// readBufferSize is the read buffer of a probe. An answer's head that fits is parsed whole; a
// larger one is judged by its status line alone.
const readBufferSize = 4 << 10

// maxInterim bounds the 1xx answers skipped before the final one.
const maxInterim = 8

// userAgent names the probes in the engines' logs.
const userAgent = "meshgw-health"

// aLongTimeAgo is a deadline in the past: setting it aborts a connection's blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

var (
	errMalformed      = errors.New("malformed answer")
	errTooManyInterim = errors.New("too many 1xx answers")
)

// noAnswerError is a failure before any byte of an answer came: on a reused connection the
// engine most likely closed it while it was idle, and the probe may try a new one.
type noAnswerError struct{ err error }

func (e *noAnswerError) Error() string { return e.err.Error() }
func (e *noAnswerError) Unwrap() error { return e.err }

// noAnswer marks err as a failure before any answer, unless it is a timeout (the probe's time
// is up, or its context ended).
func noAnswer(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return &noAnswerError{err}
}

// exchange is one probe's working state, pooled: the request's bytes, and what reads and parses
// the answer (fasthttp's header and body parsers over a bufio.Reader).
type exchange struct {
	req  fasthttp.RequestHeader
	resp fasthttp.Response
	rd   connReader
	br   *bufio.Reader
	out  []byte // the request as sent
	auth []byte // "Bearer " + key
}

var exchanges = sync.Pool{New: func() any {
	x := &exchange{}
	x.br = bufio.NewReaderSize(&x.rd, readBufferSize)
	x.req.DisableNormalizing()
	x.resp.Header.DisableNormalizing()
	return x
}}

func acquireExchange() *exchange { return exchanges.Get().(*exchange) }

func releaseExchange(x *exchange) {
	x.req.Reset()
	x.req.DisableNormalizing()
	x.resp.Reset()
	x.resp.Header.DisableNormalizing()
	x.rd = connReader{}
	x.br.Reset(&x.rd)
	exchanges.Put(x)
}

// writeRequest prepares the probe's GET request.
func (x *exchange) writeRequest(u engineURL, t Target, path string) {
	h := &x.req
	h.SetMethod(fasthttp.MethodGet)
	if u.path == "" {
		h.SetRequestURI(path)
	} else {
		h.SetRequestURI(u.path + path)
	}
	h.SetHost(u.host)
	h.SetUserAgent(userAgent)
	if t.APIKey != "" {
		x.auth = append(append(x.auth[:0], "Bearer "...), t.APIKey...)
		h.SetBytesV(fasthttp.HeaderAuthorization, x.auth)
	}
	h.Set("X-Mesh-Gateway", t.GatewayID)
	x.out = h.AppendBytes(x.out[:0])
}

// roundTrip sends the request on c and reads the answer: its status code, and whether c may
// serve another probe. The context's deadline bounds it, and the context's end aborts it at
// once. An error means that no status was read.
func (x *exchange) roundTrip(ctx context.Context, c *engineConn) (code int, keep bool, err error) {
	dl, ok := ctx.Deadline()
	if ok || c.deadline {
		c.SetDeadline(dl)
		c.deadline = ok
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
	defer func() {
		if !stop() {
			keep = false // the context ended: c's deadline is spent
		}
	}()
	if _, err := c.Write(x.out); err != nil {
		return 0, false, noAnswer(err)
	}
	x.rd = connReader{c: c}
	x.br.Reset(&x.rd)
	if code, err = x.readHead(); err != nil {
		var small *fasthttp.ErrSmallBuffer
		if errors.As(err, &small) {
			if code, ok := statusLine(x.buffered()); ok {
				return code, false, nil // a head too large to parse: its status is the answer
			}
		}
		return 0, false, x.headError(err)
	}
	// The body is read only to reuse the connection: not when the answer closes it (a body that
	// runs up to the close included).
	keep = !x.resp.Header.ConnectionClose() && code != http.StatusSwitchingProtocols
	if keep && code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified {
		if err := x.resp.ReadBody(x.br, maxDrain); err != nil {
			keep = false // too large, cut short or late: the status stands
		} else if x.resp.Header.ContentLength() == -1 && x.resp.Header.ReadTrailer(x.br) != nil {
			keep = false
		}
	}
	return code, keep && x.br.Buffered() == 0, nil
}

// readHead reads the head of the final answer, skipping interim 1xx ones.
func (x *exchange) readHead() (int, error) {
	h := &x.resp.Header
	for range maxInterim {
		if err := h.Read(x.br); err != nil {
			return 0, err
		}
		if code := h.StatusCode(); code >= 200 || code == http.StatusSwitchingProtocols {
			return code, nil
		}
	}
	return 0, errTooManyInterim
}

// headError explains a head that could not be read, with the connection's own error when
// there is one (fasthttp reports any failure before the first byte as io.EOF) and without the
// answer's bytes.
func (x *exchange) headError(err error) error {
	cause := x.rd.err
	switch {
	case err == io.EOF && cause != nil:
		return noAnswer(cause)
	case err == io.EOF:
		return noAnswer(err)
	case errors.Is(err, errTooManyInterim):
		return err
	case cause == io.EOF:
		return io.ErrUnexpectedEOF
	case cause != nil:
		return cause
	}
	return errMalformed
}

// buffered returns the bytes read but not consumed.
func (x *exchange) buffered() []byte {
	b, _ := x.br.Peek(x.br.Buffered())
	return b
}

// statusLine returns the status code of an answer's status line at the start of b
// ("HTTP/1.1 503 Service Unavailable").
func statusLine(b []byte) (int, bool) {
	line, _, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return 0, false
	}
	proto, rest, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\r")), []byte(" "))
	if !ok || !bytes.HasPrefix(proto, []byte("HTTP/1.")) || len(rest) < 3 || (len(rest) > 3 && rest[3] != ' ') {
		return 0, false
	}
	code := 0
	for _, d := range rest[:3] {
		if d < '0' || d > '9' {
			return 0, false
		}
		code = code*10 + int(d-'0')
	}
	if code < 100 {
		return 0, false
	}
	return code, true
}

// connReader reads a probe's connection and keeps its last error.
type connReader struct {
	c   net.Conn
	err error
}

func (r *connReader) Read(b []byte) (int, error) {
	n, err := r.c.Read(b)
	if err != nil {
		r.err = err
	}
	return n, err
}
