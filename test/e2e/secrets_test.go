package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// Canaries: every secret the gateways are given carries canaryMark, and the gossip key is also
// searched as given (base64, which hides the mark).
const canaryMark = "c4n4ry"

var (
	canaryAdminKey   = "sk-admin-" + canaryMark + "-1"
	canaryWorkerKey  = "sk-worker-" + canaryMark + "-2"
	canaryWorkerKey2 = "sk-worker-" + canaryMark + "-3"
	canaryGossipKey  = base64.StdEncoding.EncodeToString([]byte("gossip-" + canaryMark + "-0123456789abcdefgh")) // 32 bytes
	canaryURLs       = []string{
		"http://127.0.0.1:1?key=" + canaryMark + "-4",
		"http://user:" + canaryMark + "-5@127.0.0.1:1",
		"http://user:" + canaryMark + "-6@127.0.0.1:1/v1?api_key=" + canaryMark + "-7",
		"http://127.0.0.1:1#" + canaryMark + "-8",
		"127.0.0.1:1?key=" + canaryMark + "-9",
	}
)

// leaks returns a description of each canary found in text, "" when there is none.
func leaks(text string) string {
	var found []string
	for _, c := range []string{canaryMark, canaryGossipKey} {
		if i := strings.Index(text, c); i >= 0 {
			found = append(found, fmt.Sprintf("%q at byte %d in …%s…", c, i, text[max(0, i-80):min(len(text), i+40)]))
		}
	}
	return strings.Join(found, "; ")
}

// TestNoSecretInAnswersLogsOrMeshctl gives two clustered gateways canary secrets (the admin key
// from a file and from the environment, the gossip key likewise, a worker's api_key registered
// through a follower and changed by PATCH, URLs carrying a key in their query and user info)
// and drives them (proxied requests, failing ones, probes, refusals, outcome reports). Then no
// canary may appear in any GET route's answer, in /metrics, in the logs at debug level (text on
// one gateway, JSON on the other), or in meshctl's output in any -o mode.
func TestNoSecretInAnswersLogsOrMeshctl(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine-canary")
	dir := t.TempDir()
	adminFile, gossipFile := filepath.Join(dir, "admin.key"), filepath.Join(dir, "gossip.key")
	for f, k := range map[string]string{adminFile: canaryAdminKey + "\n", gossipFile: canaryGossipKey + "\n"} {
		if err := os.WriteFile(f, []byte(k), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g1 := newClusterGW(t, "gw-canary-1", "--log-level", "debug", "--admin-api-key-file", adminFile,
		"--mesh-encrypt-key-file", gossipFile)
	g1.start(t, b)
	t.Setenv("MESHGW_ADMIN_API_KEY", canaryAdminKey) // g2 reads its keys from the environment
	t.Setenv("MESHGW_MESH_ENCRYPT_KEY", canaryGossipKey)
	g2 := newClusterGW(t, "gw-canary-2", "--log-level", "debug", "--log-format", "json")
	g2.start(t, b, g1.meshAddr())
	a1, a2 := newAdmin(g1.Gateway, canaryAdminKey), newAdmin(g2.Gateway, canaryAdminKey)
	harness.WaitFor(t, clusterBound, "both gateways in one raft group", func() bool {
		code, body := a2.do(t, "GET", "/mesh/raft", "")
		var r raftAnswer
		if code != 200 || json.Unmarshal([]byte(body), &r) != nil || len(r.Servers) != 2 || r.Leader == "" {
			return false
		}
		return strings.Count(body, `"voter"`) == r.VotersWanted
	})

	// The worker's key goes through the follower, forwarded to the leader; PATCH changes it.
	harness.WaitFor(t, clusterBound, "the registration through g2", func() bool {
		code, _ := a2.do(t, "POST", "/workers", fmt.Sprintf(`{"url":%q,"api_key":%q}`, engine.URL, canaryWorkerKey))
		return code == 201 || code == 200
	})
	a1.must(t, 200, "PATCH", workerPath(engine), fmt.Sprintf(`{"api_key":%q,"labels":{"tier":"canary"}}`, canaryWorkerKey2))
	for _, u := range canaryURLs {
		for _, a := range []*adminClient{a1, a2} {
			if code, body := a.do(t, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, u)); code != 400 || leaks(body) != "" {
				t.Errorf("POST /workers %s: %d %s", u, code, body)
			}
			if code, body := a.do(t, "GET", "/workers/"+url.PathEscape(u), ""); code != 404 || leaks(body) != "" {
				t.Errorf("GET /workers/%s: %d %s", url.PathEscape(u), code, body)
			}
		}
	}

	// Traffic on both gateways, some of it failing (retries, outcome reports to the owner).
	client := &http.Client{Timeout: 10 * time.Second}
	for _, g := range []*clusterGW{g1, g2} {
		harness.WaitFor(t, clusterBound, g.id+" routing to the engine", func() bool {
			code, _, _ := chat(client, g.URL, "canary traffic")
			return code == 200
		})
	}
	fault(t, engine, `{"error_status":500,"error_rate":1}`)
	for _, g := range []*clusterGW{g1, g2} {
		if code, _, err := chat(client, g.URL, "failing"); err != nil || code != 500 {
			t.Errorf("%s with a failing engine: %d %v", g.id, code, err)
		}
	}
	fault(t, engine, `{}`)
	harness.WaitFor(t, clusterBound, "the engine to answer again", func() bool {
		code, _, _ := chat(client, g1.URL, "again")
		return code == 200
	})

	// Every GET route, on both gateways.
	var id string
	for _, r := range a1.list(t) {
		id = r.ID
	}
	gets := []string{"/status", "/workers", "/workers?model=fake-model", "/workers/" + id, workerPath(engine),
		"/workers/" + id + "?consistent=true", "/mesh/peers", "/mesh/owners", "/mesh/raft", "/v1/models",
		"/liveness", "/live", "/healthz", "/health", "/readiness", "/ready"}
	for _, g := range []*clusterGW{g1, g2} {
		a := newAdmin(g.Gateway, canaryAdminKey)
		for _, path := range gets {
			if code, body := a.do(t, "GET", path, ""); code != 200 || leaks(body) != "" {
				t.Errorf("%s GET %s: %d; %s", g.id, path, code, leaks(body))
			}
		}
		if l := leaks(scrapeMetrics(t, g.Gateway)); l != "" {
			t.Errorf("%s /metrics: %s", g.id, l)
		}
	}

	// meshctl, every read in every output mode, and refusals that quote a URL.
	for _, g := range []*clusterGW{g1, g2} {
		c := &ctl{bin: b.Meshctl, gateway: g.URL, key: canaryAdminKey, secrets: []string{canaryMark, canaryGossipKey}}
		for _, cmd := range [][]string{{"peers"}, {"owners"}, {"workers", "list"}, {"workers", "get", id},
			{"workers", "get", engine.URL}, {"raft"}, {"status"}} {
			for _, o := range []string{"table", "json", "wide"} {
				if code, _, stderr := c.run(t, nil, append(cmd, "-o", o)...); code != 0 {
					t.Errorf("meshctl %v -o %s: exit %d: %s", cmd, o, code, stderr)
				}
			}
		}
		for _, u := range canaryURLs {
			if code, _, _ := c.run(t, nil, "workers", "get", u); code == 0 {
				t.Errorf("meshctl workers get %s found a worker", u)
			}
			if code, _, _ := c.run(t, nil, "workers", "add", u); code == 0 {
				t.Errorf("meshctl workers add %s succeeded", u)
			}
		}
	}

	// The logs, at debug level, text and JSON.
	for _, g := range []*clusterGW{g1, g2} {
		out := g.Output()
		if !strings.Contains(out, "admin write") || !strings.Contains(out, `level=DEBUG`) && !strings.Contains(out, `"level":"DEBUG"`) {
			t.Errorf("%s logged no admin write or nothing at debug level: the search below would prove little", g.id)
		}
		if l := leaks(out); l != "" {
			t.Errorf("%s's log: %s", g.id, l)
		}
	}
	if !strings.Contains(g2.Output(), `"msg":"meshgw started"`) {
		t.Errorf("g2 did not log JSON")
	}
}
