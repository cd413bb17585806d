package admin

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// checkText refuses a JSON body with a string, a key or a value, that is not valid UTF-8:
// raw bytes that are not, or an escaped lone surrogate ("\ud800"). encoding/json would quietly
// turn either into U+FFFD, storing text the client did not send, and records travel in
// protobuf strings, which must be valid UTF-8. The 400 names the field ("labels.k",
// "models[1]"). A body that is not JSON passes: the decoder that follows refuses it.
func checkText(data []byte) *apiError {
	if utf8.Valid(data) && !bytes.Contains(data, []byte(`\ud`)) && !bytes.Contains(data, []byte(`\uD`)) {
		return nil
	}
	var stack []textFrame
	d := json.NewDecoder(bytes.NewReader(data))
	for prev := int64(0); ; {
		tok, err := d.Token()
		if err != nil {
			return nil // the end, or not JSON: the decoder that follows says so
		}
		raw := data[prev:d.InputOffset()]
		prev = d.InputOffset()
		if delim, ok := tok.(json.Delim); ok {
			switch delim {
			case '{', '[':
				stack = append(stack, textFrame{obj: delim == '{', wantKey: delim == '{'})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 {
					stack[len(stack)-1].done()
				}
			}
			continue
		}
		s, isString := tok.(string)
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			if !validText(raw) {
				if p := textPath(stack); p != "" {
					return errorf(400, codeInvalidField, p+": a key is not valid UTF-8")
				}
				return errorf(400, codeInvalidField, "a key of the body is not valid UTF-8")
			}
			stack[n-1].key, stack[n-1].wantKey = s, false
			continue
		}
		if isString && !validText(raw) {
			return errorf(400, codeInvalidField, textPath(stack)+": not valid UTF-8")
		}
		if n := len(stack); n > 0 {
			stack[n-1].done()
		}
	}
}

// textFrame is an object or a list checkText is inside.
type textFrame struct {
	obj     bool
	wantKey bool   // an object's next token is a key
	key     string // an object's current key
	n       int    // a list's current index
}

// done moves f past one value.
func (f *textFrame) done() {
	if f.obj {
		f.wantKey, f.key = true, ""
	} else {
		f.n++
	}
}

// textPath names the value the stack is at: "a.b[1]".
func textPath(stack []textFrame) string {
	var b strings.Builder
	for _, f := range stack {
		switch {
		case f.obj && f.key != "":
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		case !f.obj:
			b.WriteString("[" + strconv.Itoa(f.n) + "]")
		}
	}
	return b.String()
}

// validText reports whether raw, the bytes of one JSON token, is valid UTF-8 and escapes no
// lone surrogate.
func validText(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // an escaped character, maybe a backslash
			continue
		}
		r, ok := hex4(raw[i+2:])
		i += 5
		switch {
		case !ok || !utf16.IsSurrogate(r):
		case r >= 0xdc00: // a low surrogate with no high one before it
			return false
		default: // a high surrogate: a low one must follow
			lo, ok := rune(0), false
			if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				lo, ok = hex4(raw[i+3:])
			}
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return false
			}
			i += 6
		}
	}
	return true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v), err == nil
}
