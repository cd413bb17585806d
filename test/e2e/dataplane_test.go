package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// startFleet starts n fake engines and one gateway routing to them.
func startFleet(t *testing.T, n int, gwArgs ...string) (*harness.Gateway, []*harness.Proc) {
	t.Helper()
	b := harness.Build(t)
	var engines []*harness.Proc
	var urls []string
	for i := range n {
		e := harness.StartEngine(t, b, fmt.Sprintf("engine-%d", i+1))
		engines = append(engines, e)
		urls = append(urls, e.URL)
	}
	args := append([]string{"--worker-urls", strings.Join(urls, ",")}, gwArgs...)
	gw := harness.StartGateway(t, b, "meshgw", args...)
	gw.WaitReady(t, 20*time.Second)
	return gw, engines
}

func chat(client *http.Client, url, prompt string) (int, string, error) {
	body := fmt.Sprintf(`{"model":"fake-model","messages":[{"role":"user","content":%q}]}`, prompt)
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestOpenAINodeSDK drives the gateway with the official OpenAI Node SDK: a chat completion, a
// streamed one, and the models list, checking the content that comes back; and the errors as the
// SDK surfaces them (a 400, a 503 no_available_workers from a gateway without workers, a 413)
// with their request ids. The engines are registered by URL only and no --model is given: the
// models list is what the gateway discovered from them.
func TestOpenAINodeSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	root := harness.ModuleRoot()
	if _, err := os.Stat(filepath.Join(root, "test/node/node_modules/openai")); err != nil {
		t.Fatal("the OpenAI Node SDK is not installed: run scripts/test-deps.sh (make test does)")
	}
	gw, _ := startFleet(t, 2, "--max-payload-size", "65536")
	empty := harness.StartGateway(t, harness.Build(t), "meshgw-empty")
	waitDiscovered(t, gw, 2, "fake-model")
	cmd := exec.Command("node", "--test", "openai.test.mjs")
	cmd.Dir = filepath.Join(root, "test/node")
	cmd.Env = append(os.Environ(), "MESHGW_URL="+gw.URL, "MESHGW_EMPTY_URL="+empty.URL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("# pass 7\n")) || !bytes.Contains(out, []byte("# fail 0\n")) {
		t.Fatalf("node --test did not pass 7 tests:\n%s", out)
	}
}

// waitDiscovered waits until GET /workers shows n workers whose discovered_models are [model]
// and GET /v1/models lists exactly [model]. Discovery follows readiness in the background, so
// it is waited for, within a deadline.
func waitDiscovered(t *testing.T, gw *harness.Gateway, n int, model string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		workers, models, err := discovered(gw.URL)
		if err == nil && slices.Equal(models, []string{model}) && len(workers) == n &&
			slices.IndexFunc(workers, func(m []string) bool { return !slices.Equal(m, []string{model}) }) < 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("the engines' models were not discovered within 10 s: discovered_models %q, /v1/models %q, err %v",
				workers, models, err)
		case <-tick.C:
		}
	}
}

// discovered returns every worker's discovered_models from GET /workers and the ids of
// GET /v1/models.
func discovered(base string) ([][]string, []string, error) {
	var workers struct {
		Workers []struct {
			DiscoveredModels []string `json:"discovered_models"`
		} `json:"workers"`
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	for _, g := range []struct {
		path string
		into any
	}{{"/workers", &workers}, {"/v1/models", &models}} {
		resp, err := http.Get(base + g.path)
		if err != nil {
			return nil, nil, err
		}
		err = json.NewDecoder(resp.Body).Decode(g.into)
		resp.Body.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("GET %s: %w", g.path, err)
		}
	}
	var ws [][]string
	for _, w := range workers.Workers {
		ws = append(ws, w.DiscoveredModels)
	}
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	return ws, ids, nil
}

// TestKillEngineMidLoop kills one of three engines with SIGKILL in the middle of a steady
// request loop; retries must absorb it, so no client request fails.
func TestKillEngineMidLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	gw, engines := startFleet(t, 3)
	const clients, total = 4, 1200
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	killAt := int64(total / 3)
	var killOnce sync.Once
	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				n := sent.Add(1)
				if n > total {
					return
				}
				if n == killAt {
					killOnce.Do(func() { engines[1].Kill() })
				}
				code, body, err := chat(client, gw.URL, fmt.Sprintf("request %d", n))
				if err != nil || code != http.StatusOK || !strings.Contains(body, "request ") {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d err %v body %.200s", code, err, body))
				}
			}
		}()
	}
	wg.Wait()
	if !engines[1].Exited() {
		t.Fatal("the engine was never killed")
	}
	if done := min(sent.Load(), total); done < total {
		t.Fatalf("only %d of %d requests were sent before the deadline", done, total)
	}
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d of %d requests failed after killing one engine; first: %v", f, total, firstErr.Load())
	}
}

// TestBadWorkerURLRefusedAtStart: a worker URL with a path is refused with exit status 2 and one
// line naming it.
func TestBadWorkerURLRefusedAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	p := harness.Start(t, "meshgw", b.Meshgw, []string{"--port", "0", "--worker-urls", "http://127.0.0.1:8000/v1"}, nil, nil)
	code, err := p.Wait(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(p.Output())
	if code != 2 || strings.Count(out, "\n") != 0 || !strings.Contains(out, "http://127.0.0.1:8000/v1") {
		t.Fatalf("exit %d, output %q; want exit 2 and one line naming the URL", code, out)
	}
}

// TestBadInputAnswers: malformed JSON, an unknown route and an oversized body get clear errors
// in the OpenAI envelope, and the gateway keeps serving.
func TestBadInputAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	gw, _ := startFleet(t, 1, "--max-payload-size", "1024")
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"malformed json", "POST", "/v1/chat/completions", `{"model": "fake-model", "messages": [`, 400},
		{"unknown route", "POST", "/v1/teleport", `{}`, 404},
		{"body over the limit", "POST", "/v1/chat/completions", `{"model":"fake-model","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, gw.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Error struct {
					Message string `json:"message"`
					Code    any    `json:"code"`
				} `json:"error"`
			}
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d; want %d", resp.StatusCode, tt.want)
			}
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Error.Message == "" {
				t.Fatalf("no OpenAI error envelope: %v %+v", err, env)
			}
		})
	}
	if code, _, err := chat(http.DefaultClient, gw.URL, "still alive"); err != nil || code != 200 {
		t.Fatalf("gateway stopped serving after bad input: %d %v", code, err)
	}
}
