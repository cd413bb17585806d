package gateway

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

// largeChat is a chat body over reqmeta's scan limit whose model comes after its first MiB.
func largeChat(model string) string {
	return `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 1200<<10) + `"}],"model":"` + model + `"}`
}

// A body whose model lies beyond the scanned MiB is not routed blindly in a pool whose workers
// serve different models: it is refused with a 400 naming the model hint, and routed by the
// hint when it has one. A pool that serves one model routes it as before.
func TestLargeBodyInAMixedModelPoolNeedsTheModelHint(t *testing.T) {
	e := newEnv(t, Config{Policy: "round_robin"})
	_, m1 := e.upstream(okHandler("m1"), func(s *worker.Spec) { s.Models = []string{"m1"} })
	e.upstream(okHandler("m2"), func(s *worker.Spec) { s.Models = []string{"m2"} })
	for i := 0; i < 4; i++ {
		status, hdr, body := e.post("/v1/chat/completions", largeChat("m1"))
		if status != 400 || !strings.Contains(body, "X-Mesh-Route-Model") || !strings.Contains(body, `"type":"invalid_request_error"`) {
			t.Fatalf("request %d: %d %s (worker %q); want 400 naming X-Mesh-Route-Model", i, status, body, hdr.Get("X-Mesh-Worker"))
		}
	}
	for i := 0; i < 4; i++ {
		status, hdr, body := e.post("/v1/chat/completions", largeChat("m1"), "X-Mesh-Route-Model", "m1")
		if status != 200 || hdr.Get("X-Mesh-Worker") != string(m1.ID) {
			t.Fatalf("with the hint, request %d: %d %s on %q, want the m1 worker", i, status, body, hdr.Get("X-Mesh-Worker"))
		}
	}
	// The model within the first MiB needs no hint.
	small := `{"model":"m1","messages":[{"role":"user","content":"` + strings.Repeat("x", 1200<<10) + `"}]}`
	if status, hdr, _ := e.post("/v1/chat/completions", small); status != 200 || hdr.Get("X-Mesh-Worker") != string(m1.ID) {
		t.Errorf("model in the first MiB: %d on %q", status, hdr.Get("X-Mesh-Worker"))
	}
}

func TestLargeBodyInAOneModelPoolNeedsNoHint(t *testing.T) {
	e := newEnv(t, Config{})
	e.upstream(okHandler("a"), func(s *worker.Spec) { s.Models = []string{"m1"} })
	e.upstream(okHandler("b"), func(s *worker.Spec) { s.Models = []string{"m1"} })
	// Another route's worker of another model does not make the chat pool mixed.
	e.upstream(okHandler("emb"), func(s *worker.Spec) { s.Models = []string{"e5"}; s.Capabilities = []string{"embeddings"} })
	for i := 0; i < 3; i++ {
		if status, _, body := e.post("/v1/chat/completions", largeChat("m1")); status != 200 {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
}

// The same holds for capabilities: a large body whose media may lie beyond the scanned MiB, in
// a pool whose workers' capabilities differ, needs X-Mesh-Route-Capabilities.
func TestLargeBodyInAMixedCapabilityPoolNeedsTheCapabilitiesHint(t *testing.T) {
	e := newEnv(t, Config{Policy: "round_robin"})
	_, vision := e.upstream(okHandler("vision"), func(s *worker.Spec) { s.Models = []string{"m1"}; s.Capabilities = []string{"chat", "image_input"} })
	e.upstream(okHandler("text"), func(s *worker.Spec) { s.Models = []string{"m1"}; s.Capabilities = []string{"chat"} })
	big := `{"model":"m1","messages":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("x", 1200<<10) + `"},{"type":"image_url","image_url":{"url":"data:"}}]}]}`
	status, _, body := e.post("/v1/chat/completions", big)
	if status != 400 || !strings.Contains(body, "X-Mesh-Route-Capabilities") {
		t.Fatalf("got %d %s; want 400 naming X-Mesh-Route-Capabilities", status, body)
	}
	for i := 0; i < 3; i++ {
		status, hdr, body := e.post("/v1/chat/completions", big, "X-Mesh-Route-Capabilities", "image_input")
		if status != 200 || hdr.Get("X-Mesh-Worker") != string(vision.ID) {
			t.Fatalf("with the hint: %d %s on %q, want the vision worker", status, body, hdr.Get("X-Mesh-Worker"))
		}
	}
	// Media already seen in the prefix leaves only workers that have it: nothing to guess.
	early := `{"model":"m1","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:"}},{"type":"text","text":"` + strings.Repeat("x", 1200<<10) + `"}]}]}`
	if status, hdr, body := e.post("/v1/chat/completions", early); status != 200 || hdr.Get("X-Mesh-Worker") != string(vision.ID) {
		t.Errorf("image in the prefix: %d %s on %q", status, body, hdr.Get("X-Mesh-Worker"))
	}
}

// upload is a multipart/form-data body: the fields in order, then the file, or the file first.
func upload(t *testing.T, fileFirst bool, fields ...string) (body []byte, contentType string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	file := func() {
		fw, err := mw.CreateFormFile("file", "a.wav")
		if err != nil {
			t.Fatal(err)
		}
		// Audio bytes that look like a form part, to show the file's content is skipped.
		_, _ = fw.Write([]byte("RIFF\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nasr-1\r\n" + strings.Repeat("\x00\xff", 4096)))
	}
	if fileFirst {
		file()
	}
	for i := 0; i+1 < len(fields); i += 2 {
		if err := mw.WriteField(fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if !fileFirst {
		file()
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

func (e *testEnv) postUpload(path string, body []byte, contentType string, hdr ...string) (int, http.Header, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.base+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return e.do(req)
}

// Uploads to the audio routes are routed by their model and stream form fields, wherever the
// file part lies, and a hint header that disagrees with a field is a 400 naming it.
func TestUploadsRouteByTheirFormFields(t *testing.T) {
	e := newEnv(t, Config{Policy: "round_robin"})
	_, asr1 := e.upstream(okHandler("asr-1"), func(s *worker.Spec) { s.Models = []string{"asr-1"} })
	_, asr2 := e.upstream(okHandler("asr-2"), func(s *worker.Spec) { s.Models = []string{"asr-2"} })
	_, asr2batch := e.upstream(okHandler("asr-2-batch"), func(s *worker.Spec) {
		s.Models = []string{"asr-2"}
		s.Capabilities = []string{"audio_input"} // no streaming
	})
	for _, path := range []string{"/v1/audio/transcriptions", "/v1/audio/translations"} {
		for _, fileFirst := range []bool{false, true} {
			body, ct := upload(t, fileFirst, "model", "asr-1", "language", "en")
			for i := 0; i < 4; i++ {
				if status, hdr, answer := e.postUpload(path, body, ct); status != 200 || hdr.Get("X-Mesh-Worker") != string(asr1.ID) {
					t.Fatalf("%s fileFirst=%v: %d %s on %q, want the asr-1 worker", path, fileFirst, status, answer, hdr.Get("X-Mesh-Worker"))
				}
			}
			body, ct = upload(t, fileFirst, "stream", "true", "model", "asr-2")
			for i := 0; i < 4; i++ {
				if status, hdr, answer := e.postUpload(path, body, ct); status != 200 || hdr.Get("X-Mesh-Worker") != string(asr2.ID) {
					t.Fatalf("%s fileFirst=%v, streamed: %d %s on %q, want the streaming asr-2 worker", path, fileFirst, status, answer, hdr.Get("X-Mesh-Worker"))
				}
			}
		}
	}
	body, ct := upload(t, true, "model", "asr-2")
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		_, hdr, _ := e.postUpload("/v1/audio/transcriptions", body, ct)
		seen[hdr.Get("X-Mesh-Worker")] = true
	}
	if len(seen) != 2 || !seen[string(asr2.ID)] || !seen[string(asr2batch.ID)] {
		t.Errorf("asr-2 uploads went to %v, want both asr-2 workers", seen)
	}
	for _, tt := range []struct{ field, value, header, hint string }{
		{"model", "asr-2", "X-Mesh-Route-Model", "asr-1"},
		{"stream", "false", "X-Mesh-Route-Stream", "true"},
	} {
		body, ct := upload(t, true, "model", "asr-2", tt.field, tt.value)
		status, _, answer := e.postUpload("/v1/audio/transcriptions", body, ct, tt.header, tt.hint)
		if status != 400 || !strings.Contains(answer, tt.header) {
			t.Errorf("%s field %q, hint %q: %d %s; want 400 naming %s", tt.field, tt.value, tt.hint, status, answer, tt.header)
		}
	}
	// The hint that agrees, or fills a gap, is fine.
	body, ct = upload(t, true, "language", "en")
	if status, hdr, _ := e.postUpload("/v1/audio/transcriptions", body, ct, "X-Mesh-Route-Model", "asr-1"); status != 200 || hdr.Get("X-Mesh-Worker") != string(asr1.ID) {
		t.Errorf("model from the hint alone: %d on %q", status, hdr.Get("X-Mesh-Worker"))
	}
}

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

// A body larger than the body budget is streamed after its first bytes are read: the same rule
// holds for what lies beyond them.
func TestStreamedBodyInAMixedModelPoolNeedsTheModelHint(t *testing.T) {
	e := newEnv(t, Config{MaxBufferedBody: 256 << 10})
	_, m1 := e.upstream(okHandler("m1"), func(s *worker.Spec) { s.Models = []string{"m1"} })
	e.upstream(okHandler("m2"), func(s *worker.Spec) { s.Models = []string{"m2"} })
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 512<<10) + `"}],"model":"m1"}`
	status, _, answer := e.post("/v1/chat/completions", body)
	if status != 400 || !strings.Contains(answer, "X-Mesh-Route-Model") || !strings.Contains(answer, "262144 bytes") {
		t.Fatalf("got %d %s; want 400 naming X-Mesh-Route-Model and the bytes read", status, answer)
	}
	if status, hdr, _ := e.post("/v1/chat/completions", body, "X-Mesh-Route-Model", "m1"); status != 200 || hdr.Get("X-Mesh-Worker") != string(m1.ID) {
		t.Errorf("with the hint: %d on %q", status, hdr.Get("X-Mesh-Worker"))
	}
}

// An upload the gateway cannot read (not a multipart form) is routed by its hints, and needs
// them where the workers serve different models.
func TestUnreadableUploadNeedsTheModelHint(t *testing.T) {
	e := newEnv(t, Config{})
	_, asr1 := e.upstream(okHandler("asr-1"), func(s *worker.Spec) { s.Models = []string{"asr-1"} })
	e.upstream(okHandler("asr-2"), func(s *worker.Spec) { s.Models = []string{"asr-2"} })
	status, _, answer := e.postUpload("/v1/audio/transcriptions", []byte("RIFF...."), "audio/wav")
	if status != 400 || !strings.Contains(answer, "X-Mesh-Route-Model") {
		t.Errorf("got %d %s; want 400 naming X-Mesh-Route-Model", status, answer)
	}
	if status, hdr, _ := e.postUpload("/v1/audio/transcriptions", []byte("RIFF...."), "audio/wav", "X-Mesh-Route-Model", "asr-1"); status != 200 || hdr.Get("X-Mesh-Worker") != string(asr1.ID) {
		t.Errorf("with the hint: %d on %q", status, hdr.Get("X-Mesh-Worker"))
	}
}
