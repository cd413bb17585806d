package fakeengine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Faults are the knobs of DESIGN.md section 15. Every field stays as set until changed; a POST
// /_fault of {} restores DefaultFaults.
type Faults struct {
	// HealthStatus is the status /health answers (200). In gRPC mode a non-2xx status makes the
	// health service answer NOT_SERVING; in ZMQ mode it stops the heartbeats.
	HealthStatus int `json:"health_status"`
	// ErrorStatus is the status given to ErrorRate of the model requests (0: none).
	ErrorStatus int `json:"error_status"`
	// ErrorRate is the fraction (0..1) of model requests that get ErrorStatus (1, so that setting
	// only error_status fails every request).
	ErrorRate float64 `json:"error_rate"`
	// LatencyMS delays every model request before it is answered (0).
	LatencyMS int `json:"latency_ms"`
	// StreamChunks is the number of content chunks of a streamed answer (20).
	StreamChunks int `json:"stream_chunks"`
	// ChunkDelayMS is the delay between two events of a streamed answer (0).
	ChunkDelayMS int `json:"chunk_delay_ms"`
	// Hang makes model requests wait, unanswered, until the client goes away or Hang is cleared.
	Hang bool `json:"hang"`
	// CutStreamAfter breaks the connection after that many chunks (0: never). A non-streamed
	// answer is cut half-way through its body.
	CutStreamAfter int `json:"cut_stream_after"`
	// WeightUpdateStatus is the status /update_weights_from_disk answers (200); a non-2xx status
	// leaves the weight version unchanged.
	WeightUpdateStatus int `json:"weight_update_status"`
	// WeightUpdateHang makes /update_weights_from_disk wait until the client goes away or the
	// knob is cleared.
	WeightUpdateHang bool `json:"weight_update_hang"`
}

// Bounds of the fault knobs, so that a typo cannot make the engine allocate or wait forever.
const (
	maxStreamChunks = 100000
	maxDelayMS      = 3600 * 1000
)

// DefaultFaults returns the knobs of a healthy engine.
func DefaultFaults() Faults {
	return Faults{HealthStatus: 200, ErrorRate: 1, StreamChunks: 20, WeightUpdateStatus: 200}
}

// Validate reports the first knob whose value is out of range, naming it.
func (f Faults) Validate() error {
	switch {
	case !isStatus(f.HealthStatus):
		return fmt.Errorf("health_status: %d is not an HTTP status (100-599)", f.HealthStatus)
	case f.ErrorStatus != 0 && !isStatus(f.ErrorStatus):
		return fmt.Errorf("error_status: %d is not an HTTP status (100-599, or 0 for none)", f.ErrorStatus)
	case !(f.ErrorRate >= 0 && f.ErrorRate <= 1):
		return fmt.Errorf("error_rate: %v is not within 0..1", f.ErrorRate)
	case f.LatencyMS < 0 || f.LatencyMS > maxDelayMS:
		return fmt.Errorf("latency_ms: %d is not within 0..%d", f.LatencyMS, maxDelayMS)
	case f.StreamChunks < 1 || f.StreamChunks > maxStreamChunks:
		return fmt.Errorf("stream_chunks: %d is not within 1..%d", f.StreamChunks, maxStreamChunks)
	case f.ChunkDelayMS < 0 || f.ChunkDelayMS > maxDelayMS:
		return fmt.Errorf("chunk_delay_ms: %d is not within 0..%d", f.ChunkDelayMS, maxDelayMS)
	case f.CutStreamAfter < 0:
		return fmt.Errorf("cut_stream_after: %d is negative", f.CutStreamAfter)
	case !isStatus(f.WeightUpdateStatus):
		return fmt.Errorf("weight_update_status: %d is not an HTTP status (100-599)", f.WeightUpdateStatus)
	}
	return nil
}

func isStatus(s int) bool { return s >= 100 && s <= 599 }

func is2xx(s int) bool { return s >= 200 && s <= 299 }

// faultPatch is a POST /_fault body: nil fields leave the knob as it is.
type faultPatch struct {
	HealthStatus       *int     `json:"health_status"`
	ErrorStatus        *int     `json:"error_status"`
	ErrorRate          *float64 `json:"error_rate"`
	LatencyMS          *int     `json:"latency_ms"`
	StreamChunks       *int     `json:"stream_chunks"`
	ChunkDelayMS       *int     `json:"chunk_delay_ms"`
	Hang               *bool    `json:"hang"`
	CutStreamAfter     *int     `json:"cut_stream_after"`
	WeightUpdateStatus *int     `json:"weight_update_status"`
	WeightUpdateHang   *bool    `json:"weight_update_hang"`
}

// ParseFaults returns cur changed by body, a POST /_fault JSON object: {} resets to
// DefaultFaults, absent fields keep their value, and unknown fields, wrong types and out-of-range
// values are errors of one line.
func ParseFaults(cur Faults, body []byte) (Faults, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil || keys == nil {
		return cur, errors.New("body must be a JSON object")
	}
	if len(keys) == 0 {
		return DefaultFaults(), nil
	}
	var p faultPatch
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return cur, fmt.Errorf("%s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return cur, errors.New(oneLine(err))
	}
	set(&cur.HealthStatus, p.HealthStatus)
	set(&cur.ErrorStatus, p.ErrorStatus)
	set(&cur.ErrorRate, p.ErrorRate)
	set(&cur.LatencyMS, p.LatencyMS)
	set(&cur.StreamChunks, p.StreamChunks)
	set(&cur.ChunkDelayMS, p.ChunkDelayMS)
	set(&cur.Hang, p.Hang)
	set(&cur.CutStreamAfter, p.CutStreamAfter)
	set(&cur.WeightUpdateStatus, p.WeightUpdateStatus)
	set(&cur.WeightUpdateHang, p.WeightUpdateHang)
	return cur, cur.Validate()
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// oneLine makes a decoder error fit the one-line answers of the control endpoints.
func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	return strings.TrimPrefix(s, "json: ")
}
