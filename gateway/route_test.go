package gateway

import (
	"strings"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

// Top-level media fields require their capability, as message parts do.
func TestTopLevelMediaFieldsRequireTheirCapability(t *testing.T) {
	e := newEnv(t, Config{})
	e.upstream(okHandler("chat-only"), func(s *worker.Spec) { s.Capabilities = []string{"chat"} })
	for _, field := range []string{"images", "image", "audios", "audio_inputs", "videos", "video"} {
		status, hdr, body := e.post("/v1/chat/completions", `{"model":"m","messages":[],"`+field+`":["data:x"]}`)
		if status != 503 || !strings.Contains(body, "no_available_workers") {
			t.Errorf("%s: %d %s on %q, want 503: the only worker lacks the capability", field, status, body, hdr.Get("X-Mesh-Worker"))
		}
	}
}
