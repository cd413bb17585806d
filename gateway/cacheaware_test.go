package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/worker"
)

// chatBody is a chat request of model with the messages' contents, the first as the system's.
func chatBody(t *testing.T, model string, contents ...string) string {
	t.Helper()
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	req := struct {
		Model    string `json:"model"`
		Messages []msg  `json:"messages"`
	}{Model: model}
	for i, c := range contents {
		role := "user"
		switch {
		case i == 0:
			role = "system"
		case i%2 == 0:
			role = "assistant"
		}
		req.Messages = append(req.Messages, msg{role, c})
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Through the data plane, cache_aware sends every turn of a chat to the worker its first turn
// went to, per model, and by SMG's rule spreads new system prompts over the workers.
func TestCacheAwareRoutesTurnsHome(t *testing.T) {
	e := newEnv(t, Config{Policy: "cache_aware", CacheAware: policy.CacheAwareConfig{Rule: policy.RuleSMG}})
	for _, name := range []string{"a", "b", "c"} {
		e.upstream(okHandler(name), func(s *worker.Spec) { s.Models = []string{"m1"} })
	}
	e.upstream(okHandler("other"), func(s *worker.Spec) { s.Models = []string{"m2"} })
	system := func(i int) string {
		return "You are assistant " + string(rune('A'+i)) + ". " + strings.Repeat("Answer briefly. ", 30)
	}
	home := map[int]string{}
	for turn := 1; turn <= 4; turn++ {
		for s := 0; s < 3; s++ {
			msgs := []string{system(s)}
			for k := 1; k <= turn; k++ {
				msgs = append(msgs, "question "+string(rune('0'+k)))
				if k < turn {
					msgs = append(msgs, "answer "+string(rune('0'+k)))
				}
			}
			status, hdr, body := e.post("/v1/chat/completions", chatBody(t, "m1", msgs...))
			if status != 200 {
				t.Fatalf("turn %d of session %d: %d %s", turn, s, status, body)
			}
			w := hdr.Get("X-Mesh-Worker")
			if turn == 1 {
				home[s] = w
			} else if w != home[s] {
				t.Fatalf("turn %d of session %d went to %s, its first turn to %s", turn, s, w, home[s])
			}
		}
	}
	if home[0] == home[1] || home[1] == home[2] || home[0] == home[2] {
		t.Errorf("three new system prompts share workers: %v", home)
	}
	// A body over the scanned MiB routes on its first MiB's text; a model no worker serves is
	// answered as ever.
	if status, _, body := e.post("/v1/chat/completions", largeChat("m1"), "X-Mesh-Route-Model", "m1"); status != 200 {
		t.Errorf("a large body: %d %s", status, body)
	}
	if status, _, body := e.post("/v1/chat/completions", chatBody(t, "m9", "hi")); status != 503 || !strings.Contains(body, "no_available_workers") {
		t.Errorf("a model no worker serves: %d %s", status, body)
	}
}
