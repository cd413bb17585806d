// Package workload drives a chaos run's traffic: client request loops (plain and streaming)
// through every gateway, admin operations recorded with their invocation and response times
// and outcomes, weight updates, and the samplers of ownership and probes the checkers read.
package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
	"github.com/meshgw/meshgw/worker"
)

// Gateway is a gateway the workload sends to.
type Gateway struct{ ID, URL string }

// Worker is a worker record the workload writes: its URL and id, and over a simulated WAN its
// engine's region, which every registration names (a gateway's own region is the default).
type Worker struct{ URL, ID, Region string }

// NewWorker returns the Worker of an engine URL, with the id meshgw gives it.
func NewWorker(u string) Worker {
	c, err := worker.CanonicalURL(u, false)
	if err != nil {
		c = u
	}
	return Worker{URL: u, ID: string(worker.NewID(c, -1))}
}

// Admin sends admin operations and records each.
type Admin struct {
	Rec *history.Recorder
	Key string // bearer key of the admin routes
	// Client is the admin client: its timeout (above raft's 10 s write bound plus the fleet
	// acknowledgement) makes an unanswered write unknown.
	Client *http.Client
}

// answer is what the harness reads of an admin answer.
type answer struct {
	Disabled      bool    `json:"disabled"`
	DrainDeadline *string `json:"drain_deadline"`
	Moved         int     `json:"moved"`
	FleetAck      *struct {
		Acked   []string `json:"acked"`
		Lagging []string `json:"lagging"`
	} `json:"fleet_ack"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// Do sends one operation of kind on w through g and records it. client numbers the caller.
func (a *Admin) Do(ctx context.Context, client int, kind history.Kind, w Worker, g Gateway) history.AdminOp {
	return a.DoTo(ctx, client, kind, w, g, "")
}

// DoTo is Do with the gateway a transfer moves the worker to.
func (a *Admin) DoTo(ctx context.Context, client int, kind history.Kind, w Worker, g Gateway, to string) history.AdminOp {
	method, path, body := "", "/workers/"+url.PathEscape(w.URL), ""
	switch kind {
	case history.Register:
		method, path, body = "POST", "/workers", fmt.Sprintf(`{"url":%q}`, w.URL)
		if w.Region != "" {
			body = fmt.Sprintf(`{"url":%q,"region":%q}`, w.URL, w.Region)
		}
	case history.Disable:
		method, body = "PUT", `{"disabled":true,"reason":"chaos"}`
	case history.Enable:
		method, body = "PUT", `{"disabled":false}`
	case history.Read:
		method, path = "GET", path+"?consistent=true"
	case history.Transfer:
		method, path, body = "POST", path+"/transfer", fmt.Sprintf(`{"to":%q}`, to)
	case history.Delete:
		method = "DELETE"
	case history.Rebalance:
		method, path, body = "POST", "/mesh/rebalance", `{}`
	case history.WeightUpdate:
		method, path = "POST", "/update_weights_from_disk?worker_id="+url.QueryEscape(w.ID)
		body = fmt.Sprintf(`{"model_path":"/models/chaos","weight_version":"v%d"}`, a.Rec.Now().Milliseconds())
	}
	op := history.AdminOp{Client: client, Kind: kind, Worker: w.ID, Gateway: g.ID, Invoke: a.Rec.Now()}
	status, ans, err := a.send(ctx, method, g.URL+path, body)
	op.Complete, op.Status = a.Rec.Now(), status
	if ans.Error != nil {
		op.Code = ans.Error.Code
	}
	if ans.FleetAck != nil {
		op.Acked, op.Lagging = ans.FleetAck.Acked, ans.FleetAck.Lagging
		if op.Acked == nil {
			op.Acked = []string{}
		}
	}
	op.Outcome = classify(kind, status, op.Code, err)
	switch {
	case kind == history.Read && op.Outcome == history.OK:
		op.Found, op.Disabled, op.Draining = status == 200, ans.Disabled, ans.DrainDeadline != nil
	case kind == history.Rebalance && op.Outcome == history.OK:
		op.Moved = ans.Moved
	}
	if op.Outcome == history.Unknown {
		op.Complete = history.Never
	}
	a.Rec.Admin(op)
	return op
}

// classify turns an answer into an outcome. A dial error sent nothing: failed. Any other
// transport error, a timeout, a 503 outcome_unknown or a 5xx without a known code may or may
// not have taken effect: unknown. A 503 that says nothing was written is failed, and so is
// every refusal (a 409, a 400): a model may still read a refusal that says what it saw (a
// registration refused while the record drains). A weight update's 502 weight_update_failed,
// 503 fleet_ack_timeout and 503 journal_unresolved (nothing sent, its record left open) are
// answers about what it wrote: ok.
func classify(kind history.Kind, status int, code string, err error) history.Outcome {
	var op *net.OpError
	switch {
	case err != nil && errors.As(err, &op) && op.Op == "dial":
		return history.Failed
	case err != nil:
		return history.Unknown
	case status == 503 && code == "outcome_unknown":
		return history.Unknown
	case kind == history.WeightUpdate && status == 503 && (code == "fleet_ack_timeout" || code == "journal_unresolved"):
		return history.OK
	case status == 503 || status == 401 || status == 403:
		return history.Failed
	case kind == history.WeightUpdate && status == 502 && code == "weight_update_failed":
		return history.OK
	case status >= 500:
		return history.Unknown
	case status == 200 || status == 201 || status == 404:
		return history.OK
	case status == 202 && kind == history.Delete:
		return history.OK
	}
	return history.Failed
}

func (a *Admin) send(ctx context.Context, method, u, body string) (int, answer, error) {
	var ans answer
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewBufferString(body))
	if err != nil {
		return 0, ans, err
	}
	req.Header.Set("Authorization", "Bearer "+a.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.Client.Do(req)
	if err != nil {
		return 0, ans, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, ans, err
	}
	_ = json.Unmarshal(b, &ans)
	return resp.StatusCode, ans, nil
}

// AdminClient is the default admin client: 20 s bounds a write (10 s raft, 5 s fleet ack).
func AdminClient() *http.Client { return &http.Client{Timeout: 20 * time.Second} }
