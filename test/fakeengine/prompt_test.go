package fakeengine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/gateway/prefixindex"
)

// promptOf is the prompt text the engine reads from a model request body.
func promptOf(t *testing.T, route, body string) string {
	t.Helper()
	p, bad := New(Config{}).parse(route, []byte(body), false)
	if bad != nil {
		t.Fatalf("parse %s: %d %s", body, bad.status, bad.body)
	}
	return p.text
}

// routingTextCases are request bodies of every shape, with the prompt text the engine and the
// gateway must both read from them (docs/routing.md, "The routing text").
var routingTextCases = []struct {
	name, route, body, want string
}{
	{"chat, every role in order", RouteChat, `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]}`, "be brief hi hello more"},
	{"chat, text parts only", RouteChat, `{"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"x"}},{"type":"input_audio","input_audio":{}},{"type":"text","text":"here"}]}]}`, "look here"},
	{"chat, text before its type", RouteChat, `{"messages":[{"role":"user","content":[{"text":"look","type":"text"},{"text":"not text","type":"image"}]}]}`, "look"},
	{"chat, assistant reasoning after its content", RouteChat, `{"messages":[{"role":"user","content":"q"},{"reasoning_content":"thought","role":"assistant","content":"answer"},{"role":"user","content":"next"}]}`, "q answer thought next"},
	{"chat, reasoning without content", RouteChat, `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"reasoning_content":"thought"}]}`, "q thought"},
	{"chat, reasoning of another role is not read", RouteChat, `{"messages":[{"role":"user","content":"q","reasoning_content":"x"}]}`, "q"},
	{"chat, empty pieces are skipped", RouteChat, `{"messages":[{"role":"user","content":""},{"role":"assistant","content":"a","reasoning_content":""},{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"b"}]}]}`, "a b"},
	{"chat, escapes decoded", RouteChat, `{"messages":[{"role":"user","content":"tab\there \u00e9 \ud83d\ude00 \ud800 \"q\" \\"}]}`, "tab\there é 😀 \uFFFD \"q\" \\"},
	{"chat, bytes that are not UTF-8 kept", RouteChat, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xff\xfeb\"}]}", "a\xff\xfeb"},
	{"completion", RouteCompletions, `{"prompt":"once"}`, "once"},
	{"completion, a batch is joined", RouteCompletions, `{"prompt":["first","second"]}`, "first second"},
	{"completion, a batch keeps its empty strings", RouteCompletions, `{"prompt":["","a","","b"]}`, " a  b"},
	{"completion, token ids are not text", RouteCompletions, `{"prompt":[1,2,3]}`, ""},
	{"completion, a batch of token ids", RouteCompletions, `{"prompt":[[1,2],[3]]}`, ""},
	{"completion, strings among other elements", RouteCompletions, `{"prompt":[1,"a",null,"b"]}`, "a b"},
	{"generate", RouteGenerate, `{"text":"native"}`, "native"},
	{"generate, a batch is joined", RouteGenerate, `{"text":["one","two"]}`, "one two"},
	{"generate, input ids are not read", RouteGenerate, `{"input_ids":[1,2]}`, ""},
	{"embeddings", RouteEmbeddings, `{"input":"alpha"}`, "alpha"},
	{"embeddings, a batch is joined", RouteEmbeddings, `{"input":["a","b"]}`, "a b"},
}

func TestRoutingText(t *testing.T) {
	for _, tt := range routingTextCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := promptOf(t, tt.route, tt.body); got != tt.want {
				t.Errorf("prompt text = %q, want %q", got, tt.want)
			}
		})
	}
}

// The engine's prompt is the gateway's routing text for every shape, so that the prefix a
// gateway's index says a worker holds is the prefix the engine caches. The engine reads it on
// its own, as a real engine would; this checks the two readings agree.
func TestRoutingTextIsTheGateways(t *testing.T) {
	field := map[string]string{RouteChat: "messages", RouteCompletions: "prompt", RouteGenerate: "text",
		RouteEmbeddings: "input"}
	for _, tt := range routingTextCases {
		t.Run(tt.name, func(t *testing.T) {
			var top map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.body), &top); err != nil {
				t.Fatal(err)
			}
			want := string(prefixindex.AppendText(nil, top[field[tt.route]]))
			if got := promptOf(t, tt.route, tt.body); got != want {
				t.Errorf("engine's prompt %q, gateway's routing text %q", got, want)
			}
		})
	}
}

// The prompt the engine counts is its routing text: a batch of N strings is one prompt of
// their N texts joined by one space, the same tokens as that string (two 256-byte strings and a
// space, 129 tokens), and an assistant's reasoning_content counts.
func TestPromptTokensCountTheRoutingText(t *testing.T) {
	h := newHarness(t, Config{})
	a, b := strings.Repeat("a", 256), strings.Repeat("b", 256)
	// 100 + 1 + 93 + 1 + 280 + 1 + 36 bytes: 512, 128 tokens; without the reasoning, 58.
	chat := `{"messages":[{"role":"user","content":"` + strings.Repeat("q", 100) + `"},` +
		`{"role":"assistant","content":"` + strings.Repeat("c", 93) + `","reasoning_content":"` + strings.Repeat("r", 280) + `"},` +
		`{"role":"user","content":"` + strings.Repeat("n", 36) + `"}]}`
	tests := []struct {
		name, route, body string
		want              int
	}{
		{"completion of one string", RouteCompletions, `{"prompt":"` + a + " " + b + `"}`, 129},
		{"completion batch", RouteCompletions, `{"prompt":["` + a + `","` + b + `"]}`, 129},
		{"generate batch", RouteGenerate, `{"text":["` + a + `","` + b + `"]}`, 129},
		{"embeddings batch", RouteEmbeddings, `{"input":["` + a + `","` + b + `"]}`, 129},
		{"chat with reasoning", RouteChat, chat, 128},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := h.do("POST", tt.route, "", tt.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			u := decodeUsage(t, string(body))
			got := -1
			switch {
			case u.Usage != nil:
				got = u.Usage.PromptTokens
			case u.MetaInfo != nil:
				got = u.MetaInfo.PromptTokens
			}
			if got != tt.want {
				t.Errorf("prompt tokens %d, want %d: %s", got, tt.want, body)
			}
		})
	}
}

func TestTokensAreCharactersOverFour(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{{"", 1}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {"0123456789abcdef", 4}} {
		if got := promptTokens(c.text); got != c.want {
			t.Errorf("promptTokens(%q) = %d, want %d", c.text, got, c.want)
		}
	}
}
