package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWhatSMGAndOmniUsersType: the flags and files of SMG and the SGLang-Omni router users
// parse, or exit 2 with one line saying what is allowed.
func TestWhatSMGAndOmniUsersType(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	omni := file("omni.json", `{"workers": [{"url": "http://127.0.0.1:8013", "capabilities": ["chat", "streaming"]},
		{"url": "http://127.0.0.1:8014"}], "policy": "round_robin"}`)
	list := file("list.json", ` [{"url": "http://127.0.0.1:8013"}]`)
	noWorkers := file("noworkers.json", `{"worker": []}`)
	badType := file("badtype.json", `{"workers": [{"url": "http://127.0.0.1:8013", "priority": "high"}]}`)
	urls := func(want ...string) func(t *testing.T, o *options) {
		return func(t *testing.T, o *options) {
			var got []string
			for _, s := range o.gw.specs {
				got = append(got, s.URL)
			}
			if !slices.Equal(got, want) {
				t.Errorf("workers %q, want %q", got, want)
			}
		}
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // the whole one-line error; "" for success
		check   func(t *testing.T, o *options)
	}{
		// 1. --worker-urls as SMG takes it (argparse nargs="+"), and the other forms.
		{"space separated", []string{"--worker-urls", "http://a:1", "http://b:2", "--policy", "random"}, nil, "",
			urls("http://a:1", "http://b:2")},
		{"space separated last", []string{"--port", "0", "--worker-urls", "http://a:1", "http://b:2", "http://c:3"}, nil, "",
			urls("http://a:1", "http://b:2", "http://c:3")},
		{"space separated after =", []string{"--worker-urls=http://a:1", "http://b:2"}, nil, "", urls("http://a:1", "http://b:2")},
		{"repeated", []string{"--worker-urls", "http://a:1", "--worker-urls", "http://b:2"}, nil, "", urls("http://a:1", "http://b:2")},
		{"comma separated", []string{"--worker-urls", "http://a:1,http://b:2"}, nil, "", urls("http://a:1", "http://b:2")},
		{"all three mixed", []string{"--worker-urls", "http://a:1,http://b:2", "http://c:3", "--worker-urls=http://d:4"}, nil, "",
			urls("http://a:1", "http://b:2", "http://c:3", "http://d:4")},
		{"space separated variable", nil, map[string]string{"MESHGW_WORKER_URLS": "http://a:1 http://b:2"}, "",
			urls("http://a:1", "http://b:2")},
		{"a stray word elsewhere is still refused", []string{"--policy", "random", "serve"}, nil,
			`unexpected argument "serve"; every setting is a --flag`, nil},
		{"a bad URL among several", []string{"--worker-urls", "http://a:1", "http://b:2/v1"}, nil,
			`--worker-urls "http://b:2/v1": `, nil},

		// 2. --worker-config: the Omni router's object and a bare list.
		{"omni worker config", []string{"--worker-config", omni}, nil, "", func(t *testing.T, o *options) {
			urls("http://127.0.0.1:8013", "http://127.0.0.1:8014")(t, o)
			if got := o.gw.specs[0].Capabilities; !slices.Equal(got, []string{"chat", "streaming"}) {
				t.Errorf("capabilities %q", got)
			}
		}},
		{"list worker config", []string{"--worker-config", list}, nil, "", urls("http://127.0.0.1:8013")},
		{"object without workers", []string{"--worker-config", noWorkers}, nil,
			`--worker-config ` + noWorkers + `: the object has no "workers" key; want a JSON list of worker specs or {"workers": [...]}`, nil},
		{"a field of the wrong type", []string{"--worker-config", badType}, nil,
			`--worker-config ` + badType + `: want a JSON list of worker specs or {"workers": [...]}: field workers.priority: a JSON string is not allowed there`, nil},

		// 3. Python's level names and upper case.
		{"log level warning", []string{"--log-level", "warning"}, nil, "", logLevel("warn")},
		{"log level upper case", []string{"--log-level", "WARNING"}, nil, "", logLevel("warn")},
		{"log level DEBUG", nil, map[string]string{"MESHGW_LOG_LEVEL": "DEBUG"}, "", logLevel("debug")},
		{"log level critical", []string{"--log-level", "critical"}, nil, "", logLevel("error")},
		{"log level unknown", []string{"--log-level", "loud"}, nil,
			`--log-level "loud" is not one of debug, info, warn (or warning), error (or critical), in any case`, nil},

		// 5. The two names of one switch, given opposite values.
		{"aliases agree", []string{"--worker-auto-recovery", "--remove-unhealthy-workers=true"}, nil, "", func(t *testing.T, o *options) {
			if !o.health.cfg.RemoveUnhealthyWorkers {
				t.Error("not on")
			}
		}},
		{"aliases contradict", []string{"--worker-auto-recovery=false", "--remove-unhealthy-workers"}, nil,
			"--remove-unhealthy-workers=true and --worker-auto-recovery=false contradict each other (one is an alias of the other); give one of them", nil},
		{"aliases contradict the other way", []string{"--remove-unhealthy-workers=false", "--worker-auto-recovery=true"}, nil,
			"--worker-auto-recovery=true and --remove-unhealthy-workers=false contradict each other (one is an alias of the other); give one of them", nil},
		{"one name repeated: the last wins", []string{"--worker-auto-recovery=false", "--worker-auto-recovery"}, nil, "", func(t *testing.T, o *options) {
			if !o.health.cfg.RemoveUnhealthyWorkers {
				t.Error("not on")
			}
		}},

		// 6. Type errors say what is allowed.
		{"int", []string{"--port", "abc"}, nil, `--port "abc" is not a whole number`, nil},
		{"int out of range", []string{"--max-payload-size", "99999999999999999999"}, nil, `--max-payload-size "99999999999999999999" is out of range for a whole number`, nil},
		{"float", []string{"--retry-jitter-factor", "x"}, nil, `--retry-jitter-factor "x" is not a number`, nil},
		{"bool", []string{"--disable-retries=maybe"}, nil, `--disable-retries "maybe" is not true or false`, nil},
		{"linked bool", []string{"--worker-auto-recovery=maybe"}, nil, `--worker-auto-recovery "maybe" is not true or false`, nil},
		{"variable", nil, map[string]string{"MESHGW_PORT": "abc"}, `$MESHGW_PORT: --port "abc" is not a whole number`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, tt.env)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				tt.check(t, o)
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v\nwant one line starting %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "strconv.") {
				t.Errorf("error %v names Go internals", err)
			}
		})
	}
}

func logLevel(want string) func(t *testing.T, o *options) {
	return func(t *testing.T, o *options) {
		if o.observe.logLevel != want {
			t.Errorf("log level %q, want %q", o.observe.logLevel, want)
		}
	}
}

// TestContradictingAliasesExitTwo: the whole command refuses the contradiction in one line.
func TestContradictingAliasesExitTwo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"--worker-auto-recovery=false", "--remove-unhealthy-workers"}, env(nil), &stdout, &stderr)
	if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "contradict") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestVersionFlag: --version prints one line (version, commit, Go version) and exits 0, before
// any other flag is judged; no variable turns it on.
func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"--version", "--port", "70000"}, env(nil), &stdout, &stderr)
	if code != 0 || !strings.HasPrefix(stdout.String(), "meshgw dev (commit ") || !strings.Contains(stdout.String(), ", go1.") ||
		strings.Count(stdout.String(), "\n") != 1 || stderr.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if _, err := parse(nil, map[string]string{"MESHGW_VERSION": "1.2.3"}); err != nil {
		t.Errorf("$MESHGW_VERSION is read: %v", err)
	}
}
