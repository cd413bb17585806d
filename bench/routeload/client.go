package routeload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// message is one chat message.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is what a turn sends: a streamed chat completion that asks for the usage chunk.
type chatRequest struct {
	Model         string    `json:"model"`
	Messages      []message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chunk is the part of a streamed chat chunk a turn reads.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// answer is what a turn got back.
type answer struct {
	text                       string
	promptTokens, cachedTokens int
	ttft                       time.Duration
}

// client sends turns.
type client struct {
	http    *http.Client
	model   string
	timeout time.Duration
	now     func() time.Time
}

// maxEvent bounds one SSE line.
const maxEvent = 1 << 20

// turn posts one streamed chat completion to gateway and reads it to [DONE]: the answer's
// text, its usage (which must be there), and the time to its first event.
func (c *client) turn(ctx context.Context, gateway string, msgs []message) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := chatRequest{Model: c.model, Messages: msgs, Stream: true}
	req.StreamOptions.IncludeUsage = true
	body, err := json.Marshal(req)
	if err != nil {
		return answer{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, gateway+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	start := c.now()
	resp, err := c.http.Do(hr)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return answer{}, fmt.Errorf("%s: status %d: %s", gateway, resp.StatusCode, bytes.TrimSpace(b))
	}
	return readAnswer(resp.Body, start, c.now)
}

// readAnswer reads an SSE chat stream to [DONE].
func readAnswer(r io.Reader, start time.Time, now func() time.Time) (answer, error) {
	var a answer
	var text strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 16<<10), maxEvent)
	events, usage := 0, false
	for sc.Scan() {
		payload, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue // blank lines between events, comments
		}
		if events == 0 {
			a.ttft = now().Sub(start)
		}
		events++
		if string(payload) == "[DONE]" {
			if !usage {
				return a, errors.New("the stream ended without a usage chunk")
			}
			a.text = text.String()
			return a, nil
		}
		var ch chunk
		if err := json.Unmarshal(payload, &ch); err != nil {
			return a, fmt.Errorf("event %d is not a chat chunk: %v", events, err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
		if u := ch.Usage; u != nil {
			usage = true
			a.promptTokens = u.PromptTokens
			if d := u.PromptTokensDetails; d != nil {
				a.cachedTokens = d.CachedTokens
			}
		}
	}
	if err := sc.Err(); err != nil {
		return a, err
	}
	return a, fmt.Errorf("the stream ended after %d events without [DONE]", events)
}
