package reqmeta

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

const (
	chat   = worker.CapChat
	stream = worker.CapStreaming
	img    = worker.CapImageInput
	audIn  = worker.CapAudioInput
	vid    = worker.CapVideoInput
	audOut = worker.CapAudioOutput
)

func TestCapabilityInference(t *testing.T) {
	tests := []struct {
		name   string
		route  Route
		body   string
		model  string
		stream bool
		caps   worker.Capability
	}{
		{"plain chat", RouteChat, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "m", false, chat},
		{"stream", RouteChat, `{"model":"m","stream":true,"messages":[]}`, "m", true, chat | stream},
		{"stream false", RouteChat, `{"stream":false}`, "", false, chat},
		{"image part", RouteChat, `{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:"}}]}]}`, "", false, chat | img},
		{"input_image", RouteChat, `{"messages":[{"content":[{"type":"input_image"}]}]}`, "", false, chat | img},
		{"audio part", RouteChat, `{"messages":[{"content":[{"type":"input_audio","input_audio":{"data":"..","format":"wav"}}]}]}`, "", false, chat | audIn},
		{"video part", RouteChat, `{"messages":[{"content":[{"type":"video_url","video_url":{"url":"u"}}]}]}`, "", false, chat | vid},
		{"modalities audio", RouteChat, `{"modalities":["text","audio"],"messages":[]}`, "", false, chat | audOut},
		{"modalities text only", RouteChat, `{"modalities":["text"],"messages":[]}`, "", false, chat},
		{"audio output block", RouteChat, `{"audio":{"voice":"alloy","format":"wav"},"messages":[]}`, "", false, chat | audOut},
		{"audio null", RouteChat, `{"audio":null}`, "", false, chat},
		{"type outside the prompt is ignored", RouteChat, `{"response_format":{"type":"image_url"},"messages":[]}`, "", false, chat},
		{"everything", RouteChat, `{"model":"omni","stream":true,"modalities":["audio"],"messages":[{"content":[{"type":"image_url"},{"type":"input_audio"},{"type":"video_url"}]}]}`, "omni", true, chat | stream | img | audIn | vid | audOut},
		{"completions", RouteCompletions, `{"model":"m","prompt":"once upon"}`, "m", false, worker.CapCompletions},
		{"embeddings", RouteEmbeddings, `{"model":"e","input":["a","b"]}`, "e", false, worker.CapEmbeddings},
		{"generate with image_data", RouteGenerate, `{"text":"x","image_data":"b64"}`, "", false, worker.CapCompletions | img},
		{"top-level images", RouteChat, `{"messages":[],"images":["data:x"]}`, "", false, chat | img},
		{"top-level image", RouteChat, `{"image":"data:x","messages":[]}`, "", false, chat | img},
		{"top-level audios", RouteChat, `{"audios":[{"data":"x"}]}`, "", false, chat | audIn},
		{"top-level audio_inputs", RouteChat, `{"audio_inputs":["x"]}`, "", false, chat | audIn},
		{"top-level videos", RouteChat, `{"videos":["u"]}`, "", false, chat | vid},
		{"top-level video", RouteGenerate, `{"text":"x","video":{"url":"u"}}`, "", false, worker.CapCompletions | vid},
		{"empty media fields require nothing", RouteChat, `{"images":[],"image":null,"audios":[ ],"audio_inputs":"","videos":{},"video":false,"image_data":null}`, "", false, chat},
		{"media inside the prompt is not top-level", RouteChat, `{"messages":[{"role":"user","images":["x"],"content":"hi"}]}`, "", false, chat},
		{"speech", RouteSpeech, `{"model":"tts","input":"hello","voice":"v"}`, "tts", false, worker.CapSpeech},
		{"transcriptions without a boundary", RouteTranscriptions, "--boundary\r\nnot json", "", false, audIn},
		{"escaped model", RouteChat, `{"model":"a\u0062c\n"}`, "abc\n", false, chat},
		{"last model wins", RouteChat, `{"model":"a","model":"b"}`, "b", false, chat},
		{"model null", RouteChat, `{"model":"a","model":null}`, "", false, chat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Meta
			if err := Parse(&m, tt.route, []byte(tt.body), Hints{}); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if string(m.Model) != tt.model || m.Stream != tt.stream || m.Caps != tt.caps {
				t.Errorf("got model=%q stream=%v caps=%v, want model=%q stream=%v caps=%v",
					m.Model, m.Stream, m.Caps, tt.model, tt.stream, tt.caps)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	for _, body := range []string{
		``, `   `, `[1]`, `"x"`, `{`, `{"model":}`, `{"model":"m",}`, `{"model":"m"} x`, `{model:"m"}`,
		`{"a":tru}`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"model":5}`, `{"stream":"yes"}`,
		`{"a":[1,]}`, `{"a" 1}`, `{"a":-}`, `{"a":1e}`, `{"a":"\u12"}`,
	} {
		var m Meta
		err := Parse(&m, RouteChat, []byte(body), Hints{})
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", body)
			continue
		}
		if e, ok := err.(*Error); !ok || e.Header != "" || strings.Contains(e.Msg, "\n") {
			t.Errorf("Parse(%q) = %#v, want a one-line *Error about the body", body, err)
		}
	}
}

func TestHints(t *testing.T) {
	tests := []struct {
		name    string
		route   Route
		body    string
		h       Hints
		errHdr  string // header named by the 400, "" for success
		model   string
		stream  bool
		wantCap worker.Capability
	}{
		{"model fills a gap", RouteChat, `{}`, Hints{Model: []byte("m")}, "", "m", false, chat},
		{"model agrees", RouteChat, `{"model":"m"}`, Hints{Model: []byte("m")}, "", "m", false, chat},
		{"model contradicts", RouteChat, `{"model":"m"}`, Hints{Model: []byte("other")}, HeaderModel, "", false, 0},
		{"stream fills a gap", RouteChat, `{}`, Hints{Stream: []byte("true")}, "", "", true, chat | stream},
		{"stream contradicts", RouteChat, `{"stream":false}`, Hints{Stream: []byte("true")}, HeaderStream, "", false, 0},
		{"stream garbage", RouteChat, `{}`, Hints{Stream: []byte("maybe")}, HeaderStream, "", false, 0},
		{"caps add", RouteChat, `{}`, Hints{Capabilities: []byte("image_input, audio_output")}, "", "", false, chat | img | audOut},
		{"caps unknown", RouteChat, `{}`, Hints{Capabilities: []byte("telepathy")}, HeaderCapabilities, "", false, 0},
		{"caps leave out what the body needs", RouteChat, `{"messages":[{"content":[{"type":"image_url"}]}]}`, Hints{Capabilities: []byte("chat")}, HeaderCapabilities, "", false, 0},
		{"multipart routes by hints", RouteTranscriptions, "--b\r\n", Hints{Model: []byte("whisper"), Stream: []byte("1")}, "", "whisper", true, audIn | stream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Meta
			err := Parse(&m, tt.route, []byte(tt.body), tt.h)
			if tt.errHdr != "" {
				e, ok := err.(*Error)
				if !ok || e.Header != tt.errHdr || !strings.Contains(e.Msg, tt.errHdr) {
					t.Fatalf("err = %v, want a 400 naming %s", err, tt.errHdr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Model) != tt.model || m.Stream != tt.stream || m.Caps != tt.wantCap {
				t.Errorf("got model=%q stream=%v caps=%v, want %q %v %v", m.Model, m.Stream, m.Caps, tt.model, tt.stream, tt.wantCap)
			}
		})
	}
}

func TestLargeBodyScansPrefixAndUsesHints(t *testing.T) {
	big := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", ScanLimit) + `"}]}`
	var m Meta
	if err := Parse(&m, RouteChat, []byte(big), Hints{Capabilities: []byte("image_input")}); err != nil {
		t.Fatal(err)
	}
	if !m.Truncated || string(m.Model) != "m" || !m.Stream || m.Caps != chat|stream|img {
		t.Errorf("got %+v", m)
	}
	// A prefix that runs out mid-token is not an error; a contradiction still is.
	if err := Parse(&m, RouteChat, []byte(big), Hints{Model: []byte("n")}); err == nil {
		t.Error("a model hint contradicting the scanned prefix was accepted")
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	body := []byte(`{"model":"llama-3-8b","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"Hello there, how are you?"},{"type":"image_url","image_url":{"url":"http://x"}}]}],"max_tokens":64}`)
	var m Meta
	if a := testing.AllocsPerRun(100, func() { _ = Parse(&m, RouteChat, body, Hints{}) }); a != 0 {
		t.Errorf("Parse allocates %.1f times per call, want 0", a)
	}
}

// FuzzParse checks that Parse never panics, and that on valid JSON objects it agrees with
// encoding/json on model and stream and accepts what encoding/json accepts.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true,"messages":[]}`,
		`{"model":"a\u0062","stream":false}`,
		`{"model":"\ud800x"}`,
		"{\"model\":\"\xff\xfe\"}",
		`{"model":null,"stream":null}`,
		`{"messages":[{"content":[{"type":"image_url"}]}],"modalities":["audio"]}`,
		`{"a":[1,2.5e-3,-0,{"b":{}}],"model":"z"}`,
		`[]`, `{`, `{"model":1}`, ``, `{"mod\u0065l":"k"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var m Meta
		err := Parse(&m, RouteChat, body, Hints{})
		var doc map[string]any
		jerr := json.Unmarshal(body, &doc)
		if jerr != nil || doc == nil {
			if err == nil && json.Valid(body) {
				t.Fatalf("Parse accepted %q, which is valid JSON but not an object", body)
			}
			if err == nil && !json.Valid(body) {
				t.Fatalf("Parse accepted invalid JSON %q", body)
			}
			return
		}
		model, modelOK := doc["model"].(string)
		streamV, streamOK := doc["stream"].(bool)
		badType := (doc["model"] != nil && !modelOK) || (doc["stream"] != nil && !streamOK)
		if badType {
			if err == nil {
				t.Fatalf("Parse accepted a non-string model or non-bool stream in %q", body)
			}
			return
		}
		if err != nil {
			t.Fatalf("Parse(%q) failed on valid JSON: %v", body, err)
		}
		if string(m.Model) != model || m.Stream != (streamOK && streamV) {
			t.Fatalf("Parse(%q): model=%q stream=%v; encoding/json: model=%q stream=%v", body, m.Model, m.Stream, model, streamV)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	small := []byte(`{"model":"llama-3-8b","messages":[{"role":"user","content":"Hello there"}],"stream":true}`)
	b.Run("small-125B", func(b *testing.B) {
		var m Meta
		b.ReportAllocs()
		b.SetBytes(int64(len(small)))
		for b.Loop() {
			_ = Parse(&m, RouteChat, small, Hints{})
		}
	})
	b.Run("encoding-json-125B", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(small)))
		for b.Loop() {
			var v struct {
				Model  string `json:"model"`
				Stream bool   `json:"stream"`
			}
			_ = json.Unmarshal(small, &v)
		}
	})
	large := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 8000) + `"}]}`)
	b.Run("96KiB", func(b *testing.B) {
		var m Meta
		b.ReportAllocs()
		b.SetBytes(int64(len(large)))
		for b.Loop() {
			_ = Parse(&m, RouteChat, large, Hints{})
		}
	})
}

// ParsePrefix reads what the first bytes of a streamed body say, takes the rest from the hints,
// and does not hold the body to what it cannot see.
func TestParsePrefix(t *testing.T) {
	tests := []struct {
		name    string
		prefix  string
		hints   Hints
		model   string
		stream  bool
		caps    worker.Capability
		wantErr string
	}{
		{"cut in a string", `{"model":"m","stream":true,"messages":[{"content":"abc`, Hints{}, "m", true, chat | stream, ""},
		{"cut in the model", `{"model":"mod`, Hints{}, "", false, chat, ""},
		{"cut before anything", `{"messages":[{"content":[{"type":"image_url"},`, Hints{Model: []byte("m2")}, "m2", false, chat | img, ""},
		{"empty prefix, hints", ``, Hints{Model: []byte("m3"), Stream: []byte("true")}, "m3", true, chat | stream, ""},
		{"capabilities hint need not repeat the prefix's", `{"messages":[{"content":[{"type":"image_url"}`, Hints{Capabilities: []byte("chat")}, "", false, chat | img, ""},
		{"cut in a media field", `{"images":["dat`, Hints{}, "", false, chat | img, ""},
		{"cut in an empty media field", `{"image":nu`, Hints{}, "", false, chat, ""},
		{"cut after a media field opens", `{"videos":[ `, Hints{}, "", false, chat, ""},
		// The cut may split a literal: found by FuzzParseWithHints in a clean-clone run.
		{"cut in stream's true", `{"00000":"0","stream":tru`, Hints{}, "", false, chat, ""},
		{"cut in stream's false", `{"model":"m","stream":f`, Hints{}, "m", false, chat, ""},
		{"cut in model's null", `{"model":nu`, Hints{}, "", false, chat, ""},
		{"a word no literal begins with", `{"stream":tx`, Hints{}, "", false, 0, "boolean"},
		{"a model no null begins", `{"model":tr`, Hints{}, "", false, 0, "string"},
		{"cut in any field's literal", `{"temperature":nul`, Hints{}, "", false, chat, ""},
		{"a word no literal begins, in any field", `{"temperature":ab`, Hints{}, "", false, 0, "invalid value"},
		{"hint contradicts the prefix", `{"model":"a","x":"`, Hints{Model: []byte("b")}, "", false, 0, HeaderModel},
		{"invalid JSON before the cut", `{"model":"a",]`, Hints{}, "", false, 0, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Meta
			err := ParsePrefix(&m, RouteChat, []byte(tt.prefix), tt.hints)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Model) != tt.model || m.Stream != tt.stream || m.Caps != tt.caps || !m.Truncated {
				t.Errorf("got model=%q stream=%v caps=%v truncated=%v; want model=%q stream=%v caps=%v",
					m.Model, m.Stream, m.Caps, m.Truncated, tt.model, tt.stream, tt.caps)
			}
		})
	}
}

// FuzzParseWithHints feeds a body, the three hint headers and a route to Parse, and every
// prefix length of the body to ParsePrefix: nothing panics; what is accepted requires the
// route's capability, streaming when it streams, and the model hint as given; a refusal names
// a hint header or none; and a prefix of a body Parse accepts is accepted, agreeing with Parse
// when the prefix is the whole body.
func FuzzParseWithHints(f *testing.F) {
	f.Add([]byte(`{"model":"m","stream":true,"messages":[{"content":[{"type":"image_url"}]}]}`), []byte("m"), []byte("chat,image_input"), []byte("true"), uint8(0), uint16(20))
	f.Add([]byte(`{"model":"a"}`), []byte("b"), []byte(nil), []byte(nil), uint8(1), uint16(5))
	f.Add([]byte(`{"stream":false}`), []byte(nil), []byte("bogus"), []byte("maybe"), uint8(2), uint16(0))
	f.Add([]byte("--x\r\nnot json"), []byte(" whisper "), []byte("audio_input"), []byte("no"), uint8(5), uint16(3))
	f.Fuzz(func(t *testing.T, body, model, caps, stream []byte, route uint8, cut uint16) {
		r := Route(route % uint8(NumRoutes))
		h := Hints{Model: model, Capabilities: caps, Stream: stream}
		var m Meta
		err := Parse(&m, r, body, h)
		checkMeta(t, &m, r, h, err)
		var p Meta
		perr := ParsePrefix(&p, r, body[:int(cut)%(len(body)+1)], h)
		checkMeta(t, &p, r, h, perr)
		if err == nil && len(body) <= ScanLimit {
			var whole, none Meta
			if e := ParsePrefix(&whole, r, body, h); e != nil || string(whole.Model) != string(m.Model) || whole.Stream != m.Stream {
				t.Fatalf("ParsePrefix of the whole body: %q %v %v; Parse: %q %v", whole.Model, whole.Stream, e, m.Model, m.Stream)
			}
			if e := ParsePrefix(&none, r, body[:int(cut)%(len(body)+1)], Hints{}); e != nil {
				t.Fatalf("a prefix of an accepted body is refused: %v", e)
			}
		}
	})
}

func checkMeta(t *testing.T, m *Meta, r Route, h Hints, err error) {
	t.Helper()
	if err != nil {
		e, ok := err.(*Error)
		if !ok || e.Msg == "" || (e.Header != "" && e.Header != HeaderModel && e.Header != HeaderCapabilities && e.Header != HeaderStream) {
			t.Fatalf("refusal %#v", err)
		}
		return
	}
	if !m.Caps.Has(r.Capability()) || (m.Stream && !m.Caps.Has(worker.CapStreaming)) {
		t.Fatalf("route %v, stream %v: caps %v", r, m.Stream, m.Caps)
	}
	if h.Model != nil && string(m.Model) != strings.TrimSpace(string(h.Model)) {
		t.Fatalf("model %q, hint %q", m.Model, h.Model)
	}
}
