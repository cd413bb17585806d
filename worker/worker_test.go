package worker

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCanonicalURL(t *testing.T) {
	tests := []struct {
		name, in  string
		allowPath bool
		want      string
		wantErr   string
	}{
		{name: "default http port", in: "http://Host.Example", want: "http://host.example:80"},
		{name: "default https port", in: "HTTPS://h/", want: "https://h:443"},
		{name: "explicit port kept", in: "http://127.0.0.1:8013", want: "http://127.0.0.1:8013"},
		{name: "trailing slash dropped", in: "http://127.0.0.1:8013/", want: "http://127.0.0.1:8013"},
		{name: "ipv6", in: "http://[::1]:9000", want: "http://[::1]:9000"},
		{name: "grpc needs port", in: "grpc://h", wantErr: "has no port"},
		{name: "grpc", in: "grpc://H:50051", want: "grpc://h:50051"},
		{name: "zmq tcp", in: "tcp://127.0.0.1:5555", want: "tcp://127.0.0.1:5555"},
		{name: "zmq ipc", in: "ipc:///tmp/engine.sock", want: "ipc:///tmp/engine.sock"},
		{name: "path refused", in: "http://h:1/v1", wantErr: "has a path"},
		{name: "external path kept", in: "https://api.openai.com/v1/", allowPath: true, want: "https://api.openai.com:443/v1"},
		{name: "query refused", in: "http://h:1?x=1", wantErr: "query"},
		{name: "no scheme", in: "127.0.0.1:8000", wantErr: "scheme"},
		{name: "bad scheme", in: "ftp://h:1", wantErr: "scheme"},
		{name: "user info", in: "http://u:p@h:1", wantErr: "user info"},
		{name: "empty", in: " ", wantErr: "empty"},
		{name: "bad port", in: "http://h:70000", wantErr: "port"},
		{name: "host of 253 characters", in: "http://" + longHost(253) + ":1", want: "http://" + longHost(253) + ":1"},
		{name: "host of 254 characters", in: "http://" + longHost(254) + ":1", wantErr: "longer than 253"},
		{name: "host of 10000 characters", in: "http://" + strings.Repeat("a", 10000) + ":1", wantErr: "longer than 253"},
		{name: "label of 64 characters", in: "http://" + strings.Repeat("a", 64) + ".example:1", wantErr: "label"},
		{name: "empty label", in: "http://a..example:1", wantErr: "label"},
		{name: "host not valid UTF-8", in: "http://h\xff:1", wantErr: "UTF-8"},
		{name: "host with a sub-delimiter", in: "http://a!b:1", wantErr: "not a DNS name"},
		{name: "ipv6 with zone", in: "http://[fe80::1%25eth0]:1", want: "http://[fe80::1%eth0]:1"},
		{name: "underscore kept", in: "http://engine_1:8000", want: "http://engine_1:8000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalURL(tt.in, tt.allowPath)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CanonicalURL(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("CanonicalURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestUserInfoNotEchoed(t *testing.T) {
	_, err := CanonicalURL("http://user:sekrit@h:1", false)
	if err == nil || strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("error %v must not echo the password", err)
	}
}

func TestIDDeterministic(t *testing.T) {
	a := Spec{URL: "http://LOCALHOST"}
	b := Spec{URL: "http://localhost:80/"}
	for _, s := range []*Spec{&a, &b} {
		if err := s.Normalize(); err != nil {
			t.Fatal(err)
		}
	}
	if a.ID() != b.ID() {
		t.Fatalf("ids differ: %s vs %s", a.ID(), b.ID())
	}
	if id := string(a.ID()); len(id) != 14 || !strings.HasPrefix(id, "w-") {
		t.Fatalf("id %q is not w- plus 12 hex digits", id)
	}
	rank := 3
	a.DPRank = &rank
	if got := string(a.ID()); !strings.HasSuffix(got, "@3") || got[:14] != string(b.ID()) {
		t.Fatalf("ranked id %q", got)
	}
	// The published value for this URL, so that an accidental change of the scheme is caught.
	if got := NewID("http://127.0.0.1:8013", -1); got != "w-7b75e1f00e9c" {
		t.Fatalf("NewID = %s", got)
	}
}

// longHost returns a DNS name of n characters made of labels of at most 63.
func longHost(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strings.Repeat("a", min(63, n-b.Len())))
	}
	return b.String()
}

// Every string field of a spec must be valid UTF-8: records travel in protobuf strings.
func TestNormalizeRefusesInvalidUTF8(t *testing.T) {
	bad := "m\xff"
	tests := []struct {
		field string
		spec  Spec
	}{
		{"url", Spec{URL: "http://h:1/" + bad, ConnectionMode: ModeExternal}},
		{"connection_mode", Spec{URL: "http://h:1", ConnectionMode: bad}},
		{"provider", Spec{URL: "http://h:1", ConnectionMode: ModeExternal, Provider: bad}},
		{"model", Spec{URL: "http://h:1", Model: bad}},
		{"models", Spec{URL: "http://h:1", Models: []string{"a", bad}}},
		{"capabilities", Spec{URL: "http://h:1", Capabilities: []string{bad}}},
		{"labels", Spec{URL: "http://h:1", Labels: map[string]string{"k": bad}}},
		{"labels", Spec{URL: "http://h:1", Labels: map[string]string{bad: "v"}}},
		{"region", Spec{URL: "http://h:1", Region: bad}},
		{"api_key", Spec{URL: "http://h:1", APIKey: bad}},
		{"health.llm_probe_model", Spec{URL: "http://h:1", Health: &Health{LLMProbeModel: &bad}}},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			err := tt.spec.Normalize()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Msg, "UTF-8") {
				t.Fatalf("Normalize: %v; want a UTF-8 error naming %s", err, tt.field)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name      string
		spec      string
		wantField string
		check     func(t *testing.T, s Spec)
	}{
		{name: "mode from scheme", spec: `{"url":"grpc://h:1"}`, check: func(t *testing.T, s Spec) {
			if s.ConnectionMode != ModeGRPC {
				t.Errorf("mode %q", s.ConnectionMode)
			}
		}},
		{name: "ipc is zmq", spec: `{"url":"ipc:///tmp/x"}`, check: func(t *testing.T, s Spec) {
			if s.ConnectionMode != ModeZMQ {
				t.Errorf("mode %q", s.ConnectionMode)
			}
		}},
		{name: "models merged", spec: `{"url":"http://h:1","model":"a","models":["b","a"]}`, check: func(t *testing.T, s Spec) {
			if got := strings.Join(s.Models, ","); got != "a,b" || s.Model != "" {
				t.Errorf("models %q model %q", got, s.Model)
			}
		}},
		{name: "caps default all", spec: `{"url":"http://h:1"}`, check: func(t *testing.T, s Spec) {
			if s.Caps() != CapAll {
				t.Errorf("caps %v", s.Caps())
			}
		}},
		{name: "caps canonical order", spec: `{"url":"http://h:1","capabilities":["Streaming","chat"]}`, check: func(t *testing.T, s Spec) {
			if got := strings.Join(s.Capabilities, ","); got != "chat,streaming" {
				t.Errorf("caps %q", got)
			}
		}},
		{name: "external default provider", spec: `{"url":"https://api.x.com/v1","connection_mode":"external"}`, check: func(t *testing.T, s Spec) {
			if s.Provider != "openai_compatible" || s.URL != "https://api.x.com:443/v1" {
				t.Errorf("provider %q url %q", s.Provider, s.URL)
			}
		}},
		{name: "bad mode", spec: `{"url":"http://h:1","connection_mode":"smoke"}`, wantField: "connection_mode"},
		{name: "scheme mismatch", spec: `{"url":"http://h:1","connection_mode":"grpc"}`, wantField: "url"},
		{name: "path", spec: `{"url":"http://h:1/generate"}`, wantField: "url"},
		{name: "bad provider", spec: `{"url":"https://h","connection_mode":"external","provider":"x"}`, wantField: "provider"},
		{name: "provider on engine", spec: `{"url":"http://h:1","provider":"openai"}`, wantField: "provider"},
		{name: "bad capability", spec: `{"url":"http://h:1","capabilities":["telepathy"]}`, wantField: "capabilities"},
		{name: "negative priority", spec: `{"url":"http://h:1","priority":-1}`, wantField: "priority"},
		{name: "negative cost", spec: `{"url":"http://h:1","cost":-0.5}`, wantField: "cost"},
		{name: "zero failure threshold", spec: `{"url":"http://h:1","health":{"failure_threshold":0}}`, wantField: "health.failure_threshold"},
		{name: "bad status code", spec: `{"url":"http://h:1","resilience":{"capacity_status_codes":[42]}}`, wantField: "resilience.capacity_status_codes"},
		{name: "zero cb timeout", spec: `{"url":"http://h:1","resilience":{"cb_timeout_secs":0}}`, wantField: "resilience.cb_timeout_secs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Spec
			if err := json.Unmarshal([]byte(tt.spec), &s); err != nil {
				t.Fatal(err)
			}
			err := s.Normalize()
			if tt.wantField != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantField {
					t.Fatalf("Normalize() = %v; want a FieldError on %s", err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
			again := s.Clone()
			if err := again.Normalize(); err != nil {
				t.Fatalf("second Normalize: %v", err)
			}
			a, _ := json.Marshal(s)
			b, _ := json.Marshal(again)
			if string(a) != string(b) {
				t.Fatalf("Normalize is not idempotent:\n%s\n%s", a, b)
			}
		})
	}
}

func TestRedactedAndClone(t *testing.T) {
	p := 7
	s := Spec{URL: "http://h:1", APIKey: "sk-secret", Priority: &p, Labels: map[string]string{"a": "b"},
		Health: &Health{FailureThreshold: &p}, Resilience: &Resilience{CapacityStatusCodes: []int{429}}}
	r := s.Redacted()
	if r.APIKey != "" || !s.HasAPIKey() {
		t.Fatal("Redacted kept the key or dropped it from the original")
	}
	*r.Priority = 9
	r.Labels["a"] = "c"
	*r.Health.FailureThreshold = 1
	r.Resilience.CapacityStatusCodes[0] = 503
	if *s.Priority != 7 || s.Labels["a"] != "b" || *s.Health.FailureThreshold != 7 || s.Resilience.CapacityStatusCodes[0] != 429 {
		t.Fatal("Clone shares memory with the original")
	}
}

func TestCapabilities(t *testing.T) {
	c, err := ParseCapabilities([]string{"chat", " STREAMING ", ""})
	if err != nil || c != CapChat|CapStreaming {
		t.Fatalf("ParseCapabilities = %v, %v", c, err)
	}
	if !CapAll.Has(c) || c.Has(CapAll) {
		t.Fatal("Has is wrong")
	}
	if c.String() != "chat,streaming" {
		t.Fatalf("String = %q", c.String())
	}
	if len(CapabilityNames()) != 9 || CapAll.String() != strings.Join(CapabilityNames(), ",") {
		t.Fatal("CapAll does not cover every name")
	}
}

func TestDisplayID(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8013":    "127.0.0.1:8013",
		"ipc:///tmp/e.sock":        "/tmp/e.sock",
		"https://api.x.com:443/v1": "api.x.com:443",
	} {
		if got := DisplayID(in); got != want {
			t.Errorf("DisplayID(%q) = %q; want %q", in, got, want)
		}
	}
}

// A URL refused at registration is named in the error without its user info, query or
// fragment, wherever a credential hides: none of the secrets below may be echoed.
func TestRefusedURLNeverEchoesACredential(t *testing.T) {
	for _, in := range []string{
		"http://h:1?key=SECRET1",
		"http://h?key=SECRET1",
		"HTTP://H:1/?api_key=SECRET1&x=1",
		"http://h:1#SECRET1",
		"http://user:SECRET1@h:1",
		"http://user:SECRET1@h:1?key=SECRET2",
		"http://user:SECRET1@h:1/v1?key=SECRET2",
		"http://h:1/v1?key=SECRET1",
		"http://h:70000?key=SECRET1",
		"ftp://user:SECRET1@h:1?key=SECRET2",
		"grpc://h?key=SECRET1",
		"ipc:///tmp/engine.sock?key=SECRET1",
		"http://user:SECRET1@h:1/%zz?key=SECRET2",
		"http://h:1/%zz?key=SECRET1",
		"127.0.0.1:8000?key=SECRET1",
		"user:SECRET1@127.0.0.1:8000",
		"://user:SECRET1@h?key=SECRET2",
		"http://[::1?key=SECRET1",
		"http://user:SECRET1@",
	} {
		t.Run(in, func(t *testing.T) {
			for _, allowPath := range []bool{false, true} {
				_, err := CanonicalURL(in, allowPath)
				if err == nil {
					t.Fatalf("CanonicalURL(%q, %v) accepted it", in, allowPath)
				}
				if strings.Contains(err.Error(), "SECRET") {
					t.Errorf("CanonicalURL(%q, %v): %v", in, allowPath, err)
				}
				s := Spec{URL: in}
				if err := s.Normalize(); err == nil || strings.Contains(err.Error(), "SECRET") {
					t.Errorf("Normalize(%q): %v", in, err)
				}
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8013":           "http://127.0.0.1:8013",
		"https://api.openai.com:443/v1":   "https://api.openai.com:443/v1",
		"http://h:1?key=x":                "http://h:1?***",
		"http://h:1/v1#frag?x":            "http://h:1/v1#***",
		"http://u:p@h:1/a@b?k=v":          "http://***@h:1/a@b?***",
		"http://u@x:p@h:1":                "http://***@h:1",
		"u:p@h:1":                         "***@h:1",
		"h:1?key=x":                       "h:1?***",
		"ipc:///tmp/s.sock?key=x":         "ipc:///tmp/s.sock?***",
		"":                                "",
		"http://user:pw@[::1]:9?x=1#y":    "http://***@[::1]:9?***",
		"ftp://a:b@c:d@host/path?q#frag":  "ftp://***@host/path?***",
		"not a url at all":                "not a url at all",
		"http://h:1/path/with:colon@sign": "http://h:1/path/with:colon@sign",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
