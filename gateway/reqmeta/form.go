package reqmeta

import (
	"bytes"
)

// Bounds of the multipart reader.
const (
	// MaxFormHeader bounds the header block of one part (its Content-Disposition and the rest).
	MaxFormHeader = 8 << 10
	// MaxFormField bounds the value of a routing field (model, stream); a longer one is a 400.
	MaxFormField = 1 << 10
)

// formScanner reads the routing fields of a multipart/form-data body (RFC 7578) in one linear
// pass: each part's header block, bounded by MaxFormHeader, then a search for the next
// delimiter, which skips the part's content whatever it holds (a file's bytes are never
// looked at one by one). Only the model and stream fields are kept; a part with a filename is a
// file whatever its name. It allocates nothing: the model aliases the body.
//
// What it cannot read (a body that is not well-formed multipart, or a prefix that ends) ends
// the pass: the fields seen so far are kept, the rest counts as unread, like the rest of a JSON
// body beyond the scan limit, and the hint headers supply it. Only a routing field it did read
// and cannot accept (too long, a stream that is not a boolean) is an error.
type formScanner struct {
	b []byte
	m *Meta
}

// scanForm fills m.Model and m.Stream from the form fields of body, and reports whether it read
// the body to its closing delimiter.
func scanForm(m *Meta, body, boundary []byte) (complete bool, err error) {
	if len(boundary) == 0 || len(boundary) > 70 { // RFC 2046: 1 to 70 characters
		return false, nil
	}
	var buf [4 + 70]byte
	n := copy(buf[:], "\r\n--")
	n += copy(buf[n:], boundary)
	f := formScanner{b: body, m: m}
	return f.scan(buf[:n])
}

// scan reads the parts between the delimiters ("\r\n--" + boundary). delim is not kept in f:
// what f holds reaches the Meta, and escape analysis would move delim's array to the heap.
func (f *formScanner) scan(delim []byte) (bool, error) {
	// The first delimiter opens the body, or follows a preamble and a line break.
	i := 0
	if !bytes.HasPrefix(f.b, delim[2:]) {
		j := bytes.Index(f.b, delim)
		if j < 0 {
			return false, nil
		}
		i = j + 2
	}
	i += len(delim) - 2
	for {
		// After a delimiter: "--" closes the body; else optional padding and a line break.
		if len(f.b)-i >= 2 && f.b[i] == '-' && f.b[i+1] == '-' {
			return true, nil
		}
		for i < len(f.b) && (f.b[i] == ' ' || f.b[i] == '\t') {
			i++
		}
		if len(f.b)-i < 2 || f.b[i] != '\r' || f.b[i+1] != '\n' {
			return false, nil
		}
		i += 2
		name, file, next, ok := f.partHeader(i)
		if !ok {
			return false, nil
		}
		end := bytes.Index(f.b[next:], delim)
		if end < 0 {
			return false, nil // the prefix ends, or the body lacks its closing delimiter
		}
		if !file {
			if err := f.field(name, f.b[next:next+end]); err != nil {
				return false, err
			}
		}
		i = next + end + len(delim)
	}
}

// partHeader reads the header block of the part starting at i, up to the empty line, and
// returns which routing field it holds (fieldNone for any other), whether it is a file, and
// where its content starts.
func (f *formScanner) partHeader(i int) (name formField, file bool, content int, ok bool) {
	limit := min(len(f.b), i+MaxFormHeader)
	for {
		eol := bytes.Index(f.b[i:limit], crlf)
		if eol < 0 {
			return 0, false, 0, false // the block is unterminated, or over MaxFormHeader
		}
		line := f.b[i : i+eol]
		i += eol + 2
		if len(line) == 0 {
			return name, file, i, true
		}
		k, v, found := bytes.Cut(line, []byte{':'})
		if found && bytes.EqualFold(bytes.TrimSpace(k), []byte("Content-Disposition")) {
			name, file = disposition(v)
		}
	}
}

var crlf = []byte("\r\n")

// formField is a routing field of a form.
type formField uint8

const (
	fieldNone formField = iota
	fieldModel
	fieldStream
)

// disposition reads a Content-Disposition value (form-data; name="model"; filename="a.wav"):
// the routing field its name is, and whether it has a filename (filename* included).
func disposition(v []byte) (name formField, file bool) {
	_, params, _ := bytes.Cut(v, []byte{';'})
	for len(params) > 0 {
		var p []byte
		p, params = nextParam(params)
		k, val, _ := bytes.Cut(p, []byte{'='})
		k = bytes.TrimSpace(k)
		switch {
		case bytes.EqualFold(k, []byte("name")):
			switch {
			case paramIs(val, "model"):
				name = fieldModel
			case paramIs(val, "stream"):
				name = fieldStream
			default:
				name = fieldNone
			}
		case bytes.EqualFold(k, []byte("filename")), bytes.EqualFold(k, []byte("filename*")):
			file = true
		}
	}
	return name, file
}

// nextParam splits the first parameter off params at a ';' outside a quoted string.
func nextParam(params []byte) (p, rest []byte) {
	quoted := false
	for i := 0; i < len(params); i++ {
		switch c := params[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ';' && !quoted:
			return params[:i], params[i+1:]
		}
	}
	return params, nil
}

// paramIs reports whether the parameter value raw (a token, or a quoted string with backslash
// escapes) is want.
func paramIs(raw []byte, want string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return string(raw) == want
	}
	raw = raw[1 : len(raw)-1]
	n := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' && i+1 < len(raw) {
			i++
			c = raw[i]
		}
		if n >= len(want) || want[n] != c {
			return false
		}
		n++
	}
	return n == len(want)
}

// field records the value of a routing field; the last of each name wins, as in a JSON body.
func (f *formScanner) field(name formField, v []byte) error {
	switch name {
	case fieldModel:
		if len(v) > MaxFormField {
			return &Error{Msg: "form field \"model\" is longer than the gateway reads (1024 bytes)"}
		}
		f.m.Model, f.m.ModelSet = v, true
	case fieldStream:
		if len(v) > MaxFormField {
			return &Error{Msg: "form field \"stream\" is not true or false"}
		}
		b, ok := parseBool(v)
		if !ok {
			return &Error{Msg: "form field \"stream\" is not true or false"}
		}
		f.m.Stream, f.m.StreamSet = b, true
	}
	return nil
}
