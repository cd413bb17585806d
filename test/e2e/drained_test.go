package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// TestDrainedGatewayRefusesNewRequests: a gateway whose drain finished (it
// left the mesh, so its pool no longer follows the fleet) must not route a new model request
// from its frozen view. Three gateways share an engine; a follower is drained through the
// leader; once the drain answers done, a chat sent to the drained gateway answers 503 draining
// in the OpenAI envelope with Retry-After, the engine gets nothing from it, its probes and admin
// GETs still answer, its metrics count the refusal, and the gateways that stay still serve.
func TestDrainedGatewayRefusesNewRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine-drained")
	gws, leader, victim, _ := threeWithRoles(t, b, "l")
	newAdmin(leader.Gateway, "").must(t, 201, "POST", "/workers", `{"url":"`+engine.URL+`"}`)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" serves a chat", func() bool { return oneChat(client, g.URL, false, "before") == nil })
	}

	if code, body, err := postDrain(leader.URL, victim.id); err != nil || code != 200 || !strings.Contains(body, `"done":true`) {
		t.Fatalf("POST /mesh/drain %s: %d %s %v", victim.id, code, body, err)
	}
	before, _ := engineStats(t, engine, victim.id)
	resp, err := client.Post(victim.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"fake-model","messages":[{"role":"user","content":"after the drain"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b2)
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(body) != "draining" || !strings.Contains(body, `"type":"service_unavailable"`) ||
		resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Mesh-Worker") != "" {
		t.Errorf("a chat to the drained %s: %d Retry-After=%q X-Mesh-Worker=%q %s", victim.id, resp.StatusCode,
			resp.Header.Get("Retry-After"), resp.Header.Get("X-Mesh-Worker"), body)
	}
	if after, _ := engineStats(t, engine, victim.id); after != before {
		t.Errorf("the engine got %d requests from the drained %s", after-before, victim.id)
	}
	if code := harness.Get(victim.URL + "/liveness"); code != http.StatusOK {
		t.Errorf("liveness of the drained %s: %d", victim.id, code)
	}
	if reason := readinessReason(t, victim); reason != "draining" {
		t.Errorf("readiness of the drained %s: %q", victim.id, reason)
	}
	if code, body := newAdmin(victim.Gateway, "").do(t, "GET", "/workers", ""); code != http.StatusOK {
		t.Errorf("GET /workers on the drained %s: %d %s", victim.id, code, body)
	}
	if !strings.Contains(scrape(t, victim.Gateway), "\nmeshgw_draining_rejected_total 1\n") {
		t.Errorf("meshgw_draining_rejected_total on the drained %s is not 1", victim.id)
	}
	for _, g := range gws {
		if g != victim {
			if err := oneChat(client, g.URL, true, "after the drain"); err != nil {
				t.Errorf("%s after the drain of %s: %v", g.id, victim.id, err)
			}
		}
	}
}
