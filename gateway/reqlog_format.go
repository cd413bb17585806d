package gateway

import (
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// The request log's records are written by hand when Config.RequestLogWriter is set, byte for
// byte as slog's TextHandler or JSONHandler writes the same record (TestRecordFormatMatchesSlog
// holds them to it), so that a record costs a fraction of a microsecond rather than slog's two.

// recordEncoder builds one record of the request log: appended to b in slog's text or JSON
// format, or, with toSlog, as attributes for Config.RequestLogger's handler.
type recordEncoder struct {
	b      []byte
	json   bool
	toSlog bool
	t      time.Time
	msg    string
	attrs  []slog.Attr
}

var encoderPool = sync.Pool{New: func() any { return &recordEncoder{b: make([]byte, 0, 512)} }}

// begin starts a record of msg at INFO, made at t.
func (e *recordEncoder) begin(t time.Time, msg string) {
	if e.toSlog {
		e.t, e.msg = t, msg
		return
	}
	if e.json {
		e.b = append(e.b, `{"time":"`...)
		e.b = t.AppendFormat(e.b, time.RFC3339Nano)
		e.b = append(e.b, `","level":"INFO","msg":"`...)
		e.b = appendJSONString(e.b, msg)
		e.b = append(e.b, '"')
		return
	}
	e.b = append(e.b, "time="...)
	e.b = appendRFC3339Millis(e.b, t)
	e.b = append(e.b, " level=INFO msg="...)
	e.b = appendTextString(e.b, msg)
}

// key starts the field k; keys are constants that need no quoting.
func (e *recordEncoder) key(k string) {
	if e.json {
		e.b = append(e.b, ',', '"')
		e.b = append(e.b, k...)
		e.b = append(e.b, '"', ':')
		return
	}
	e.b = append(e.b, ' ')
	e.b = append(e.b, k...)
	e.b = append(e.b, '=')
}

func (e *recordEncoder) str(k, v string) {
	if e.toSlog {
		e.attrs = append(e.attrs, slog.String(k, v))
		return
	}
	e.key(k)
	if e.json {
		e.b = append(e.b, '"')
		e.b = appendJSONString(e.b, v)
		e.b = append(e.b, '"')
		return
	}
	e.b = appendTextString(e.b, v)
}

// bytes is str of a value held as bytes. Formatting by hand reads them in place, since the
// record is complete before bytes' caller can change them; a slog handler gets a copy.
func (e *recordEncoder) bytes(k string, v []byte) {
	if e.toSlog {
		e.str(k, string(v))
		return
	}
	e.str(k, unsafe.String(unsafe.SliceData(v), len(v)))
}

func (e *recordEncoder) flag(k string, v bool) {
	if e.toSlog {
		e.attrs = append(e.attrs, slog.Bool(k, v))
		return
	}
	e.key(k)
	e.b = strconv.AppendBool(e.b, v)
}

func (e *recordEncoder) num(k string, v int) {
	if e.toSlog {
		e.attrs = append(e.attrs, slog.Int(k, v))
		return
	}
	e.key(k)
	e.b = strconv.AppendInt(e.b, int64(v), 10)
}

// float writes v as TextHandler does (strconv's shortest 'g') or as JSONHandler does
// (encoding/json's float encoding).
func (e *recordEncoder) float(k string, v float64) {
	if e.toSlog {
		e.attrs = append(e.attrs, slog.Float64(k, v))
		return
	}
	e.key(k)
	if !e.json {
		e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
		return
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, v, format, -1, 64)
	if n := len(e.b); format == 'e' && n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
		e.b[n-2] = e.b[n-1] // e-09 to e-9
		e.b = e.b[:n-1]
	}
}

// end closes a record formatted by hand with its newline.
func (e *recordEncoder) end() {
	if e.json {
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, '\n')
}

// appendRFC3339Millis is TextHandler's time: RFC 3339 with exactly three digits of
// milliseconds. The text up to the second and the zone are formatted once a second (the
// records of one second share them), so a record appends only its milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	s := lastSecond.Load()
	if s == nil || s.unix != t.Unix() || s.loc != t.Location() {
		s = &secondText{unix: t.Unix(), loc: t.Location(), head: t.Format("2006-01-02T15:04:05"), zone: t.Format("Z07:00")}
		lastSecond.Store(s)
	}
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, s.head...)
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, s.zone...)
}

// secondText is one second of the request log's time, as text: the date and time to the
// second, and the zone.
type secondText struct {
	unix int64
	loc  *time.Location
	head string
	zone string
}

// lastSecond is the second of the latest record's time.
var lastSecond atomic.Pointer[secondText]

// jsonSafe reports whether the ASCII byte c goes into a JSON string as it is.
func jsonSafe(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

// appendTextString writes s as TextHandler does: as it is, or quoted (strconv.Quote) when it
// is empty or holds a space, '=', a quote, a control character or an unprintable rune.
func appendTextString(b []byte, s string) []byte {
	if textNeedsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// textPlain holds the ASCII bytes TextHandler writes unquoted: printable ones but space, '='
// and the quote (the backslash is plain), as slog's needsQuoting decides. A table read per byte
// rather than four comparisons: every record checks about a hundred bytes.
var textPlain = func() (t [utf8.RuneSelf]bool) {
	for c := range byte(utf8.RuneSelf) {
		t[c] = c == '\\' || (c != ' ' && c != '=' && jsonSafe(c))
	}
	return t
}()

func textNeedsQuoting(s string) bool {
	if len(s) == 0 {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !textPlain[c] {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s escaped as JSONHandler does (without the quotes): quote,
// backslash and control characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe(c) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}
