package fakeengine

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// MaxContextLength is the context length the fake model claims.
const MaxContextLength = 32768

// modelList is the OpenAI GET /v1/models answer.
type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

type modelEntry struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root"`
	MaxModelLen int    `json:"max_model_len"`
}

func (e *Engine) handleModels(w http.ResponseWriter, _ *http.Request) {
	m := e.cfg.Model
	writeJSON(w, 200, modelList{Object: "list", Data: []modelEntry{{
		ID: m, Object: "model", Created: time.Now().Unix(), OwnedBy: "fakeworker", Root: m,
		MaxModelLen: MaxContextLength,
	}}})
}

// handleModelInfo answers SGLang's GET /get_model_info.
func (e *Engine) handleModelInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{
		"model_path":                e.cfg.Model,
		"tokenizer_path":            e.cfg.Model,
		"is_generation":             true,
		"preferred_sampling_params": nil,
		"weight_version":            e.WeightVersion(),
		"has_image_understanding":   false,
		"has_audio_understanding":   false,
		"model_type":                "fake",
		"architectures":             []string{"FakeForCausalLM"},
	})
}

// handleWeightVersion answers SGLang's GET /get_weight_version.
func (e *Engine) handleWeightVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]string{"weight_version": e.WeightVersion()})
}

// weightUpdate is the part of SGLang's update_weights_from_disk body the fake reads.
type weightUpdate struct {
	ModelPath     string `json:"model_path"`
	WeightVersion string `json:"weight_version"`
}

// weightUpdateResult is SGLang's answer shape.
type weightUpdateResult struct {
	Success           bool   `json:"success"`
	Message           string `json:"message"`
	NumPausedRequests int    `json:"num_paused_requests"`
}

// handleUpdateWeights answers SGLang's POST /update_weights_from_disk: it hangs while
// weight_update_hang is set, fails with weight_update_status when that is not 2xx, and otherwise
// sets the weight version to the body's weight_version, else its model_path.
func (e *Engine) handleUpdateWeights(w http.ResponseWriter, r *http.Request) {
	buf, err := e.readBody(w, r)
	if err != nil {
		writeJSON(w, 400, weightUpdateResult{Message: "reading the body: " + err.Error()})
		return
	}
	var u weightUpdate
	err = json.Unmarshal(buf.Bytes(), &u)
	bodyPool.Put(buf)
	if err != nil {
		writeJSON(w, 400, weightUpdateResult{Message: "body is not valid JSON: " + oneLine(err)})
		return
	}
	f, err := e.waitWhile(r.Context(), func(f Faults) bool { return f.WeightUpdateHang })
	if errors.Is(err, ErrClosed) {
		_ = (&httpSink{w: w}).cut()
	}
	if err != nil {
		return
	}
	if !is2xx(f.WeightUpdateStatus) {
		writeJSON(w, f.WeightUpdateStatus, weightUpdateResult{
			Message: "fake weight update failed with " + strconv.Itoa(f.WeightUpdateStatus) + " (injected fault)",
		})
		return
	}
	version := u.WeightVersion
	if version == "" {
		version = u.ModelPath
	}
	if version == "" {
		writeJSON(w, 400, weightUpdateResult{Message: "model_path is required"})
		return
	}
	e.version.Store(&version)
	writeJSON(w, f.WeightUpdateStatus, weightUpdateResult{
		Success: true, Message: "Succeeded to update model weights.",
	})
}
