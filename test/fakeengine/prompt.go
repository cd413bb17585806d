package fakeengine

import (
	"encoding/json"
	"strings"
)

// Tokens are counted from characters (bytes): one token per charsPerToken bytes of text,
// rounded up, roughly what a BPE tokenizer makes of English prose.
const charsPerToken = 4

// tokensOf is the stand-in token count of n bytes of text.
func tokensOf(n int) int { return (n + charsPerToken - 1) / charsPerToken }

// promptTokens is the token count of a prompt, at least 1 (an engine always computes one).
func promptTokens(s string) int { return max(1, tokensOf(len(s))) }

// routingText is the prompt as the engine sees it, and as cache-aware routers extract it: a
// chat's message texts (every role; a string content, or each text part of a content array)
// joined by one space, in order; a completion's prompt; /generate's text; an embedding's input.
// A list of prompts or inputs counts its first string.
func routingText(route string, rb *requestBody) string {
	switch route {
	case RouteCompletions:
		return firstString(rb.Prompt)
	case RouteGenerate:
		return firstString(rb.Text)
	case RouteEmbeddings:
		return firstString(rb.Input)
	case RouteChat:
		var sb strings.Builder
		for _, m := range rb.Messages {
			for _, t := range contentTexts(m.Content) {
				if sb.Len() > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(t)
			}
		}
		return sb.String()
	}
	return ""
}

// contentTexts returns a message content's texts: the string, or the text of each text part.
func contentTexts(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return []string{s}
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &parts)
		var out []string
		for _, p := range parts {
			if p.Type == "text" {
				out = append(out, p.Text)
			}
		}
		return out
	}
	return nil
}
