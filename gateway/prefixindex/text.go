package prefixindex

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendText appends the routing text of prompt to dst and returns it. prompt is the raw JSON of
// a request's prompt field (a chat's messages, a completion's prompt, /generate's text, an
// embedding's input), and the text is what SMG extracts from it for cache-aware routing:
//
//   - a string: its text;
//   - an array of strings (a completion's or an embedding's batch): the strings joined by one
//     space, empty ones included; elements that are not strings are skipped;
//   - an array of messages (a chat): the non-empty text fragments of every message, of every
//     role, joined by one space in order, where a message's fragments are its content when that
//     is a string, or the text of each of its content parts whose type is "text" (images, audio
//     and other parts count for nothing), and then, for an assistant's message, its
//     reasoning_content;
//   - anything else: no text.
//
// Escapes are decoded as encoding/json decodes them (a lone surrogate becomes U+FFFD). Bytes
// that are not UTF-8 are kept as they are. The JSON is not validated: a prompt cut short (a body
// over the scan limit) gives the text up to the cut, and a malformed one some text, never a
// panic. Apart from growing dst it allocates one small value; Blocks.SetPrompt, which hashes
// the text as it is read, allocates nothing once its storage has grown.
func AppendText(dst, prompt []byte) []byte {
	t := textBuf{b: dst}
	extract(prompt, &t)
	return t.b
}

// sink takes the routing text in pieces, in order.
type sink interface {
	add(p []byte)
	addByte(c byte)
}

type textBuf struct{ b []byte }

func (t *textBuf) add(p []byte)   { t.b = append(t.b, p...) }
func (t *textBuf) addByte(c byte) { t.b = append(t.b, c) }

// extractor is one pass over a prompt's raw JSON that writes its routing text to out. Every
// step consumes at least one byte or returns, so malformed input ends the pass.
type extractor struct {
	b       []byte
	i       int
	out     sink
	started bool // a fragment was written: the next one is preceded by a space
}

func extract(prompt []byte, out sink) {
	e := extractor{b: prompt, out: out}
	e.ws()
	if e.i >= len(e.b) {
		return
	}
	switch e.b[e.i] {
	case '"':
		e.str(true)
	case '[':
		e.array()
	}
}

func (e *extractor) ws() {
	for e.i < len(e.b) {
		switch e.b[e.i] {
		case ' ', '\t', '\n', '\r':
			e.i++
		default:
			return
		}
	}
}

// array reads the top-level array: strings are joined whatever their length, messages add
// their non-empty fragments.
func (e *extractor) array() {
	e.i++ // '['
	for {
		e.ws()
		if e.i >= len(e.b) {
			return
		}
		switch e.b[e.i] {
		case ']':
			return
		case ',':
			e.i++
		case '"':
			e.sep()
			e.started = true
			e.str(true)
		case '{':
			e.message()
		default:
			e.skipOrStep()
		}
	}
}

// sep writes the space between two fragments.
func (e *extractor) sep() {
	if e.started {
		e.out.addByte(' ')
	}
}

// span is the raw JSON of a value that is written later, once its object has been read.
type span struct{ start, end int }

func (s span) set() bool { return s.end > s.start }

// message reads one chat message. Its content is written as it is read; its role and its
// reasoning_content may come in any order, so the reasoning is written once the object ends.
func (e *extractor) message() {
	var role, reasoning span
	var kb keyBuf
	e.i++ // '{'
	for {
		key, ok := e.nextKey(&kb)
		if !ok {
			break
		}
		start := e.i
		switch string(key) {
		case "content":
			e.content()
		case "role":
			e.skip()
			role = span{start, e.i}
		case "reasoning_content":
			e.skip()
			reasoning = span{start, e.i}
		default:
			e.skip()
		}
	}
	if reasoning.set() && string(e.b[role.start:role.end]) == `"assistant"` {
		e.fragmentAt(reasoning.start)
	}
}

// content reads a message's content: a string, or an array of parts of which only the text
// parts count.
func (e *extractor) content() {
	if e.i >= len(e.b) {
		return
	}
	switch e.b[e.i] {
	case '"':
		e.fragment()
	case '[':
		e.i++
		for {
			e.ws()
			if e.i >= len(e.b) {
				return
			}
			switch e.b[e.i] {
			case ']':
				e.i++
				return
			case ',':
				e.i++
			case '{':
				e.part()
			default:
				e.skipOrStep()
			}
		}
	default:
		e.skip()
	}
}

// part reads one content part, written when its type is "text". The text is written as it is
// read when the type came first (the usual order), else once the object ends.
func (e *extractor) part() {
	var text span
	var kb keyBuf
	isText := false
	e.i++ // '{'
	for {
		key, ok := e.nextKey(&kb)
		if !ok {
			break
		}
		start := e.i
		switch string(key) {
		case "type":
			e.skip()
			isText = string(e.b[start:e.i]) == `"text"`
		case "text":
			if isText {
				e.fragment()
				continue
			}
			e.skip()
			text = span{start, e.i}
		default:
			e.skip()
		}
	}
	if isText && text.set() {
		e.fragmentAt(text.start)
	}
}

// fragmentAt writes the string value at start as a fragment, then resumes where it was.
func (e *extractor) fragmentAt(start int) {
	at := e.i
	e.i = start
	e.fragment()
	e.i = at
}

// fragment writes the string value at e.i, when it is a non-empty string, after a separator;
// any other value is skipped.
func (e *extractor) fragment() {
	if e.i >= len(e.b) || e.b[e.i] != '"' {
		e.skip()
		return
	}
	if e.i+1 >= len(e.b) || e.b[e.i+1] == '"' { // empty, or cut before its first byte
		e.i = min(e.i+2, len(e.b))
		return
	}
	e.sep()
	e.started = true
	e.str(true)
}

// keyBuf holds a decoded object key; the keys the pass looks for are shorter.
type keyBuf [24]byte

// nextKey moves past the separators of the object being read to its next key and returns the
// key, with e.i at the start of its value; false at the object's end. A key with escapes is
// decoded into kb.
func (e *extractor) nextKey(kb *keyBuf) ([]byte, bool) {
	for {
		e.ws()
		if e.i >= len(e.b) {
			return nil, false
		}
		switch e.b[e.i] {
		case '}':
			e.i++
			return nil, false
		case ',':
			e.i++
			continue
		case '"':
		default:
			e.skipOrStep()
			continue
		}
		start := e.i
		e.str(false)
		key := decodeKey(e.b[start:e.i], kb)
		e.ws()
		if e.i >= len(e.b) || e.b[e.i] != ':' {
			continue
		}
		e.i++
		e.ws()
		return key, true
	}
}

// decodeKey returns the contents of the quoted key raw: its raw bytes, or, when it has escapes,
// its decoded bytes in kb (nothing when they do not fit: no key the pass looks for is that long).
func decodeKey(raw []byte, kb *keyBuf) []byte {
	raw = raw[1:]
	if n := len(raw); n > 0 && raw[n-1] == '"' {
		raw = raw[:n-1]
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	out := kb[:0]
	k := extractor{b: raw}
	for k.i < len(k.b) {
		var u [utf8.UTFMax]byte
		n := 1
		if c := k.b[k.i]; c != '\\' {
			u[0] = c
			k.i++
		} else {
			u, n = k.unescape()
		}
		if len(out)+n > len(kb) {
			return nil
		}
		out = append(out, u[:n]...)
	}
	return out
}

// str reads the string at '"', writing its decoded contents when emit is set. A string the
// input cuts short is read to the end of the input.
func (e *extractor) str(emit bool) {
	e.i++ // '"'
	for e.i < len(e.b) {
		rest := e.b[e.i:]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			end = len(rest)
		}
		run := rest[:end]
		if bs := bytes.IndexByte(run, '\\'); bs >= 0 {
			run = run[:bs]
		}
		if emit && len(run) > 0 {
			e.out.add(run)
		}
		e.i += len(run)
		if e.i >= len(e.b) {
			return
		}
		if e.b[e.i] == '"' {
			e.i++
			return
		}
		u, n := e.unescape()
		if emit {
			for _, c := range u[:n] {
				e.out.addByte(c)
			}
		}
	}
}

// unescape reads the escape at '\\' and returns the bytes it stands for. A \u escape is
// decoded as encoding/json decodes it: a surrogate pair makes one rune, any other surrogate
// U+FFFD. What a malformed escape leaves is returned as it is.
func (e *extractor) unescape() (u [utf8.UTFMax]byte, n int) {
	e.i++ // '\\'
	if e.i >= len(e.b) {
		return u, 0
	}
	c := e.b[e.i]
	e.i++
	switch c {
	case 'b':
		c = '\b'
	case 'f':
		c = '\f'
	case 'n':
		c = '\n'
	case 'r':
		c = '\r'
	case 't':
		c = '\t'
	case 'u':
		r, ok := hex4(e.b[e.i:])
		if !ok {
			if len(e.b)-e.i < 4 { // cut short: nothing of it is text
				e.i = len(e.b)
			}
			return u, 0
		}
		e.i += 4
		if utf16.IsSurrogate(r) {
			r2 := rune(-1)
			if len(e.b)-e.i >= 6 && e.b[e.i] == '\\' && e.b[e.i+1] == 'u' {
				r2, _ = hex4(e.b[e.i+2:])
			}
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				e.i += 6
				r = dec
			} else {
				r = utf8.RuneError
			}
		}
		return u, utf8.EncodeRune(u[:], r)
	}
	u[0] = c // '"', '\\', '/', and what a malformed input puts there
	return u, 1
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skip consumes the value at e.i, nested ones included, without reading it; at a delimiter
// (',', ':', '}' or ']') it consumes nothing.
func (e *extractor) skip() {
	depth := 0
	for e.i < len(e.b) {
		switch e.b[e.i] {
		case '"':
			e.str(false)
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return
			}
			depth--
			if depth == 0 {
				e.i++
				return
			}
		case ',', ':':
			if depth == 0 {
				return
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return
			}
		}
		e.i++
	}
}

// skipOrStep skips the value at e.i, or a stray byte where no value starts.
func (e *extractor) skipOrStep() {
	at := e.i
	e.skip()
	if e.i == at {
		e.i++
	}
}
