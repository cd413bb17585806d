package admin

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/weights"
	"github.com/meshgw/meshgw/worker"
)

// reportOnly answers every weight update with its report.
type reportOnly weights.Report

func (r reportOnly) Update(context.Context, []byte, weights.Target) (weights.Report, error) {
	return weights.Report(r), nil
}

// Each result of a weight update has its status and code; an update that sent nothing answers
// fleet_ack_timeout only when its record closed.
func TestUpdateWeightsAnswers(t *testing.T) {
	tests := []struct {
		result string
		status int
		code   string
	}{
		{"ok", 200, ""},
		{"failed", 502, codeUpdateFailed},
		{"not_started", 503, "fleet_ack_timeout"},
		{weights.ResultUnresolved, 503, codeJournalUnresolved},
		{weights.ResultOutcomeUnknown, 503, codeOutcomeUnknown},
	}
	e := newEnv(t, nil)
	for _, tt := range tests {
		t.Run(tt.result, func(t *testing.T) {
			rep := weights.Report{ID: "wu-1", Result: tt.result, Message: "what became of it", Targets: []weights.TargetReport{}}
			h := e.handler(func(c *Config) { c.Weights = reportOnly(rep) })
			a := do(h, req{method: "POST", uri: "/update_weights_from_disk", body: `{"model_path":"/m"}`, from: loopback})
			if a.status != tt.status || a.errCode() != tt.code {
				t.Fatalf("answer %d %q, want %d %q: %s", a.status, a.errCode(), tt.status, tt.code, a.body)
			}
			var got weights.Report
			if err := json.Unmarshal([]byte(a.body), &got); err != nil || got.ID != "wu-1" || got.Result != tt.result {
				t.Fatalf("the report is not in the answer: %v: %s", err, a.body)
			}
		})
	}
}

// The journal shows a running record whose update ended with a target not updated as failed
// (fsm.JournalRecord.State), on every gateway alike.
func TestJournalViewShowsTheState(t *testing.T) {
	j := fsm.JournalRecord{ID: "wu-1", Targets: []worker.ID{"w-1", "w-2"}, Status: fsm.JournalRunning,
		Outcomes: map[worker.ID]string{"w-1": fsm.OutcomeUpdated, "w-2": fsm.OutcomeFailed}}
	if got := journalView(j).Status; got != fsm.JournalFailed {
		t.Errorf("status %q, want %q", got, fsm.JournalFailed)
	}
}
