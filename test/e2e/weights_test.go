package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// journalAnswer is GET /weight_update_journal.
type journalAnswer struct {
	Records []struct {
		ID       string            `json:"id"`
		Targets  []string          `json:"targets"`
		Outcomes map[string]string `json:"outcomes"`
		Status   string            `json:"status"`
	} `json:"records"`
}

func weightVersion(t *testing.T, e *harness.Proc) string {
	t.Helper()
	resp, err := http.Get(control(e) + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		WeightVersion string `json:"weight_version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.WeightVersion
}

// updateURI targets engines by URL.
func updateURI(es ...*harness.Proc) string {
	q := url.Values{}
	for _, e := range es {
		q.Add("worker_id", e.URL)
	}
	return "/update_weights_from_disk?" + q.Encode()
}

// The weight-update journal on three gateways (DESIGN.md section 9): a successful update leaves
// every target enabled at the new version; a failed one keeps its record and its targets
// disabled on every gateway, refuses the next update with 409, and is resolved by enabling the
// targets one by one; a coordinator killed between two targets, then a restart of every
// gateway, keeps the record and the disabled targets on all three until resolve. No request
// reaches a target after the update's disable answered.
func TestWeightUpdateJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	e1, e2, spare := harness.StartEngine(t, b, "engine-w1"), harness.StartEngine(t, b, "engine-w2"), harness.StartEngine(t, b, "engine-spare")
	grace := []string{"--owner-failover-grace-secs", "600"}
	gws := []*clusterGW{newClusterGW(t, "wa", grace...), newClusterGW(t, "wb", grace...), newClusterGW(t, "wc", grace...)}
	wa, wb, wc := gws[0], gws[1], gws[2]
	wa.start(t, b)
	wb.start(t, b, wa.meshAddr())
	wc.start(t, b, wa.meshAddr())
	waitFormed(t, gws...)
	for _, e := range []*harness.Proc{e1, e2, spare} {
		newAdmin(wa.Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e.URL))
	}
	for _, g := range gws {
		for _, e := range []*harness.Proc{e1, e2, spare} {
			harness.WaitFor(t, clusterBound, g.id+" sees "+e.Name+" routable", func() bool {
				w, ok := drainViewOn(t, g, e.URL)
				return ok && w.Routable
			})
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	serve := func(what string) {
		t.Helper()
		for _, g := range gws {
			for i := range 4 {
				if code, body, err := chat(client, g.URL, fmt.Sprintf("%s %d via %s", what, i, g.id)); err != nil || code != 200 {
					t.Fatalf("chat via %s, %s: %d %v %.200s", g.id, what, code, err, body)
				}
			}
		}
	}
	journal := func(g *clusterGW) journalAnswer {
		t.Helper()
		var j journalAnswer
		if !getJSON(t, g, "/weight_update_journal", &j) {
			t.Fatalf("GET /weight_update_journal on %s failed", g.id)
		}
		return j
	}
	disabledEverywhere := func(want bool, es ...*harness.Proc) {
		t.Helper()
		for _, g := range gws {
			for _, e := range es {
				if found, disabled := hasWorker(t, g, e.URL); !found || disabled != want {
					t.Fatalf("%s lists %s: found %v, disabled %v; want disabled %v", g.id, e.Name, found, disabled, want)
				}
			}
		}
	}

	// 1. Success: every target at the new version, enabled again, no record.
	code, body := newAdmin(wb.Gateway, "").do(t, "POST", updateURI(e1, e2), `{"model_path":"/models/v2","weight_version":"v2"}`)
	if code != 200 {
		t.Fatalf("update through %s: %d %s", wb.id, code, body)
	}
	for _, e := range []*harness.Proc{e1, e2} {
		if v := weightVersion(t, e); v != "v2" {
			t.Fatalf("%s holds %q after the update, want v2", e.Name, v)
		}
	}
	disabledEverywhere(false, e1, e2)
	for _, g := range gws {
		if j := journal(g); len(j.Records) != 0 {
			t.Fatalf("%s has an open record after a successful update: %+v", g.id, j)
		}
	}
	serve("after the successful update")

	// 2. One engine fails: the record stays, both targets disabled everywhere, 409 next.
	fault(t, e2, `{"weight_update_status": 500}`)
	code, body = newAdmin(wc.Gateway, "").do(t, "POST", updateURI(e1, e2), `{"model_path":"/models/v3","weight_version":"v3"}`)
	before := map[string]map[string]int64{e1.Name: requestsByGateway(t, e1), e2.Name: requestsByGateway(t, e2)}
	if code != 502 {
		t.Fatalf("update with a failing engine through %s: %d %s", wc.id, code, body)
	}
	disabledEverywhere(true, e1, e2)
	for _, g := range gws {
		if j := journal(g); len(j.Records) != 1 || j.Records[0].Outcomes[workerIDOf(t, wa, e2)] != "failed" {
			t.Fatalf("%s's journal after the failed update: %+v", g.id, j)
		}
	}
	if code, body := newAdmin(wa.Gateway, "").do(t, "POST", updateURI(spare), `{"model_path":"/m"}`); code != 409 {
		t.Fatalf("a second update while a record is open: %d %s", code, body)
	}
	serve("record open")
	fault(t, e2, `{}`)
	// 3. Enabling the targets one by one resolves the record.
	newAdmin(wa.Gateway, "").must(t, 200, "PUT", workerPath(e1), `{"disabled":false}`)
	if j := journal(wb); len(j.Records) != 1 || len(j.Records[0].Targets) != 1 {
		t.Fatalf("after enabling %s: %+v", e1.Name, j)
	}
	newAdmin(wb.Gateway, "").must(t, 200, "PUT", workerPath(e2), `{"disabled":false}`)
	for _, g := range gws {
		if j := journal(g); len(j.Records) != 0 {
			t.Fatalf("%s: the record stayed open with every target enabled: %+v", g.id, j)
		}
	}
	for name, by := range map[string]map[string]int64{e1.Name: requestsByGateway(t, e1), e2.Name: requestsByGateway(t, e2)} {
		for g, n := range by {
			if n != before[name][g] {
				t.Errorf("%s sent %d requests to %s while the update held it disabled", g, n-before[name][g], name)
			}
		}
	}

	// 4. The coordinator dies between two targets; every gateway restarts; the record holds.
	fault(t, e2, `{"weight_update_hang": true}`)
	go func() { // its answer never comes: wb is killed mid-update
		resp, err := client.Post(wb.URL+updateURI(e1, e2), "application/json", strings.NewReader(`{"model_path":"/models/v4","weight_version":"v4"}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	harness.WaitFor(t, clusterBound, "e1's outcome recorded, e2's pending", func() bool {
		j := journal(wa)
		return len(j.Records) == 1 && j.Records[0].Outcomes[workerIDOf(t, wa, e1)] == "updated"
	})
	wb.Kill()
	wa.Kill()
	wc.Kill()
	fault(t, e2, `{}`)
	wa.start(t, b, wb.meshAddr())
	wb.start(t, b, wa.meshAddr())
	wc.start(t, b, wa.meshAddr())
	waitFormed(t, gws...)
	disabledEverywhere(true, e1, e2)
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" shows the record interrupted", func() bool {
			j := journal(g)
			return len(j.Records) == 1 && len(j.Records[0].Targets) == 2 && j.Records[0].Status != "running"
		})
	}
	serve("after the restart, record open")
	code, body = newAdmin(wc.Gateway, "").do(t, "POST", "/weight_update_journal/resolve", `{"acknowledge":true}`)
	var res struct {
		Dropped []string `json:"dropped"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || code != 200 || len(res.Dropped) != 2 {
		t.Fatalf("resolve: %d %s", code, body)
	}
	disabledEverywhere(true, e1, e2)
	for _, g := range gws {
		if j := journal(g); len(j.Records) != 0 {
			t.Fatalf("%s after resolve: %+v", g.id, j)
		}
	}
}

// workerIDOf returns the id g gives the worker at e's URL.
func workerIDOf(t *testing.T, g *clusterGW, e *harness.Proc) string {
	t.Helper()
	var rec struct {
		ID string `json:"id"`
	}
	if !getJSON(t, g, workerPath(e), &rec) || rec.ID == "" {
		t.Fatalf("GET %s on %s", workerPath(e), g.id)
	}
	return rec.ID
}

// Under --ephemeral nothing durable could record a weight update, so the route answers 503
// not_durable and no engine gets the update (SGLang-Omni semantics); the journal reads empty.
func TestWeightUpdateEphemeral(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	e := harness.StartEngine(t, b, "engine-eph")
	g := harness.StartGateway(t, b, "eph", "--ephemeral", "--worker-urls", e.URL)
	a := newAdmin(g, "")
	code, body := a.do(t, "POST", "/update_weights_from_disk", `{"model_path":"/m","weight_version":"v9"}`)
	var ans struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &ans); err != nil || code != 503 || ans.Error.Code != "not_durable" ||
		!strings.Contains(ans.Error.Message, "nothing durable could record") {
		t.Fatalf("weight update under --ephemeral: %d %s", code, body)
	}
	if v := weightVersion(t, e); v == "v9" {
		t.Fatal("the engine got the update")
	}
	if code, body := a.do(t, "GET", "/weight_update_journal", ""); code != 200 || body != `{"records":[]}` {
		t.Fatalf("journal under --ephemeral: %d %s", code, body)
	}
}
