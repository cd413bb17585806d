package fakeengine

import (
	"encoding/json"
	"testing"
)

func TestRoutingText(t *testing.T) {
	tests := []struct {
		name, route, body, want string
	}{
		{"chat, every role in order", RouteChat, `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"more"}]}`, "be brief hi hello more"},
		{"chat, text parts only", RouteChat, `{"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"x"}},{"type":"input_audio","input_audio":{}},{"type":"text","text":"here"}]}]}`, "look here"},
		{"chat, no messages", RouteChat, `{"messages":[]}`, ""},
		{"completion", RouteCompletions, `{"prompt":"once"}`, "once"},
		{"completion list", RouteCompletions, `{"prompt":["first","second"]}`, "first"},
		{"completion token ids", RouteCompletions, `{"prompt":[1,2,3]}`, ""},
		{"generate", RouteGenerate, `{"text":"native"}`, "native"},
		{"embeddings", RouteEmbeddings, `{"input":["a","b"]}`, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rb requestBody
			if err := json.Unmarshal([]byte(tt.body), &rb); err != nil {
				t.Fatal(err)
			}
			if got := routingText(tt.route, &rb); got != tt.want {
				t.Errorf("routingText = %q, want %q", got, tt.want)
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
