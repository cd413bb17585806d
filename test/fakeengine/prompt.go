package fakeengine

import (
	"encoding/json"

	"github.com/meshgw/meshgw/gateway/prefixindex"
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
// holds is the prefix its engine caches. It is the gateway's own extraction
// (prefixindex.AppendText, so the two cannot drift apart) over the route's prompt field (a
// chat's messages, a completion's prompt, /generate's text, an embedding's input):
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
	var raw json.RawMessage
	switch p.route {
	case RouteChat:
		raw = p.rb.Messages
	case RouteCompletions:
		raw = p.rb.Prompt
	case RouteGenerate:
		raw = p.rb.Text
	case RouteEmbeddings:
		raw = p.rb.Input
	}
	return string(prefixindex.AppendText(nil, raw))
}
