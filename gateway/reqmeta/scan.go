package reqmeta

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/meshgw/meshgw/worker"
)

// maxDepth matches encoding/json's nesting limit, so both accept the same documents.
const maxDepth = 10000

// scanner is a single-pass JSON validator that records what routing needs. It does not
// allocate unless a string it keeps (the model) carries escapes or invalid UTF-8.
type scanner struct {
	b      []byte
	i      int
	trunc  bool // b is a prefix of the body: running out of input ends the scan without error
	depth  int
	m      *Meta
	prompt string // name of the route's prompt-bearing top-level field
}

// errEnd reports that a truncated scan ran out of input; Parse turns it into success.
type errEnd struct{}

func (errEnd) Error() string { return "end of scanned prefix" }

func (s *scanner) fail(what string) error {
	if s.i >= len(s.b) {
		if s.trunc {
			return errEnd{}
		}
		return &Error{Msg: "request body is not valid JSON: unexpected end of input"}
	}
	return &Error{Msg: "request body is not valid JSON: " + what + " at offset " + strconv.Itoa(s.i) +
		" (found " + strconv.QuoteRune(rune(s.b[s.i])) + ")"}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// document scans the top-level value, which must be an object, and what follows it.
func (s *scanner) document() error {
	s.ws()
	switch {
	case s.i >= len(s.b) && s.trunc:
		return errEnd{}
	case s.i >= len(s.b):
		return &Error{Msg: "request body is empty; want a JSON object"}
	case s.b[s.i] != '{':
		return &Error{Msg: "request body must be a JSON object"}
	}
	if err := s.object(true, false); err != nil {
		return err
	}
	s.ws()
	if s.i < len(s.b) {
		return s.fail("unexpected data after the top-level object")
	}
	return nil
}

// object scans an object starting at '{'. top marks the request object, whose keys carry the
// routing fields; content marks objects inside the prompt, whose "type" names media parts.
func (s *scanner) object(top, content bool) error {
	if s.depth++; s.depth > maxDepth {
		return &Error{Msg: "request body is nested too deeply"}
	}
	s.i++ // '{'
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected a string key")
		}
		k0, k1, kesc, err := s.str()
		if err != nil {
			return err
		}
		key := s.b[k0:k1]
		if kesc {
			key = decodeString(s.b[k0-1 : k1+1])
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("expected ':' after an object key")
		}
		s.i++
		s.ws()
		if top {
			err = s.topField(key)
		} else if content && string(key) == "type" && s.i < len(s.b) && s.b[s.i] == '"' {
			err = s.partType()
		} else {
			err = s.value(content)
		}
		if err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected ',' or '}' in an object")
		}
	}
}

// topField scans the value of a top-level key and records the routing fields.
func (s *scanner) topField(key []byte) error {
	start := s.i
	switch string(key) {
	case "model":
		return s.model()
	case "stream":
		return s.stream()
	case "modalities":
		return s.modalities()
	case "audio":
		if err := s.value(false); err != nil {
			return err
		}
		if string(s.b[start:s.i]) != "null" {
			s.m.Caps |= worker.CapAudioOutput
		}
		return nil
	case "image_data", "audio_data", "video_data", // SGLang's native /generate media fields
		"images", "image", "audios", "audio_inputs", "videos", "video": // and the Omni router's
		return s.media(mediaField(key[0]))
	}
	if string(key) == s.prompt {
		err := s.value(true)
		if err == nil || s.trunc {
			s.m.Prompt = s.b[start:s.i]
		}
		return err
	}
	return s.value(false)
}

// media scans the value of a top-level media field and requires c when it carries something.
// A value the scanned prefix cuts off carries something once it has a byte past its opening.
func (s *scanner) media(c worker.Capability) error {
	start := s.i
	err := s.value(false)
	v := s.b[start:s.i]
	if err != nil {
		v = s.b[start:]
	}
	if given(v, err != nil) {
		s.m.Caps |= c
	}
	return err
}

// given reports whether the raw JSON value v carries anything: it is not null, false, "", [] or
// {} (what the SGLang-Omni router, in Python, reads as false). cut says v is the start of a value
// the scan did not see the end of.
func given(v []byte, cut bool) bool {
	switch string(v) {
	case "null", "false", `""`, "[]", "{}":
		return false
	}
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case '[', '{':
		inner := v[1:]
		if !cut {
			inner = inner[:len(inner)-1]
		}
		for _, c := range inner {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return true
			}
		}
		return false
	case '"':
		return len(v) > 1
	case 'n', 'f': // null or false, cut short
		return !cut
	}
	return true
}

func mediaField(first byte) worker.Capability {
	switch first {
	case 'i':
		return worker.CapImageInput
	case 'a':
		return worker.CapAudioInput
	}
	return worker.CapVideoInput
}

func (s *scanner) model() error {
	if s.i < len(s.b) && s.b[s.i] == '"' {
		a, b, esc, err := s.str()
		if err != nil {
			return err
		}
		raw := s.b[a:b]
		if esc || !utf8.Valid(raw) {
			raw = decodeString(s.b[a-1 : b+1])
		}
		s.m.Model, s.m.ModelSet = raw, true
		return nil
	}
	if s.lit("null") {
		s.m.Model, s.m.ModelSet = nil, true
		return nil
	}
	if s.i >= len(s.b) {
		return s.fail("")
	}
	if s.cutLiteral("null") {
		return errEnd{}
	}
	return &Error{Msg: "field \"model\" must be a string"}
}

func (s *scanner) stream() error {
	switch {
	case s.lit("true"):
		s.m.Stream, s.m.StreamSet = true, true
	case s.lit("false"):
		s.m.Stream, s.m.StreamSet = false, true
	case s.lit("null"):
		s.m.Stream, s.m.StreamSet = false, false
	case s.i >= len(s.b):
		return s.fail("")
	case s.cutLiteral("true", "false", "null"):
		return errEnd{}
	default:
		return &Error{Msg: "field \"stream\" must be a boolean"}
	}
	return nil
}

// modalities marks audio output when the array names "audio".
func (s *scanner) modalities() error {
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return s.value(false)
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.ws()
		start := s.i
		if err := s.value(false); err != nil {
			return err
		}
		if string(s.b[start:s.i]) == `"audio"` {
			s.m.Caps |= worker.CapAudioOutput
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or ']' in an array")
		}
	}
}

// partTypes maps the "type" of a content part to the capability it needs, as the SGLang-Omni
// router infers it (OpenAI chat parts, Responses API parts, and the bare forms).
var partTypes = map[string]worker.Capability{
	"image_url": worker.CapImageInput, "input_image": worker.CapImageInput, "image": worker.CapImageInput,
	"input_audio": worker.CapAudioInput, "audio_url": worker.CapAudioInput, "audio": worker.CapAudioInput,
	"video_url": worker.CapVideoInput, "input_video": worker.CapVideoInput, "video": worker.CapVideoInput,
}

func (s *scanner) partType() error {
	a, b, esc, err := s.str()
	if err != nil {
		return err
	}
	v := s.b[a:b]
	if esc {
		v = decodeString(s.b[a-1 : b+1])
	}
	s.m.Caps |= partTypes[string(v)]
	return nil
}

// value scans any JSON value.
func (s *scanner) value(content bool) error {
	if s.i >= len(s.b) {
		return s.fail("")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(false, content)
	case c == '[':
		return s.array(content)
	case c == '"':
		_, _, _, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case s.lit("true"), s.lit("false"), s.lit("null"):
		return nil
	}
	if s.cutLiteral("true", "false", "null") {
		return errEnd{}
	}
	return s.fail("invalid value")
}

func (s *scanner) array(content bool) error {
	if s.depth++; s.depth > maxDepth {
		return &Error{Msg: "request body is nested too deeply"}
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if err := s.value(content); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected ',' or ']' in an array")
		}
	}
}

// str scans a string at '"' and returns the bounds of its raw contents and whether it holds
// escapes.
func (s *scanner) str() (start, end int, esc bool, err error) {
	s.i++
	start = s.i
	for s.i < len(s.b) {
		// Skip plain bytes in a tight loop; only quotes, backslashes and control characters stop it.
		for s.i < len(s.b) && !strStop[s.b[s.i]] {
			s.i++
		}
		if s.i >= len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			end = s.i
			s.i++
			return start, end, esc, nil
		case c == '\\':
			esc = true
			if err := s.escape(); err != nil {
				return 0, 0, false, err
			}
			continue
		case c < 0x20:
			return 0, 0, false, s.fail("control character in a string")
		}
		s.i++
	}
	return 0, 0, false, s.fail("")
}

// strStop marks the bytes that end a run of plain string content.
var strStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func (s *scanner) escape() error {
	s.i++ // '\'
	if s.i >= len(s.b) {
		return s.fail("")
	}
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return nil
	case 'u':
		s.i++
		for k := 0; k < 4; k++ {
			if s.i >= len(s.b) {
				return s.fail("")
			}
			if !isHex(s.b[s.i]) {
				return s.fail("invalid \\u escape")
			}
			s.i++
		}
		return nil
	}
	return s.fail("invalid escape")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *scanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		return s.fail("")
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if !s.digits() {
		return s.fail("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return s.fail("invalid number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return s.fail("invalid number")
		}
	}
	return nil
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// cutLiteral reports whether the scan is of a truncated prefix whose cut split one of words:
// what is left of the input is a proper prefix of it.
func (s *scanner) cutLiteral(words ...string) bool {
	if !s.trunc {
		return false
	}
	rest := s.b[s.i:]
	for _, w := range words {
		if len(rest) < len(w) && w[:len(rest)] == string(rest) {
			return true
		}
	}
	return false
}

// lit consumes the literal word when it is next.
func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// decodeString decodes a quoted JSON string exactly as encoding/json does (escapes, and invalid
// UTF-8 replaced by U+FFFD). It allocates, and runs only for strings that need it.
func decodeString(quoted []byte) []byte {
	var v string
	if err := json.Unmarshal(quoted, &v); err != nil {
		return quoted
	}
	return []byte(v)
}
