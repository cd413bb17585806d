package fakeengine

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// Tokens are counted from characters (bytes): one token per charsPerToken bytes of text,
// rounded up, roughly what a BPE tokenizer makes of English prose.
const charsPerToken = 4

// tokensOf is the stand-in token count of n bytes of text.
func tokensOf(n int) int { return (n + charsPerToken - 1) / charsPerToken }

// promptTokens is the token count of a prompt, at least 1 (an engine always computes one).
func promptTokens(s string) int { return max(1, tokensOf(len(s))) }

// routingText is the prompt as the engine sees it: the same text as meshgw's routing text
// (docs/routing.md, "The routing text"), so that the prefix a gateway's index says a worker
// holds is the prefix its engine caches. The engine reads it on its own, as a real engine
// would, from the route's prompt field (a chat's messages, a completion's prompt, /generate's
// text, an embedding's input):
//
//   - a string: its text;
//   - an array (a batched completion, /generate's or an embedding's list): its strings joined by
//     one space, empty ones included; other elements (token ids) are skipped. A batch is one
//     prompt: the engine answers it with one choice (an embedding, one vector per input) and
//     caches the joined text, which is what the gateway routed;
//   - a chat's messages, of every role, in order: a message's content when it is a string, or
//     the text of each content part whose type is "text", then an assistant's
//     reasoning_content; the non-empty pieces joined by one space.
//
// Escapes are decoded as encoding/json decodes them; bytes that are not UTF-8 are kept, as the
// gateway keeps them.
func routingText(p *parsed) string {
	var t promptText
	switch p.route {
	case RouteChat:
		for i := range p.messages {
			t.message(&p.messages[i])
		}
	case RouteCompletions:
		t.value(p.rb.Prompt)
	case RouteGenerate:
		t.value(p.rb.Text)
	case RouteEmbeddings:
		t.value(p.rb.Input)
	}
	return string(t.b)
}

// promptText builds a routing text piece by piece.
type promptText struct {
	b       []byte
	started bool // a piece was written: the next one is preceded by a space
}

// value reads a prompt field: a string, or an array of strings (or of messages, which the
// gateway reads the same wherever they are).
func (t *promptText) value(raw json.RawMessage) {
	switch firstByte(raw) {
	case '"':
		t.str(raw)
	case '[':
		var items []json.RawMessage
		_ = json.Unmarshal(raw, &items)
		for _, item := range items {
			switch item[0] {
			case '"':
				t.str(item)
			case '{':
				var m chatMessage
				if json.Unmarshal(item, &m) == nil {
					t.message(&m)
				}
			}
		}
	}
}

// message writes a chat message's non-empty pieces: its content, then an assistant's
// reasoning_content.
func (t *promptText) message(m *chatMessage) {
	switch firstByte(m.Content) {
	case '"':
		t.fragment(m.Content)
	case '[':
		var parts []json.RawMessage
		_ = json.Unmarshal(m.Content, &parts)
		for _, raw := range parts {
			var part struct {
				Type json.RawMessage `json:"type"`
				Text json.RawMessage `json:"text"`
			}
			if raw[0] == '{' && json.Unmarshal(raw, &part) == nil && string(part.Type) == `"text"` {
				t.fragment(part.Text)
			}
		}
	}
	if m.Role == "assistant" {
		t.fragment(m.ReasoningContent)
	}
}

// str writes a string, even an empty one, after a separator.
func (t *promptText) str(raw json.RawMessage) {
	if t.started {
		t.b = append(t.b, ' ')
	}
	t.started = true
	t.b = appendStringText(t.b, raw)
}

// fragment writes raw when it is a non-empty string, after a separator.
func (t *promptText) fragment(raw json.RawMessage) {
	if firstByte(raw) == '"' && len(raw) > 2 {
		t.str(raw)
	}
}

// firstByte is the first byte of a JSON value, 0 when there is none.
func firstByte(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// appendStringText appends the text of raw, a valid JSON string with its quotes: its escapes
// decoded as encoding/json decodes them (a surrogate that is not half of a pair becomes
// U+FFFD), its other bytes as they are, so that bytes that are not UTF-8 stay.
func appendStringText(b []byte, raw []byte) []byte {
	s := raw[1 : len(raw)-1]
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(b, s...)
		}
		b = append(b, s[:i]...)
		c := s[i+1]
		s = s[i+2:]
		switch c {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s)
			s = s[4:]
			if utf16.IsSurrogate(r) {
				next := rune(-1)
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					next = hex4(s[2:])
				}
				if pair := utf16.DecodeRune(r, next); pair != utf8.RuneError {
					r, s = pair, s[6:]
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default: // '"', '\\', '/'
			b = append(b, c)
		}
	}
}

// hex4 decodes the four hex digits a valid \u escape has; -1 if they are not.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
