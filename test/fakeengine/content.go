package fakeengine

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Routes of the model API, as the gateway forwards them over every transport.
const (
	RouteChat        = "/v1/chat/completions"
	RouteCompletions = "/v1/completions"
	RouteEmbeddings  = "/v1/embeddings"
	RouteGenerate    = "/generate"
)

// echoRunes is how much of the prompt an answer repeats.
const echoRunes = 40

const (
	contentJSON = "application/json"
	contentSSE  = "text/event-stream"
)

// reply is a planned answer, before faults decide how (or whether) it is delivered.
type reply struct {
	status      int
	contentType string
	body        []byte   // a non-streamed answer
	events      [][]byte // a streamed answer: one SSE payload per chunk, without the final [DONE]
	tokens      int      // output tokens: the first tokens events of a stream carry one each
	// sequence is the prompt followed by the answer as the next turn's routing text repeats
	// them (a chat's messages are joined by one space), what an engine that caches answers
	// keeps once the request finishes; empty for an embedding.
	sequence string
}

var doneEvent = []byte("[DONE]")

// AnswerText is the text the engine named node answers to a prompt: it names the node and
// echoes the first 40 characters of the prompt (the last user message of a chat), so that tests
// can check who answered what. Streamed chunks concatenate to the same text.
func AnswerText(node, prompt string) string {
	return "fake answer from " + node + " to: " + firstRunes(prompt, echoRunes)
}

// plan builds the answer to a parsed request, with chunks output tokens (one per streamed
// chunk) and the prompt's token usage.
func (e *Engine) plan(p parsed, chunks int, u tokenUsage) reply {
	id := strconv.FormatUint(e.nextID.Add(1), 10)
	a := answer{e: e, id: id, created: time.Now().Unix(), chunks: chunks, usage: u,
		includeUsage: p.stream && p.rb.StreamOptions != nil && p.rb.StreamOptions.IncludeUsage}
	var r reply
	switch p.route {
	case RouteChat:
		a.prompt = lastUserMessage(p.messages)
		r = a.chat(p.stream)
		r.sequence = e.answerSequence(p.text, " ", &a)
	case RouteCompletions:
		a.prompt = p.text
		r = a.completion(p.stream)
		r.sequence = e.answerSequence(p.text, "", &a)
	case RouteGenerate:
		a.prompt = p.text
		r = a.generate(p.stream)
		r.sequence = e.answerSequence(p.text, "", &a)
	case RouteEmbeddings:
		a.chunks = 0 // no output tokens
		return a.embeddings(p.rb.Input)
	}
	r.tokens = chunks
	return r
}

// answerSequence is the prompt, sep and the answer, when the engine caches answers ("" when
// it does not).
func (e *Engine) answerSequence(prompt, sep string, a *answer) string {
	if e.cache == nil || !e.cfg.Compute.CacheAnswers {
		return ""
	}
	return prompt + sep + a.text()
}

// answer holds what every shape of one answer shares.
type answer struct {
	e       *Engine
	id      string
	created int64
	prompt  string // what the answer echoes
	txt     string // text(), once made
	chunks  int    // output tokens
	usage   tokenUsage
	// includeUsage adds a last chunk with the usage and no choices to a stream, as OpenAI and
	// vLLM do for stream_options.include_usage.
	includeUsage bool
}

// text is the answer's text (AnswerText), made once: the answer's shape and the sequence an
// engine that caches answers keeps both use it.
func (a *answer) text() string {
	if a.txt == "" {
		a.txt = AnswerText(a.e.nodeName(), a.prompt)
	}
	return a.txt
}

// appendUsage appends the usage object in OpenAI's shape, as vLLM fills it: the prompt's
// cached tokens in prompt_tokens_details.
func (a *answer) appendUsage(b []byte) []byte {
	p := a.usage.prompt
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(a.chunks), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(p+a.chunks), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(a.usage.cached), 10)
	return append(b, "}}"...)
}

// withUsageChunk adds the usage chunk of include_usage to a streamed reply: the head of the
// other chunks, no choices, and the usage.
func (a *answer) withUsageChunk(r reply, idPrefix, object string) reply {
	if !a.includeUsage {
		return r
	}
	b := a.head(make([]byte, 0, 256), idPrefix, object)
	b = append(b, `,"choices":[],`...)
	r.events = append(r.events, append(a.appendUsage(b), '}'))
	return r
}

// head appends the fields every OpenAI object starts with.
func (a *answer) head(b []byte, idPrefix, object string) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, idPrefix...)
	b = append(b, a.id...)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, a.created, 10)
	b = append(b, `,"model":`...)
	return appendJSONString(b, a.e.cfg.Model)
}

func (a *answer) chat(stream bool) reply {
	text := a.text()
	if !stream {
		b := a.head(make([]byte, 0, 256+len(text)), "chatcmpl-fake-", "chat.completion")
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		b = appendJSONString(b, text)
		b = append(b, `},"finish_reason":"stop"}],`...)
		return jsonReply(append(a.appendUsage(b), '}'))
	}
	return a.withUsageChunk(a.streamed(text, func(b []byte, i int, piece string) []byte {
		b = a.head(b, "chatcmpl-fake-", "chat.completion.chunk")
		b = append(b, `,"choices":[{"index":0,"delta":{`...)
		if i == 0 {
			b = append(b, `"role":"assistant",`...)
		}
		b = append(b, `"content":`...)
		b = appendJSONString(b, piece)
		b = append(b, `},"finish_reason":`...)
		return append(appendFinish(b, i == a.chunks-1, `"stop"`), "}]}"...)
	}), "chatcmpl-fake-", "chat.completion.chunk")
}

func (a *answer) completion(stream bool) reply {
	text := a.text()
	if !stream {
		b := a.head(make([]byte, 0, 256+len(text)), "cmpl-fake-", "text_completion")
		b = append(b, `,"choices":[{"index":0,"text":`...)
		b = appendJSONString(b, text)
		b = append(b, `,"logprobs":null,"finish_reason":"stop"}],`...)
		return jsonReply(append(a.appendUsage(b), '}'))
	}
	return a.withUsageChunk(a.streamed(text, func(b []byte, i int, piece string) []byte {
		b = a.head(b, "cmpl-fake-", "text_completion")
		b = append(b, `,"choices":[{"index":0,"text":`...)
		b = appendJSONString(b, piece)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
		return append(appendFinish(b, i == a.chunks-1, `"stop"`), "}]}"...)
	}), "cmpl-fake-", "text_completion")
}

// generate answers SGLang's native route. Like SGLang, each streamed event carries the whole
// text so far, so the last event's text equals the non-streamed text, and every event's
// meta_info carries prompt_tokens and cached_tokens.
func (a *answer) generate(stream bool) reply {
	text := a.text()
	meta := func(b []byte, done bool, completion int) []byte {
		b = append(b, `,"meta_info":{"id":"fake-`...)
		b = append(b, a.id...)
		b = append(b, `","finish_reason":`...)
		b = appendFinish(b, done, `{"type":"stop"}`)
		b = append(b, `,"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(a.usage.prompt), 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, int64(completion), 10)
		b = append(b, `,"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(a.usage.cached), 10)
		b = append(b, `,"weight_version":`...)
		b = appendJSONString(b, a.e.WeightVersion())
		return append(b, "}}"...)
	}
	if !stream {
		b := append(make([]byte, 0, 256+len(text)), `{"text":`...)
		b = appendJSONString(b, text)
		return jsonReply(meta(b, true, a.chunks))
	}
	sofar := 0
	return a.streamed(text, func(b []byte, i int, piece string) []byte {
		sofar += len(piece)
		b = append(b, `{"text":`...)
		b = appendJSONString(b, text[:sofar])
		return meta(b, i == a.chunks-1, i+1)
	})
}

// streamed splits text into a.chunks pieces of nearly equal length (some empty when the text is
// shorter) and renders one event per piece into a single buffer.
func (a *answer) streamed(text string, event func(b []byte, i int, piece string) []byte) reply {
	n := utf8.RuneCountInString(text)
	buf := make([]byte, 0, a.chunks*(200+len(text)/a.chunks))
	ends := make([]int, a.chunks)
	start, r := 0, 0
	for i := range a.chunks {
		end := start
		for want := (i + 1) * n / a.chunks; r < want; r++ {
			_, size := utf8.DecodeRuneInString(text[end:])
			end += size
		}
		buf = event(buf, i, text[start:end])
		ends[i] = len(buf)
		start = end
	}
	events := make([][]byte, a.chunks)
	from := 0
	for i, to := range ends {
		events[i] = buf[from:to:to]
		from = to
	}
	return reply{status: 200, contentType: contentSSE, events: events}
}

// embeddings answers one small deterministic vector per input: the same input always gets the
// same vector. The usage is the prompt's, the inputs joined (routingText), as every answer's.
func (a *answer) embeddings(input json.RawMessage) reply {
	// A string or a list of token ids is one input; a list of those is several.
	items := []json.RawMessage{input}
	if input[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal(input, &list) == nil && len(list) > 0 && !isNumber(list[0]) {
			items = list
		}
	}
	b := append(make([]byte, 0, 160+len(items)*160), `{"object":"list","data":[`...)
	for i, item := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		b = appendVector(b, item)
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendJSONString(b, a.e.cfg.Model)
	b = append(b, ',')
	return jsonReply(append(a.appendUsage(b), '}'))
}

// EmbeddingDim is the length of the fake embedding vectors.
const EmbeddingDim = 8

func appendVector(b []byte, item []byte) []byte {
	sum := sha256.Sum256(item)
	b = append(b, '[')
	for i := range EmbeddingDim {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(int8(sum[i]))/128, 'g', -1, 64)
	}
	return append(b, ']')
}

func isNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

func appendFinish(b []byte, done bool, reason string) []byte {
	if done {
		return append(b, reason...)
	}
	return append(b, "null"...)
}

func jsonReply(body []byte) reply {
	return reply{status: 200, contentType: contentJSON, body: body}
}

// errorReply is an answer in the OpenAI error envelope.
func errorReply(status int, typ, msg string) reply {
	b := append(make([]byte, 0, 96+len(msg)), `{"error":{"message":`...)
	b = appendJSONString(b, msg)
	b = append(b, `,"type":"`...)
	b = append(b, typ...)
	b = append(b, `","param":null,"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	return reply{status: status, contentType: contentJSON, body: append(b, "}}"...)}
}

// faultReply is the answer to a request picked by error_status.
func faultReply(status int) reply {
	typ := "server_error"
	switch {
	case status == 429:
		typ = "rate_limit_error"
	case status < 500:
		typ = "invalid_request_error"
	}
	return errorReply(status, typ, "fake engine error "+strconv.Itoa(status)+" (injected fault)")
}

// lastUserMessage returns the text of the last user message of a chat: its content string, or
// its text parts joined.
func lastUserMessage(msgs []chatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != "user" {
			continue
		}
		if s := firstString(m.Content); s != "" || len(m.Content) == 0 || m.Content[0] != '[' {
			return s
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		var sb strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				sb.WriteString(p.Text)
			}
		}
		return sb.String()
	}
	return ""
}

// firstString decodes a JSON string, or the first string of a JSON list of strings; anything
// else (token ids, null) gives "".
func firstString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if raw[0] == '"' {
		_ = json.Unmarshal(raw, &s)
		return s
	}
	if raw[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) == nil && len(list) > 0 && len(list[0]) > 0 && list[0][0] == '"' {
			_ = json.Unmarshal(list[0], &s)
		}
	}
	return s
}

func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
