package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// TestRegister covers POST /workers: 201, 200 for the same spec, 409 for another, 400 naming
// the bad or unknown field, 413 over the body limit, and the owner a registration names.
func TestRegister(t *testing.T) {
	e := newEnv(t, nil)
	big := `{"url":"http://127.0.0.1:8009","labels":{"x":"` + strings.Repeat("y", MaxBody) + `"}}`
	tests := []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"new", `{"url":"http://127.0.0.1:8001","model":"m","api_key":"sk-secret-1"}`, 201, "", ""},
		{"same spec again", `{"url":"HTTP://127.0.0.1:8001/","models":["m"],"api_key":"sk-secret-1"}`, 200, "", ""},
		{"same id, other spec", `{"url":"http://127.0.0.1:8001","model":"other"}`, 409, "worker_exists", "another spec"},
		{"bad priority", `{"url":"http://127.0.0.1:8002","priority":5000}`, 400, "invalid_field", "priority"},
		{"url with a path", `{"url":"http://127.0.0.1:8002/v1"}`, 400, "invalid_field", "url"},
		{"no url", `{"model":"m"}`, 400, "invalid_field", "url"},
		{"bad nested value", `{"url":"http://127.0.0.1:8002","health":{"timeout_secs":0}}`, 400, "invalid_field", "health.timeout_secs"},
		{"wrong type", `{"url":"http://127.0.0.1:8002","priority":"high"}`, 400, "invalid_field", "priority"},
		{"wrong nested type", `{"url":"http://127.0.0.1:8002","resilience":{"max_retries":"x"}}`, 400, "invalid_field", "resilience.max_retries"},
		{"unknown field", `{"url":"http://127.0.0.1:8002","weight":3}`, 400, "unknown_field", "weight"},
		{"unknown nested field", `{"url":"http://127.0.0.1:8002","health":{"interval":3}}`, 400, "unknown_field", "interval"},
		{"flag at registration", `{"url":"http://127.0.0.1:8002","disabled":true}`, 400, "invalid_field", "disabled"},
		{"not JSON", `{"url":`, 400, "invalid_request", ""},
		{"not an object", `["http://127.0.0.1:8002"]`, 400, "invalid_request", ""},
		{"two objects", `{"url":"http://127.0.0.1:8002"}{}`, 400, "invalid_request", ""},
		{"too large", big, 413, "payload_too_large", ""},
		{"named owner", `{"url":"http://127.0.0.1:8003","owner":"n2"}`, 201, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(e.h, req{method: "POST", uri: "/workers", body: tt.body})
			if a.status != tt.status || a.errCode() != tt.code || !strings.Contains(a.body, tt.msg) {
				t.Fatalf("%d %.300s; want %d %s naming %q", a.status, a.body, tt.status, tt.code, tt.msg)
			}
			if strings.Contains(a.body, "sk-secret-1") {
				t.Errorf("the API key is in the answer: %s", a.body)
			}
		})
	}
	r1, _ := e.node.Worker(idOf(t, workerURL(8001)))
	if r1.Owner != "n1" || r1.Spec.Region != "eu" || r1.Spec.APIKey != "sk-secret-1" || !r1.RegisteredAt.Equal(time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("registered record %v region=%q registered_at=%v", r1, r1.Spec.Region, r1.RegisteredAt)
	}
	r3, _ := e.node.Worker(idOf(t, workerURL(8003)))
	if r3.Owner != "n2" {
		t.Errorf("named owner: %q", r3.Owner)
	}
	if _, ok := e.node.Worker(idOf(t, workerURL(8002))); ok {
		t.Error("a refused registration was written")
	}
	if !strings.Contains(e.logs.String(), `msg="admin write" component=admin method=POST`) || strings.Contains(e.logs.String(), "sk-secret-1") {
		t.Errorf("admin write log lines wrong or leaking:\n%s", e.logs.String())
	}
}

// TestGetNeverShowsAPIKey reads a registered worker by id, by percent-encoded URL and by plain
// URL, and in lists with and without a model filter: the durable fields are there, the key is
// not.
func TestGetNeverShowsAPIKey(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, `{"url":"http://127.0.0.1:8013","models":["m"],"api_key":"sk-very-secret","labels":{"tier":"a"}}`)
	e.register(t, `{"url":"http://127.0.0.1:8014","models":["other"]}`)
	testkit.For(t, "the pool to hold both", func() bool { return len(e.pool.Snapshot().All) == 2 })
	u := workerURL(8013)
	for _, uri := range []string{"/workers/" + rec.ID, "/workers/" + url.PathEscape(u), "/workers/" + url.QueryEscape(u), "/workers/" + u,
		"/workers/" + url.PathEscape("HTTP://127.0.0.1:8013/")} {
		a := do(e.h, req{method: "GET", uri: uri})
		if a.status != 200 || a.record(t).ID != rec.ID {
			t.Errorf("%s: %d %s", uri, a.status, a.body)
		}
	}
	for _, uri := range []string{"/workers", "/workers?model=m", "/workers/" + rec.ID} {
		a := do(e.h, req{method: "GET", uri: uri})
		if strings.Contains(a.body, "sk-very-secret") || strings.Contains(a.body, `"api_key"`) {
			t.Errorf("%s leaks the API key: %s", uri, a.body)
		}
	}
	var list WorkerList
	_ = json.Unmarshal([]byte(do(e.h, req{method: "GET", uri: "/workers?model=m"}).body), &list)
	if list.Total != 1 || list.Workers[0].ID != rec.ID {
		t.Fatalf("model filter: %+v", list)
	}
	r := list.Workers[0]
	if r.Owner != "n1" || r.Origin != "local" || r.Epoch == 0 || r.Revision == 0 || r.RegisteredAt == nil || !r.HasAPIKey ||
		r.HealthState != "ready" || !r.Routable || r.Labels["tier"] != "a" || r.Region != "eu" || r.DisplayID != "127.0.0.1:8013" {
		t.Errorf("record %+v", r)
	}
	if a := do(e.h, req{method: "GET", uri: "/workers/" + url.PathEscape("http://127.0.0.1:9999")}); a.status != 404 || a.errCode() != "worker_not_found" {
		t.Errorf("unknown URL: %d %s", a.status, a.body)
	}
}

// TestPutFlagsOnly: {"disabled": bool} and {"is_dead": bool} change only the flags (with who,
// why and when), close the pool's gates, and are idempotent.
func TestPutFlagsOnly(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, `{"url":"http://127.0.0.1:8001","api_key":"sk-k"}`)
	id := worker.ID(rec.ID)
	path := "/workers/" + rec.ID
	a := do(e.h, req{method: "PUT", uri: path, body: `{"disabled":true,"reason":"maintenance"}`})
	got := a.record(t)
	if a.status != 200 || !got.Disabled || got.DisabledReason != "maintenance" || got.DisabledBy != "127.0.0.1" || got.DisabledAt == nil || got.Routable {
		t.Fatalf("disable: %d %s", a.status, a.body)
	}
	testkit.For(t, "the pool to gate the worker", func() bool { return e.pool.Get(id).Gates()&pool.GateDisabled != 0 })
	if again := do(e.h, req{method: "PUT", uri: path, body: `{"disabled":true,"reason":"maintenance"}`}); again.record(t).Revision != got.Revision {
		t.Error("the same disable again changed the record")
	}
	a = do(e.h, req{method: "PUT", uri: path, body: `{"is_dead":true}`})
	if got := a.record(t); !got.IsDead || !got.Disabled {
		t.Fatalf("quarantine: %s", a.body)
	}
	a = do(e.h, req{method: "PUT", uri: path, body: `{"disabled":false,"is_dead":false}`})
	if got := a.record(t); got.Disabled || got.IsDead || got.DisabledReason != "" || got.DisabledAt != nil {
		t.Fatalf("enable: %s", a.body)
	}
	testkit.For(t, "the pool to route the worker again", func() bool { return len(e.pool.Snapshot().Routable) == 1 })
	cur, _ := e.node.Worker(id)
	if cur.Spec.APIKey != "sk-k" {
		t.Error("a flags-only PUT touched the spec")
	}
	for _, tt := range []struct{ body, code, msg string }{
		{`{}`, "invalid_request", "nothing to change"},
		{`{"reason":"x"}`, "invalid_field", "reason"},
		{`{"disabled":false,"reason":"x"}`, "invalid_field", "reason"},
		{`{"disabled":"yes"}`, "invalid_field", "disabled"},
		{`{"disabled":true,"color":"red"}`, "unknown_field", "color"},
		{`{"disabled":true,"model":"m"}`, "invalid_field", "url"},
	} {
		if a := do(e.h, req{method: "PUT", uri: path, body: tt.body}); a.status != 400 || a.errCode() != tt.code || !strings.Contains(a.body, tt.msg) {
			t.Errorf("%s: %d %s; want 400 %s naming %s", tt.body, a.status, a.body, tt.code, tt.msg)
		}
	}
	if after, _ := e.node.Worker(id); after.Revision != cur.Revision {
		t.Error("a refused PUT changed the record")
	}
}

// TestPutFullSpec: a full spec replaces the record's, keeps the API key when the body has none,
// and carries flags in the same write; a URL naming another worker is refused.
func TestPutFullSpec(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, `{"url":"http://127.0.0.1:8001","api_key":"sk-k","priority":10,"labels":{"a":"1"}}`)
	id := worker.ID(rec.ID)
	path := "/workers/" + rec.ID
	a := do(e.h, req{method: "PUT", uri: path, body: `{"url":"http://127.0.0.1:8001","cost":2.5,"disabled":true}`})
	got := a.record(t)
	if a.status != 200 || got.Priority != 50 || got.Cost != 2.5 || got.Labels != nil || !got.Disabled || !got.HasAPIKey {
		t.Fatalf("full PUT: %d %s", a.status, a.body)
	}
	cur, _ := e.node.Worker(id)
	if cur.Spec.APIKey != "sk-k" {
		t.Error("the API key was dropped by a PUT without api_key")
	}
	do(e.h, req{method: "PUT", uri: path, body: `{"url":"http://127.0.0.1:8001","api_key":""}`})
	if cur, _ = e.node.Worker(id); cur.Spec.APIKey != "" {
		t.Error(`"api_key": "" did not clear the key`)
	}
	if a := do(e.h, req{method: "PUT", uri: path, body: `{"url":"http://127.0.0.1:8002"}`}); a.status != 400 || !strings.Contains(a.body, "url: names worker") {
		t.Errorf("URL of another worker: %d %s", a.status, a.body)
	}
	if a := do(e.h, req{method: "PUT", uri: path, body: `{"url":"http://127.0.0.1:8001","owner":"n2"}`}); a.status != 400 || a.errCode() != "unknown_field" {
		t.Errorf("owner in a PUT: %d %s", a.status, a.body)
	}
}

// TestPatch merges fields onto the current spec, and a refused PATCH leaves the record as it
// was (atomic).
func TestPatch(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.register(t, `{"url":"http://127.0.0.1:8001","api_key":"sk-k","model":"m1","labels":{"a":"1","b":"2"},"health":{"timeout_secs":3}}`)
	id := worker.ID(rec.ID)
	path := "/workers/" + rec.ID
	a := do(e.h, req{method: "PATCH", uri: path, body: `{"priority":7,"labels":{"a":null,"c":"3"},"health":{"failure_threshold":5},"model":"m2","capabilities":["chat"],"disabled":true,"reason":"swap"}`})
	got := a.record(t)
	if a.status != 200 || got.Priority != 7 || fmt.Sprint(got.Labels) != "map[b:2 c:3]" || *got.Health.TimeoutSecs != 3 ||
		*got.Health.FailureThreshold != 5 || fmt.Sprint(got.Models) != "[m2]" || fmt.Sprint(got.Capabilities) != "[chat]" ||
		!got.Disabled || got.DisabledReason != "swap" {
		t.Fatalf("patch: %d %s", a.status, a.body)
	}
	cur, _ := e.node.Worker(id)
	if cur.Spec.APIKey != "sk-k" {
		t.Error("PATCH dropped the API key")
	}
	a = do(e.h, req{method: "PATCH", uri: path, body: `{"priority":null,"health":null,"api_key":"sk-new"}`})
	if got := a.record(t); got.Priority != 50 || got.Health != nil {
		t.Fatalf("reset: %s", a.body)
	}
	if cur, _ = e.node.Worker(id); cur.Spec.APIKey != "sk-new" {
		t.Error("PATCH did not set the API key")
	}
	for _, tt := range []struct{ body, code, msg string }{
		{`{"priority":7,"cost":-1}`, "invalid_field", "cost"},
		{`{"priority":5000}`, "invalid_field", "priority"},
		{`{"url":"http://127.0.0.1:9"}`, "invalid_field", "url"},
		{`{"connection_mode":"grpc"}`, "invalid_field", "connection_mode"},
		{`{"health":{"timeout_secs":0},"disabled":false}`, "invalid_field", "health.timeout_secs"},
		{`{"health":{"bogus":1}}`, "unknown_field", "bogus"},
		{`{"capabilities":["teleport"]}`, "invalid_field", "capabilities"},
		{`{"labels":"x"}`, "invalid_field", "labels"},
		{`{}`, "invalid_request", "nothing to change"},
		{`{"nope":1}`, "unknown_field", "nope"},
	} {
		a := do(e.h, req{method: "PATCH", uri: path, body: tt.body})
		if a.status != 400 || a.errCode() != tt.code || !strings.Contains(a.body, tt.msg) {
			t.Errorf("%s: %d %s; want 400 %s naming %s", tt.body, a.status, a.body, tt.code, tt.msg)
		}
		if after, _ := e.node.Worker(id); after.Revision != cur.Revision || after.Disabled != cur.Disabled {
			t.Errorf("%s: a refused PATCH changed the record", tt.body)
		}
	}
	if a := do(e.h, req{method: "PATCH", uri: "/workers/w-000000000000", body: `{"priority":1}`}); a.status != 404 {
		t.Errorf("unknown worker: %d", a.status)
	}
}

// racer is a Writer that changes the record (a concurrent operator) before each of the first
// `races` compare-and-sets it passes on.
type racer struct {
	*env
	mu    sync.Mutex
	races int
}

func (r *racer) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	if rs, ok := cmd.(fsm.ReplaceSpec); ok {
		r.mu.Lock()
		race := r.races > 0
		r.races--
		r.mu.Unlock()
		if race {
			by := fmt.Sprintf("other-%d", r.races)
			if _, err := r.writer.Apply(ctx, fsm.SetFlags{ID: rs.ID, Flags: fsm.FlagChange{Disabled: ptr(true), By: by}}); err != nil {
				return fsm.Result{}, err
			}
		}
	}
	return r.writer.Apply(ctx, cmd)
}

func ptr[T any](v T) *T { return &v }

// TestPatchCompareAndSet: a PATCH whose record changed under it re-reads and retries, keeping
// the other change; one that keeps losing answers 409 revision_conflict.
func TestPatchCompareAndSet(t *testing.T) {
	for _, tt := range []struct {
		races  int
		status int
	}{{1, 200}, {casAttempts, 409}} {
		t.Run(fmt.Sprintf("%d races", tt.races), func(t *testing.T) {
			var r *racer
			e := newEnv(t, func(c *Config) {
				r = &racer{races: tt.races}
				c.Writer = r
			})
			r.env = e
			rec := e.register(t, `{"url":"http://127.0.0.1:8001"}`)
			a := do(e.h, req{method: "PATCH", uri: "/workers/" + rec.ID, body: `{"priority":3}`})
			if a.status != tt.status {
				t.Fatalf("%d %s, want %d", a.status, a.body, tt.status)
			}
			cur, _ := e.node.Worker(worker.ID(rec.ID))
			if tt.status == 200 && (cur.Spec.PriorityOrDefault() != 3 || !cur.Disabled) {
				t.Errorf("the retry lost a change: priority %d disabled %v", cur.Spec.PriorityOrDefault(), cur.Disabled)
			}
			if tt.status == 409 && (a.errCode() != "revision_conflict" || cur.Spec.PriorityOrDefault() != 50) {
				t.Errorf("409 %s, priority %d", a.body, cur.Spec.PriorityOrDefault())
			}
		})
	}
}

// TestDelete: DELETE of a ready worker puts its record in draining through raft and answers
// 202 with the settle time and the deadline, whichever gateway owns the worker; the record stays
// for its owner to remove. A worker with nothing to drain (not ready, quarantined, no settle, a
// gateway that cannot drain) is removed at once (200). A DELETE of a draining worker answers
// the first drain's deadline again. An unknown worker is 404.
func TestDelete(t *testing.T) {
	now := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC) // the env's clock
	fiveSecs := func(worker.Spec) time.Duration { return 5 * time.Second }
	tests := []struct {
		name       string
		settle     func(worker.Spec) time.Duration
		body       string                                   // the registration
		before     func(t *testing.T, e *env, id worker.ID) // after the registration
		status     int
		wantStatus string
	}{
		{"cannot drain", nil, `{"url":"http://127.0.0.1:8001"}`, nil, 200, "removed"},
		{"ready: drains", fiveSecs, `{"url":"http://127.0.0.1:8001"}`, nil, 202, "draining"},
		{"ready, owned elsewhere: drains", fiveSecs, `{"url":"http://127.0.0.1:8001","owner":"n2"}`, nil, 202, "draining"},
		{"the worker's own settle", func(s worker.Spec) time.Duration { return time.Duration(*s.Health.DrainSettleSecs) * time.Second },
			`{"url":"http://127.0.0.1:8001","health":{"drain_settle_secs":5}}`, nil, 202, "draining"},
		{"no settle: removed", func(worker.Spec) time.Duration { return 0 }, `{"url":"http://127.0.0.1:8001"}`, nil, 200, "removed"},
		{"not ready: removed", fiveSecs, `{"url":"http://127.0.0.1:8001"}`, func(t *testing.T, e *env, id worker.ID) {
			if _, err := e.pool.SetHealth(id, health.NotReady); err != nil {
				t.Fatal(err)
			}
		}, 200, "removed"},
		{"quarantined: removed", fiveSecs, `{"url":"http://127.0.0.1:8001"}`, func(t *testing.T, e *env, id worker.ID) {
			if a := do(e.h, req{method: "PUT", uri: "/workers/" + string(id), body: `{"is_dead":true}`}); a.status != 200 {
				t.Fatalf("quarantine: %d %s", a.status, a.body)
			}
		}, 200, "removed"},
		{"draining already: the first deadline", fiveSecs, `{"url":"http://127.0.0.1:8001"}`, func(t *testing.T, e *env, id worker.ID) {
			if _, err := e.writer.Apply(context.Background(), fsm.Drain{ID: id, At: now, Settle: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
			// Not ready any more as the pool sees it: the record's drain goes on regardless.
			testkit.For(t, "the drain to reach the pool", func() bool { return e.pool.Get(id).Gates()&pool.GateRemoving != 0 })
			if _, err := e.pool.SetHealth(id, health.Draining); err != nil {
				t.Fatal(err)
			}
		}, 202, "draining"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.DrainSettle = tt.settle })
			rec := e.register(t, tt.body)
			id := worker.ID(rec.ID)
			testkit.For(t, "the pool to hold the worker", func() bool { return e.pool.Get(id) != nil })
			if tt.before != nil {
				tt.before(t, e, id)
			}
			a := do(e.h, req{method: "DELETE", uri: "/workers/" + url.PathEscape(workerURL(8001))})
			var ans deleteAnswer
			_ = json.Unmarshal([]byte(a.body), &ans)
			if a.status != tt.status || ans.Status != tt.wantStatus || ans.ID != rec.ID {
				t.Fatalf("%d %s", a.status, a.body)
			}
			cur, found := e.node.Worker(id)
			if tt.status == 200 {
				if found {
					t.Errorf("record present after a 200 DELETE: %+v", cur)
				}
				testkit.For(t, "the pool to drop the worker", func() bool { return e.pool.Get(id) == nil })
				return
			}
			deadline := now.Add(5 * time.Second)
			if ans.DrainSettleSecs != 5 || ans.DrainDeadline == nil || !ans.DrainDeadline.Equal(deadline) {
				t.Errorf("answer %s, want a 5 s settle ending at %v", a.body, deadline)
			}
			if !found || !cur.Draining || !cur.DrainDeadline().Equal(deadline) {
				t.Fatalf("record after a 202 DELETE: found %v %+v", found, cur)
			}
			testkit.For(t, "the pool to stop routing to the worker", func() bool { return len(e.pool.Snapshot().Routable) == 0 })
			got := do(e.h, req{method: "GET", uri: "/workers/" + string(id)}).record(t)
			if got.HealthState != "draining" || got.Routable || got.DrainDeadline == nil || !got.DrainDeadline.Equal(deadline) {
				t.Errorf("GET of a draining worker: health %q routable %v deadline %v", got.HealthState, got.Routable, got.DrainDeadline)
			}
			if a := do(e.h, req{method: "POST", uri: "/workers", body: tt.body}); a.status != 409 || !strings.Contains(a.body, "draining") {
				t.Errorf("registering a draining worker again: %d %s", a.status, a.body)
			}
			// A second DELETE answers the same drain; its deadline does not move.
			e.cfg.Now = func() time.Time { return now.Add(time.Minute) }
			again := do(e.handler(func(c *Config) { c.DrainSettle = tt.settle }), req{method: "DELETE", uri: "/workers/" + string(id)})
			_ = json.Unmarshal([]byte(again.body), &ans)
			if again.status != 202 || ans.DrainDeadline == nil || !ans.DrainDeadline.Equal(deadline) {
				t.Errorf("second DELETE: %d %s", again.status, again.body)
			}
			if a := do(e.h, req{method: "DELETE", uri: "/workers/w-000000000000"}); a.status != 404 || a.errCode() != "worker_not_found" {
				t.Errorf("unknown worker: %d %s", a.status, a.body)
			}
		})
	}
}

// failing is a Writer that fails every write with err.
type failing struct{ err error }

func (f failing) Apply(context.Context, fsm.Command) (fsm.Result, error) { return fsm.Result{}, f.err }

// TestWriteErrors maps each way a raft write can fail to its status and stable code; the 503s
// carry Retry-After.
func TestWriteErrors(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{consensus.ErrNoLeader, 503, "no_leader"},
		{&consensus.NoQuorumError{Silence: 1500 * time.Millisecond}, 503, "no_leader"},
		{&consensus.NotLeaderError{Leader: "n2", LeaderAddress: "10.0.0.2:39528"}, 503, "not_leader"},
		{fmt.Errorf("%w: %w", consensus.ErrOutcomeUnknown, consensus.ErrShutdown), 503, "outcome_unknown"},
		{fmt.Errorf("%w: leadership lost", consensus.ErrOutcomeUnknown), 503, "outcome_unknown"},
		{consensus.ErrTimeout, 503, "write_timeout"},
		{context.DeadlineExceeded, 503, "write_timeout"},
		{consensus.ErrShutdown, 503, "unavailable"},
		{&fsm.InvalidError{Field: "owner", Msg: "empty"}, 400, "invalid_request"},
		{fmt.Errorf("disk on fire"), 500, "internal"},
	}
	e := newEnv(t, nil)
	id := worker.ID(e.register(t, `{"url":"http://127.0.0.1:8001"}`).ID)
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			h := e.handler(func(c *Config) { c.Writer = failing{tt.err} })
			for _, r := range []req{
				{method: "POST", uri: "/workers", body: `{"url":"http://127.0.0.1:8002"}`},
				{method: "PUT", uri: "/workers/" + string(id), body: `{"disabled":true}`},
				{method: "PATCH", uri: "/workers/" + string(id), body: `{"priority":1}`},
				{method: "DELETE", uri: "/workers/" + string(id)},
			} {
				a := do(h, r)
				if a.status != tt.status || a.errCode() != tt.code {
					t.Errorf("%s: %d %s, want %d %s", r.method, a.status, a.body, tt.status, tt.code)
				}
				if _, ok := tt.err.(*consensus.NoQuorumError); ok && !strings.Contains(string(a.body), "cannot reach a quorum") {
					t.Errorf("%s: %s; want the message to say this gateway cannot reach a quorum", r.method, a.body)
				}
				if tt.status == 503 && string(a.header.Peek("Retry-After")) != "1" {
					t.Errorf("%s: 503 without Retry-After", r.method)
				}
			}
			if !strings.Contains(e.logs.String(), "admin write refused") {
				t.Error("a refused write was not logged")
			}
		})
	}
}

// A worker looked up by a URL that carries a credential is named in the 404 without it.
func TestUnknownURLNotEchoed(t *testing.T) {
	e := newEnv(t, nil)
	for _, u := range []string{"http://127.0.0.1:9999?key=zzsecretzz", "http://user:zzsecretzz@127.0.0.1:9999",
		"http://127.0.0.1:9999#zzsecretzz", "127.0.0.1:9999?key=zzsecretzz"} {
		a := do(e.h, req{method: "GET", uri: "/workers/" + url.PathEscape(u)})
		if a.status != 404 || strings.Contains(a.body, "zzsecretzz") {
			t.Errorf("%s: %d %s", u, a.status, a.body)
		}
	}
}

// fixedWriter answers every write with res, as a forwarder would after a re-send.
type fixedWriter struct{ res fsm.Result }

func (w fixedWriter) Apply(context.Context, fsm.Command) (fsm.Result, error) { return w.res, nil }

// TestRegisterAnswersCreatedForItsOwnResentCopy: a registration that the forwarder re-sent
// after the leader gave no answer, and whose first copy had committed, answers 201 (the record
// carries its registration time), not 200 as if another client had registered it first; a re-sent copy that finds another request's record, or an Unchanged
// without a re-send, stays 200.
func TestRegisterAnswersCreatedForItsOwnResentCopy(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"url":"http://127.0.0.1:8011"}`
	if a := do(e.h, req{method: "POST", uri: "/workers", body: body}); a.status != 201 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	rec, ok := e.node.Worker(idOf(t, workerURL(8011)))
	if !ok || !rec.RegisteredAt.Equal(e.cfg.Now()) {
		t.Fatalf("record %+v (present %v)", rec, ok)
	}
	other := rec
	other.RegisteredAt = rec.RegisteredAt.Add(-time.Minute)
	tests := []struct {
		name   string
		res    fsm.Result
		status int
	}{
		{"re-sent, its own first copy", fsm.Result{Index: 9, Outcome: fsm.Unchanged, Resent: true, Record: &rec}, 201},
		{"re-sent, another request's record", fsm.Result{Index: 9, Outcome: fsm.Unchanged, Resent: true, Record: &other}, 200},
		{"not re-sent", fsm.Result{Index: 9, Outcome: fsm.Unchanged, Record: &rec}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := e.handler(func(c *Config) { c.Writer = fixedWriter{tt.res} })
			if a := do(h, req{method: "POST", uri: "/workers", body: body}); a.status != tt.status {
				t.Errorf("%d %.200s; want %d", a.status, a.body, tt.status)
			}
		})
	}
}
