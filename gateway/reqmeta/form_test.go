package reqmeta

import (
	"bytes"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/worker"
)

// form joins parts into a multipart body with boundary "b0undary".
func form(parts ...string) string {
	var s strings.Builder
	for _, p := range parts {
		s.WriteString("--b0undary\r\n" + p + "\r\n")
	}
	s.WriteString("--b0undary--\r\n")
	return s.String()
}

func field(name, value string) string {
	return "Content-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value
}

const wav = "Content-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n" +
	"RIFF\r\n--b0undar\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nfrom-the-file--b0undary--\r\n"

func TestFormFields(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		model     string
		modelSet  bool
		stream    bool
		truncated bool
		wantErr   string
	}{
		{"fields then file", form(field("model", "asr-2"), field("stream", "true"), wav), "asr-2", true, true, false, ""},
		{"file then fields", form(wav, field("language", "en"), field("model", "asr-2")), "asr-2", true, false, false, ""},
		{"no routing field", form(wav, field("language", "en")), "", false, false, false, ""},
		{"last model wins", form(field("model", "a"), field("model", "b")), "b", true, false, false, ""},
		{"a file named model is a file", form("Content-Disposition: form-data; name=\"model\"; filename=\"m\"\r\n\r\nx"), "", false, false, false, ""},
		{"filename* makes a file", form("Content-Disposition: form-data; name=model; filename*=UTF-8''m\r\n\r\nx"), "", false, false, false, ""},
		{"unquoted name", form("Content-Disposition: form-data; name=model\r\n\r\nm1"), "m1", true, false, false, ""},
		{"escaped name", form("Content-Disposition: form-data; name=\"mod\\el\"\r\n\r\nm1"), "m1", true, false, false, ""},
		{"case of header and parameter", form("content-disposition: form-data; NAME=\"stream\"\r\n\r\nTrue"), "", false, true, false, ""},
		{"a ';' inside a quoted name", form("Content-Disposition: form-data; name=\"a;name=model\"\r\n\r\nx", field("model", "m")), "m", true, false, false, ""},
		{"other headers", form("Content-Type: text/plain\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm"), "m", true, false, false, ""},
		{"preamble and padding", "preamble\r\n--b0undary \t\r\n" + field("model", "m") + "\r\n--b0undary--", "m", true, false, false, ""},
		{"empty model", form(field("model", "")), "", true, false, false, ""},
		{"model with line breaks", form(field("model", "a\r\nb")), "a\r\nb", true, false, false, ""},
		{"no closing delimiter", "--b0undary\r\n" + field("model", "m") + "\r\n", "", false, false, true, ""},
		{"cut after a field", "--b0undary\r\n" + field("model", "m") + "\r\n--b0undary\r\n" + wav, "m", true, false, true, ""},
		{"no first delimiter", "garbage", "", false, false, true, ""},
		{"LF line breaks are not read", strings.ReplaceAll(form(field("model", "m")), "\r\n", "\n"), "", false, false, true, ""},
		{"delimiter followed by junk", "--b0undaryjunk\r\n" + field("model", "m") + "\r\n--b0undary--", "", false, false, true, ""},
		{"header block over the bound", form("X-Pad: " + strings.Repeat("p", MaxFormHeader) + "\r\n" + field("model", "m")), "", false, false, true, ""},
		{"model over the bound", form(field("model", strings.Repeat("m", MaxFormField+1))), "", false, false, false, `"model" is longer`},
		{"stream not a boolean", form(field("stream", "sometimes")), "", false, false, false, `"stream" is not true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Meta
			err := Parse(&m, RouteTranscriptions, []byte(tt.body), Hints{Boundary: []byte("b0undary")})
			if tt.wantErr != "" {
				if e, ok := err.(*Error); !ok || e.Header != "" || !strings.Contains(e.Msg, tt.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			caps := audIn
			if tt.stream {
				caps |= stream
			}
			if string(m.Model) != tt.model || m.ModelSet != tt.modelSet || m.Stream != tt.stream || m.Truncated != tt.truncated || m.Caps != caps {
				t.Errorf("got model=%q set=%v stream=%v truncated=%v caps=%v; want %q %v %v %v %v",
					m.Model, m.ModelSet, m.Stream, m.Truncated, m.Caps, tt.model, tt.modelSet, tt.stream, tt.truncated, caps)
			}
			if m.UnreadModel != (tt.truncated && !tt.modelSet) {
				t.Errorf("UnreadModel %v", m.UnreadModel)
			}
		})
	}
}

func TestFormFieldsAndHints(t *testing.T) {
	body := []byte(form(wav, field("model", "asr-2"), field("stream", "false")))
	h := Hints{Boundary: []byte("b0undary")}
	var m Meta
	for _, tt := range []struct {
		name   string
		model  string
		stream string
		header string
	}{
		{"model disagrees", "asr-1", "", HeaderModel},
		{"stream disagrees", "", "true", HeaderStream},
		{"both agree", "asr-2", "false", ""},
	} {
		h.Model, h.Stream = nil, nil
		if tt.model != "" {
			h.Model = []byte(tt.model)
		}
		if tt.stream != "" {
			h.Stream = []byte(tt.stream)
		}
		err := Parse(&m, RouteTranslations, body, h)
		if tt.header == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if e, ok := err.(*Error); !ok || e.Header != tt.header {
			t.Errorf("%s: err %v, want a 400 naming %s", tt.name, err, tt.header)
		}
	}
}

// A truncated read leaves unread what it did not see and no hint supplied.
func TestUnread(t *testing.T) {
	big := strings.Repeat("x", ScanLimit)
	tests := []struct {
		name   string
		route  Route
		body   string
		h      Hints
		model  bool
		caps   worker.Capability
		prefix bool
	}{
		{"whole small body", RouteChat, `{"messages":[]}`, Hints{}, false, 0, false},
		{"model beyond the limit", RouteChat, `{"messages":[{"content":"` + big + `"}],"model":"m"}`, Hints{}, true, stream | img | audIn | vid | audOut, false},
		{"model and stream within it", RouteChat, `{"model":"m","stream":false,"messages":[{"content":"` + big + `"}]}`, Hints{}, false, img | audIn | vid | audOut, false},
		{"media seen within it", RouteChat, `{"model":null,"images":["x"],"messages":[{"content":"` + big + `"}]}`, Hints{}, false, stream | audIn | vid | audOut, false},
		{"hints supply it", RouteChat, `{"messages":[{"content":"` + big + `"}]}`, Hints{Model: []byte("m"), Capabilities: []byte("")}, false, 0, false},
		{"stream hint", RouteChat, `{"messages":[{"content":"` + big + `"}]}`, Hints{Stream: []byte("true")}, true, img | audIn | vid | audOut, false},
		{"streamed prefix", RouteCompletions, `{"prompt":"abc`, Hints{}, true, stream | img | audIn | vid | audOut, true},
		{"form without a boundary", RouteTranscriptions, "anything", Hints{}, true, stream, false},
		{"form read whole", RouteTranscriptions, form(field("language", "en")), Hints{Boundary: []byte("b0undary")}, false, 0, false},
		{"form cut", RouteTranscriptions, "--b0undary\r\n" + field("stream", "1") + "\r\n--b0undary\r\n" + wav, Hints{Boundary: []byte("b0undary")}, true, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Meta
			parse := Parse
			if tt.prefix {
				parse = ParsePrefix
			}
			if err := parse(&m, tt.route, []byte(tt.body), tt.h); err != nil {
				t.Fatal(err)
			}
			if m.UnreadModel != tt.model || m.UnreadCaps != tt.caps {
				t.Errorf("UnreadModel %v, UnreadCaps %v; want %v, %v", m.UnreadModel, m.UnreadCaps, tt.model, tt.caps)
			}
		})
	}
}

func TestParseFormDoesNotAllocate(t *testing.T) {
	body := []byte(form(wav, field("model", "asr-2"), field("language", "en")))
	h := Hints{Boundary: []byte("b0undary")}
	var m Meta
	if a := testing.AllocsPerRun(100, func() { _ = Parse(&m, RouteTranscriptions, body, h) }); a != 0 {
		t.Errorf("Parse of a form allocates %.1f times per call, want 0", a)
	}
}

// FuzzParseForm feeds the form reader raw bodies and boundaries, and forms that
// mime/multipart's writer made from the fuzzed fields and file: nothing panics, a refusal is one
// of the form's own, every prefix of a body is read without a refusal the whole body does not
// make, and from a well-formed form the reader gets exactly the model and stream fields written,
// wherever the file lies and whatever it holds.
func FuzzParseForm(f *testing.F) {
	f.Add([]byte(form(wav, field("model", "asr-2"))), "b0undary", "asr-1", true, true, []byte("RIFF\r\n--"), uint16(40))
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--x--"), "x", "", false, false, []byte{}, uint16(7))
	f.Add([]byte("--b\r\n\r\n\r\n--b\r\n"), "b", "m\"odel", false, true, []byte("\r\n--b--"), uint16(0))
	f.Fuzz(func(t *testing.T, body []byte, boundary, model string, streamed, fileFirst bool, file []byte, cut uint16) {
		h := Hints{Boundary: []byte(boundary)}
		var m, p Meta
		err := Parse(&m, RouteTranscriptions, body, h)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Header != "" || !strings.HasPrefix(e.Msg, "form field ") {
				t.Fatalf("refusal %#v", err)
			}
		}
		perr := ParsePrefix(&p, RouteTranscriptions, body[:int(cut)%(len(body)+1)], h)
		if perr != nil && err == nil {
			t.Fatalf("a prefix is refused (%v) where the whole body is not", perr)
		}
		if !m.Caps.Has(audIn) || m.Stream != m.Caps.Has(stream) {
			t.Fatalf("caps %v, stream %v", m.Caps, m.Stream)
		}

		// A form made by mime/multipart's writer.
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		if mw.SetBoundary(boundary) != nil {
			return
		}
		delim := "\r\n--" + boundary
		if strings.Contains(model, delim) || bytes.Contains(file, []byte(delim)) {
			return // the content holds the delimiter: no form can carry it
		}
		writeFile := func() {
			fw, err := mw.CreateFormFile("model", "a.wav") // a file named model is still a file
			if err != nil {
				t.Fatal(err)
			}
			_, _ = fw.Write(file)
		}
		if fileFirst {
			writeFile()
		}
		_ = mw.WriteField("model", model)
		_ = mw.WriteField("stream", map[bool]string{true: "true", false: "false"}[streamed])
		if !fileFirst {
			writeFile()
		}
		if mw.Close() != nil {
			return
		}
		err = Parse(&m, RouteTranscriptions, buf.Bytes(), h)
		if len(model) > MaxFormField {
			if err == nil {
				t.Fatalf("a model of %d bytes was accepted", len(model))
			}
			return
		}
		if err != nil || m.Truncated || string(m.Model) != model || !m.ModelSet || m.Stream != streamed || !m.StreamSet {
			t.Fatalf("form %q: err %v, model %q (set %v), stream %v, truncated %v; wrote model %q, stream %v",
				buf.Bytes(), err, m.Model, m.ModelSet, m.Stream, m.Truncated, model, streamed)
		}
	})
}

func BenchmarkParseForm(b *testing.B) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "a.wav")
	audio := make([]byte, 1<<20)
	for i := range audio {
		audio[i] = byte(i * 7919 >> 3)
	}
	_, _ = fw.Write(audio)
	_ = mw.WriteField("model", "whisper-large-v3")
	_ = mw.Close()
	body, h := buf.Bytes(), Hints{Boundary: []byte(mw.Boundary())}
	var m Meta
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		_ = Parse(&m, RouteTranscriptions, body, h)
	}
}
