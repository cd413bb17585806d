package prefixindex

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendText(t *testing.T) {
	tests := []struct {
		name, prompt, want string
	}{
		{"completion string", `"Once upon a time"`, "Once upon a time"},
		{"empty string", `""`, ""},
		{"string array joined, empties kept", `["a", "", "b"]`, "a  b"},
		{"embedding batch skips non-strings", `["x", 1, null, ["y"], "z"]`, "x z"},
		{"token ids give no text", `[1, 2, 3]`, ""},
		{"null", `null`, ""},
		{"number", `42`, ""},
		{"object", `{"text": "no"}`, ""},
		{"chat, every role, one space", `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"tool","content":"42","tool_call_id":"c"},{"role":"developer","content":"dev"},{"role":"function","name":"f","content":"fn"}]`,
			"Be brief. Hi Hello 42 dev fn"},
		{"text parts only, in order", `[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":"at this"}]}]`,
			"look at this"},
		{"audio and video parts count for nothing", `[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"video_url","video_url":{"url":"v"}},{"type":"text","text":"transcribe"}]}]`,
			"transcribe"},
		{"a part whose text comes before its type", `[{"role":"user","content":[{"text":"late","type":"text"},{"text":"img","type":"image_url"}]}]`, "late"},
		{"empty messages add no space", `[{"role":"system","content":""},{"role":"user","content":[]},{"role":"user","content":null},{"role":"assistant"},{"role":"user","content":[{"type":"text","text":""}]},{"role":"user","content":"q"}]`,
			"q"},
		{"only images: no text", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]`, ""},
		{"assistant reasoning after content", `[{"reasoning_content":"think","role":"assistant","content":"answer"},{"role":"user","content":"next"}]`,
			"answer think next"},
		{"reasoning of other roles ignored", `[{"role":"user","content":"a","reasoning_content":"no"}]`, "a"},
		{"escapes decoded", `[{"role":"user","content":"line\nnext \"q\" \\ \/ \u00e9 \ud83d\ude00 \t"}]`, "line\nnext \"q\" \\ / é 😀 \t"},
		{"lone surrogate is U+FFFD", `"a\ud800b\udc00c"`, "a\uFFFDb\uFFFDc"},
		{"escaped key", `[{"r\u006fle":"user","c\u006fntent":"k"}]`, "k"},
		{"non-UTF-8 bytes kept", "\"a\xffb\"", "a\xffb"},
		{"whitespace around", " \n[ {\"role\" : \"user\" , \"content\" : \"w\" } ]\t", "w"},
		{"cut short inside a string", `[{"role":"user","content":"abc`, "abc"},
		{"cut short inside an escape", `"ab\u00`, "ab"},
		{"cut short after a message", `[{"role":"user","content":"one"},{"role":"user","con`, "one"},
		{"nested junk skipped", `[{"role":"user","extra":{"a":[1,{"b":"}"}]},"content":"ok"}]`, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendText(nil, []byte(tt.prompt))); got != tt.want {
				t.Errorf("AppendText(%s) = %q, want %q", tt.prompt, got, tt.want)
			}
		})
	}
}

// TestAppendTextMatchesReference checks the single pass against a decode with encoding/json
// and SMG's rules written plainly.
func TestAppendTextMatchesReference(t *testing.T) {
	for _, p := range seedPrompts {
		want, ok := referenceText([]byte(p))
		if !ok {
			t.Fatalf("seed %s is not valid JSON without duplicate keys", p)
		}
		if got := string(AppendText(nil, []byte(p))); got != want {
			t.Errorf("AppendText(%s) = %q, want %q", p, got, want)
		}
	}
}

var seedPrompts = []string{
	`"plain"`,
	`["a","","b"]`,
	`[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"t1"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"t2"}]},{"role":"assistant","content":null,"reasoning_content":"r"}]`,
	`[{"role":"user","content":""},{"role":"user","content":"\u00e9\n"}]`,
	`[{"content":[{"text":"x","type":"text"}],"role":"user"}]`,
	`[1,"s",{"role":"user","content":"m"},[2]]`,
	`{"k":"v"}`,
	`[]`,
}

func FuzzAppendText(f *testing.F) {
	for _, p := range seedPrompts {
		f.Add([]byte(p))
	}
	f.Add([]byte("\"\xff\xfe\""))
	f.Add([]byte(`[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]`))
	f.Add([]byte(`[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]`))
	f.Fuzz(func(t *testing.T, prompt []byte) {
		got := AppendText(nil, prompt)
		var b Blocks
		b.SetPrompt(prompt)
		if b.Len != len(got) {
			t.Fatalf("Blocks.Len %d, text %d bytes", b.Len, len(got))
		}
		var want Blocks
		want.SetText(got)
		if !slicesEqual(b.Hashes, want.Hashes) {
			t.Fatalf("SetPrompt's hashes differ from SetText's of the same text")
		}
		if !utf8.Valid(prompt) {
			return // encoding/json replaces such bytes; the pass keeps them
		}
		ref, ok := referenceText(prompt)
		if ok && string(got) != ref {
			t.Fatalf("AppendText(%q) = %q, encoding/json reference %q", prompt, got, ref)
		}
		// A prompt cut anywhere gives a prefix of the whole prompt's text, when the cut falls
		// outside an escape and no reasoning (written after its message) is cut off.
		if ok && len(prompt) > 1 && !bytes.Contains(prompt, []byte("reasoning_content")) {
			cut := prompt[:len(prompt)/2]
			if bytes.IndexByte(cut, '\\') < 0 {
				part := AppendText(nil, cut)
				if !bytes.HasPrefix(got, part) {
					t.Fatalf("text of the first half %q is not a prefix of %q", part, got)
				}
			}
		}
	})
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// referenceText is SMG's extraction over a document encoding/json decoded: false when the
// prompt is not valid JSON or has a duplicate key (which SMG refuses and encoding/json resolves
// differently from a single pass).
func referenceText(prompt []byte) (string, bool) {
	var v any
	if json.Unmarshal(prompt, &v) != nil || hasDuplicateKey(prompt) {
		return "", false
	}
	var sb strings.Builder
	started := false
	frag := func(s string) {
		if s == "" {
			return
		}
		if started {
			sb.WriteByte(' ')
		}
		started = true
		sb.WriteString(s)
	}
	switch v := v.(type) {
	case string:
		return v, true
	case []any:
		for _, el := range v {
			switch el := el.(type) {
			case string:
				if started {
					sb.WriteByte(' ')
				}
				started = true
				sb.WriteString(el)
			case map[string]any:
				switch c := el["content"].(type) {
				case string:
					frag(c)
				case []any:
					for _, p := range c {
						if pm, ok := p.(map[string]any); ok && pm["type"] == "text" {
							if s, ok := pm["text"].(string); ok {
								frag(s)
							}
						}
					}
				}
				if r, ok := el["reasoning_content"].(string); ok && el["role"] == "assistant" {
					frag(r)
				}
			}
		}
	}
	return sb.String(), true
}

func hasDuplicateKey(doc []byte) bool {
	d := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		keys  map[string]bool
		isObj bool
		key   bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.isObj && top.key {
			if s, ok := tok.(string); ok {
				if top.keys[s] {
					return true
				}
				top.keys[s] = true
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, isObj: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].isObj {
			stack[len(stack)-1].key = true // a value ended: a key comes next
		}
	}
}
