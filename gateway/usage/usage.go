// Package usage reads what an engine's answer says about its prompt and its prefix cache: the
// prompt's tokens and how many of them the engine found cached. Two shapes are read:
//
//   - OpenAI's, as vLLM and SGLang's OpenAI routes fill it:
//     "usage":{"prompt_tokens":N,...,"prompt_tokens_details":{"cached_tokens":M}}
//   - SGLang's native /generate: "meta_info":{"prompt_tokens":N,...,"cached_tokens":M}
//
// The reader looks only at the end of an answer, where engines put these objects (after the
// choices or the text), reading backwards from its last byte, so its cost does not grow with
// the answer: at most Window bytes, and for a stream at most its last event. For a stream, Tail
// keeps the last Window bytes passing through, and Scan reads them once the stream ends: the
// last event's report wins, as it carries the totals. Nothing here allocates.
package usage

// Window is how many bytes at the end of an answer Scan reads.
const Window = 2048

// maxTokens bounds a count Scan accepts: larger numbers are taken for garbage (no prompt comes
// near 2^40 tokens) and keep the counters far from overflowing.
const maxTokens = 1 << 40

// Tokens is one answer's report: the prompt's tokens, and how many of them were cached.
type Tokens struct {
	Prompt, Cached uint64
}

const (
	keyUsage    = `"usage"`
	keyMetaInfo = `"meta_info"`
)

// Scan returns the last complete report in the last Window bytes of b, and whether there is
// one. A report counts only with both numbers, whole and non-negative, cached not above
// prompt: an engine that does not report its cache (vLLM without
// --enable-prompt-tokens-details, where prompt_tokens_details is null) is not counted.
//
// It reads backwards from the end, where the report is, and stops at the first usage or
// meta_info key, whether or not its report can be read (an answer that does not report its
// cache costs only the bytes after its usage key), or at the start of the last JSON event of a
// stream ("data: {"): the report of a stream is in its last event, and a stream that reports
// nothing costs only its last event's bytes.
func Scan(b []byte) (Tokens, bool) {
	if len(b) > Window {
		b = b[len(b)-Window:]
	}
	for i := len(b) - 1; i >= 0; i-- {
		switch b[i] {
		case '"':
			end := i + 1
			flat := false
			switch {
			case end >= len(keyUsage) && string(b[end-len(keyUsage):end]) == keyUsage:
				if !keyPosition(b, end-len(keyUsage)) {
					continue
				}
			case end >= len(keyMetaInfo) && string(b[end-len(keyMetaInfo):end]) == keyMetaInfo:
				if !keyPosition(b, end-len(keyMetaInfo)) {
					continue
				}
				flat = true
			default:
				continue
			}
			if t, ok, key := readReport(b, end, flat); key {
				// The last usage or meta_info key is the answer's report (or its stream's
				// last): one that cannot be read, null or without a cached count, ends the
				// search, as an earlier one belongs to a nested object or an earlier event.
				return t, ok
			}
		case ':':
			if j := skipSpace(b, i+1); i >= 4 && string(b[i-4:i]) == "data" && j < len(b) && b[j] == '{' {
				return Tokens{}, false // the start of the stream's last JSON event
			}
		}
	}
	return Tokens{}, false
}

// keyPosition reports whether the quote at i can open an object key: the byte before it (past
// white space) opens the object or ends the previous member. The start of b counts, since b
// may begin anywhere in the answer.
func keyPosition(b []byte, i int) bool {
	for i--; i >= 0; i-- {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', ',':
			return true
		}
		return false
	}
	return true
}

// readReport reads `: {...}` at i, the value after a usage or meta_info key: the report, whether
// it was read, and whether a colon follows at all (whether the text before i was a key).
func readReport(b []byte, i int, flat bool) (Tokens, bool, bool) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return Tokens{}, false, false
	}
	i = skipSpace(b, i+1)
	var prompt, cached uint64
	var hasPrompt, hasCached bool
	_, ok := members(b, i, func(key []byte, v int) (int, bool) {
		switch {
		case string(key) == "prompt_tokens":
			n, end, ok := number(b, v)
			prompt, hasPrompt = n, ok
			return end, ok
		case flat && string(key) == "cached_tokens":
			n, end, ok := number(b, v)
			cached, hasCached = n, ok
			return end, ok
		case !flat && string(key) == "prompt_tokens_details":
			if v < len(b) && b[v] == '{' {
				return members(b, v, func(key []byte, v int) (int, bool) {
					if string(key) == "cached_tokens" {
						n, end, ok := number(b, v)
						cached, hasCached = n, ok
						return end, ok
					}
					return skipValue(b, v)
				})
			}
		}
		return skipValue(b, v)
	})
	if !ok || !hasPrompt || !hasCached || cached > prompt {
		return Tokens{}, false, true
	}
	return Tokens{Prompt: prompt, Cached: cached}, true, true
}

// members walks the object that opens at i, calling member with each key and the offset of its
// value; member returns the offset past the value. It returns the offset past the object, and
// false when b holds no complete, well-formed object there.
func members(b []byte, i int, member func(key []byte, v int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		end, ok := skipString(b, i)
		if !ok {
			return 0, false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		if i, ok = member(key, skipSpace(b, i+1)); !ok {
			return 0, false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return 0, false
		}
	}
}

// number reads a non-negative integer below maxTokens at i.
func number(b []byte, i int) (uint64, int, bool) {
	var n uint64
	start := i
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + uint64(b[i]-'0')
		if n >= maxTokens {
			return 0, 0, false
		}
	}
	if i == start || (i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E')) {
		return 0, 0, false
	}
	return n, i, true
}

// skipValue returns the offset past the JSON value at i: a string, an object or array (nested
// ones and the strings inside them skipped whole), or a number or literal.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i, i > start
		}
		i++
	}
	return 0, false
}

// skipString returns the offset past the string whose opening quote is at i.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// Tail keeps the last Window bytes (at least) written to it, for Scan at the end of a stream.
// Its zero value is empty; Reset empties it for the next stream. Write copies what it is given,
// and moves Window bytes now and then to make room, so a stream costs about two copies of each
// byte here.
type Tail struct {
	buf [2 * Window]byte
	n   int
}

// Reset empties the tail.
func (t *Tail) Reset() { t.n = 0 }

// Write appends b, dropping what falls out of the window.
func (t *Tail) Write(b []byte) {
	if len(b) >= Window {
		t.n = copy(t.buf[:], b[len(b)-Window:])
		return
	}
	if t.n+len(b) > len(t.buf) {
		keep := Window - len(b)
		t.n = copy(t.buf[:], t.buf[t.n-keep:t.n])
	}
	t.n += copy(t.buf[t.n:], b)
}

// Bytes returns what the tail holds, oldest first; valid until the next Write or Reset.
func (t *Tail) Bytes() []byte { return t.buf[:t.n] }
