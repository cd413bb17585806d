package weights

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// maxAnswer bounds how much of an engine's answer is read.
const maxAnswer = 64 << 10

// HTTPSender posts an update to an engine's /update_weights_from_disk, as SGLang serves it.
type HTTPSender struct {
	// Client sends the requests; nil means a client with no timeout of its own (each update is
	// bounded by its context).
	Client *http.Client
	// NodeID is sent as X-Mesh-Gateway, as on every request meshgw sends an engine.
	NodeID string
}

// Send implements Sender.
func (s HTTPSender) Send(ctx context.Context, spec worker.Spec, body []byte) Sent {
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(spec.URL, "/")+"/update_weights_from_disk", bytes.NewReader(body))
	if err != nil {
		return Sent{Outcome: fsm.OutcomeFailed, Message: "cannot make the request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	if spec.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+spec.APIKey)
	}
	if s.NodeID != "" {
		req.Header.Set("X-Mesh-Gateway", s.NodeID)
	}
	resp, err := client.Do(req)
	if err != nil {
		msg := "no answer: " + err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			msg = "no answer within the per-worker timeout"
		}
		// The request may have reached the engine: it may hold either version.
		return Sent{Outcome: fsm.OutcomeUnknown, Message: msg}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Sent{Outcome: fsm.OutcomeUnknown, Status: resp.StatusCode, Message: "the answer was cut: " + err.Error()}
	}
	var ans struct {
		Success *bool  `json:"success"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(raw, &ans) // a body that is not SGLang's shape is judged by its status
	msg := ans.Message
	if msg == "" && len(raw) > 0 && ans.Success == nil {
		msg = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
	}
	if resp.StatusCode/100 != 2 || (ans.Success != nil && !*ans.Success) {
		if msg == "" {
			msg = "the engine answered " + strconv.Itoa(resp.StatusCode)
		}
		return Sent{Outcome: fsm.OutcomeFailed, Status: resp.StatusCode, Message: msg}
	}
	return Sent{Outcome: fsm.OutcomeUpdated, Status: resp.StatusCode, Message: msg}
}
