package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		code      int
		stderr    string // a part of the one stderr line
		sentCalls int
	}{
		{"not found", []string{"workers", "get", "w-000000000000"}, nil, 1,
			"meshctl: 404 worker_not_found: no worker w-000000000000", 1},
		{"refused write", []string{"workers", "enable", "w-000000000000"}, nil, 1,
			"meshctl: 404 worker_not_found:", 1},
		{"no subcommand args", []string{"workers", "get"}, nil, 2, "workers get: accepts 1 arg(s), received 0", 0},
		{"too many args", []string{"workers", "remove", "a", "b"}, nil, 2, "workers remove: accepts 1 arg(s)", 0},
		{"unknown command", []string{"nope"}, nil, 2, `unknown command "nope"`, 0},
		{"peers with an argument", []string{"peers", "gw-1"}, nil, 2, "peers: unknown command \"gw-1\"", 0},
		{"unknown flag", []string{"workers", "list", "--nope"}, nil, 2, "workers list: unknown flag: --nope", 0},
		{"bad output", []string{"-o", "yaml", "raft"}, nil, 2, `-o "yaml": want table, wide or json`, 0},
		{"bad gateway", []string{"--gateway", "ftp://x", "raft"}, nil, 2, `--gateway "ftp://x"`, 0},
		{"bad timeout", []string{"--timeout", "0s", "raft"}, nil, 2, "--timeout 0s", 0},
		{"add without url", []string{"workers", "add"}, nil, 2, "workers add: give the worker's URL or --spec FILE", 0},
		{"add spec and url", []string{"workers", "add", "http://x:1", "--spec", "f.json"}, nil, 2, "not both", 0},
		{"add spec and flag", []string{"workers", "add", "--spec", "f.json", "--priority", "3"}, nil, 2,
			"--priority cannot be combined with --spec", 0},
		{"add missing spec", []string{"workers", "add", "--spec", "/nonexistent/w.json"}, nil, 2, "--spec: open", 0},
		{"add bad label", []string{"workers", "add", "http://x:1", "--label", "nokey"}, nil, 2, `--label "nokey": want KEY=VALUE`, 0},
		{"api key env unset", []string{"workers", "add", "http://x:1", "--api-key-env", "NOPE"}, nil, 2,
			"--api-key-env: $NOPE is not set or empty", 0},
		{"workers alone", []string{"workers"}, nil, 2, "workers: name a subcommand", 0},
		{"transfer without --to", []string{"workers", "transfer", "w-3f1c0a9b2d44"}, nil, 2, "workers transfer: --to NODE is required", 0},
		{"transfer without a worker", []string{"workers", "transfer", "--to", "gw-2"}, nil, 2, "workers transfer: accepts 1 arg(s)", 0},
		{"transfer refused", []string{"workers", "transfer", "w-000000000000", "--to", "gw-9"}, nil, 1,
			"meshctl: 404 peer_not_found: gw-9 is not a peer of this mesh", 1},
		{"drain both", []string{"drain", "gw-1", "--color", "blue"}, nil, 2, "drain: name one gateway or --color COLOR, not both", 0},
		{"drain neither", []string{"drain"}, nil, 2, "drain: name the gateway to drain, or --color COLOR", 0},
		{"drain two peers", []string{"drain", "gw-1", "gw-2"}, nil, 2, "drain: accepts at most 1 arg(s)", 0},
		{"drain refused", []string{"drain", "--color", "green"}, nil, 1, "meshctl: 409 no_peer_left: draining gw-2 would leave", 1},
		{"rebalance with an argument", []string{"rebalance", "now"}, nil, 2, "rebalance: unknown command \"now\"", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t)
			code, stdout, stderr := runCLI(t, srv.URL, tt.env, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			if !strings.Contains(stderr, tt.stderr) || strings.Count(stderr, "\n") != 1 ||
				!strings.HasPrefix(stderr, "meshctl: ") {
				t.Errorf("stderr %q, want one line with %q", stderr, tt.stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if len(f.calls) != tt.sentCalls {
				t.Errorf("%d requests sent, want %d", len(f.calls), tt.sentCalls)
			}
		})
	}
}

// TestAdminKeyNeverPrinted sends the key from the flag and from the environment, on refused
// and failed calls, and checks that it is sent as a bearer token and printed nowhere.
func TestAdminKeyNeverPrinted(t *testing.T) {
	const flagKey = "flag-key-0123456789"
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+flagKey {
			t.Errorf("Authorization %q, want the bearer key", r.Header.Get("Authorization"))
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="meshgw-admin"`)
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error": {"message": "missing or wrong admin key", "code": "unauthorized"}}`))
	})
	srv := httptest.NewServer(refuse)
	defer srv.Close()
	for _, args := range [][]string{
		{"--admin-key", flagKey, "workers", "list"},
		{"--admin-key", flagKey, "workers", "add", "http://127.0.0.1:1", "-o", "json"},
		{"--admin-key", flagKey, "--help"},
		{"--admin-key", flagKey, "--gateway", "http://127.0.0.1:1", "raft"},
	} {
		code, stdout, stderr := runCLI(t, srv.URL, nil, args...)
		if strings.Contains(stdout+stderr, flagKey) || strings.Contains(stdout+stderr, testKey) {
			t.Errorf("%v printed the admin key: %q %q", args, stdout, stderr)
		}
		if args[len(args)-1] == "list" && (code != 1 || !strings.Contains(stderr, "401 unauthorized: missing or wrong admin key")) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and the 401 line", args, code, stderr)
		}
	}
}

func TestUnreachableGateway(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	code, _, stderr := runCLI(t, addr, nil, "workers", "list")
	if code != 1 || !strings.Contains(stderr, "cannot reach the gateway at "+addr) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 1 and one line naming %s", code, stderr, addr)
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	code, _, stderr := runCLI(t, srv.URL, nil, "--timeout", "200ms", "raft")
	if code != 1 || !strings.Contains(stderr, "no answer from the gateway at "+srv.URL+" within 200ms") {
		t.Errorf("exit %d, stderr %q; want 1 and the timeout line", code, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v with --timeout 200ms", d)
	}
}

func TestGatewayFromFlagAndEnv(t *testing.T) {
	f, srv := newFake(t)
	// The environment names a closed port; the flag wins over it.
	env := map[string]string{"MESHCTL_GATEWAY": "http://127.0.0.1:1", "MESHCTL_ADMIN_KEY": ""}
	code, _, stderr := runCLI(t, "", env, "--gateway", srv.URL+"/", "raft")
	if code != 0 || len(f.calls) != 1 || f.calls[0].Auth != "" {
		t.Fatalf("exit %d (%q), calls %+v; want one call without a key", code, stderr, f.calls)
	}
}

func TestHelpHasExamples(t *testing.T) {
	app := &app{getenv: func(string) string { return "" }}
	root := app.rootCommand()
	stack := root.Commands()
	stack = append(stack, root)
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		stack = append(stack, c.Commands()...)
		if c.Name() == "help" {
			continue
		}
		if !c.HasExample() || c.Short == "" {
			t.Errorf("%s: no example or short help", c.CommandPath())
		}
	}
}

// A gateway URL carrying a credential (user info, a query) is never echoed in an error.
func TestGatewayURLNotEchoed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there now
	for _, gw := range []string{"http://user:zzsecretzz@" + closed, "http://" + closed + "?token=zzsecretzz",
		"http://" + closed + "#zzsecretzz", "ftp://user:zzsecretzz@" + closed, "user:zzsecretzz@" + closed} {
		code, stdout, stderr := runCLI(t, gw, nil, "workers", "list")
		if code == 0 || strings.Contains(stdout+stderr, "zzsecretzz") {
			t.Errorf("--gateway %s: exit %d, %q %q", gw, code, stdout, stderr)
		}
	}
}

// TestDrainNotFinished: a drain the gateway answers before it finished (202) prints what is
// left and exits 1 with one line on stderr.
func TestDrainNotFinished(t *testing.T) {
	f, srv := newFake(t)
	f.answers[`POST /mesh/drain {"peer":"gw-3"}`] = canned{202, `{"peers": ["gw-3"], "moved": 2, "stuck": ["w-ipc"], "done": false,
 "states": [{"peer": "gw-3", "status": "alive", "owned": 1, "stuck": 1, "leader": false, "raft": "nonvoter", "done": false}]}`}
	code, stdout, stderr := runCLI(t, srv.URL, nil, "drain", "gw-3")
	if code != 1 || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "the drain did not finish within the gateway's --drain-timeout-secs; it goes on: gw-3: 1 worker (1 host-local), nonvoter, in the mesh") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "not finished: gw-3: 1 worker (1 host-local), nonvoter, in the mesh; moved 2 workers") {
		t.Errorf("stdout %q", stdout)
	}
}

// A weight update's answer carries its report beside the error envelope; meshctl reads the
// envelope into one line (the 503 of an update whose record could not be closed).
func TestRefusalWithAReport(t *testing.T) {
	body := `{"success": false, "id": "wu-4a791a7c250ee6c1", "result": "unresolved", "message": "m",
 "targets": [{"id": "w-fbea9e475487", "url": "http://10.0.0.9:9000", "outcome": "pending"}],
 "fleet_ack": {"index": 9, "acked": ["n1"], "lagging": ["n5"]},
 "error": {"message": "gateways [n5] did not apply the disable of the targets in time; nothing was sent, but closing journal record wu-4a791a7c250ee6c1 as not started failed (no raft leader): the record stays open", "code": "journal_unresolved"}}`
	got := "meshctl: " + oneLine(refusal(503, []byte(body)).Error())
	want := "meshctl: 503 journal_unresolved: gateways [n5] did not apply the disable of the targets in time; nothing was sent, " +
		"but closing journal record wu-4a791a7c250ee6c1 as not started failed (no raft leader): the record stays open"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestRefusalEnvelopes: a refusal whose body is the admin API's error envelope or OpenAI's
// (whose code is a number, or a string beside a type) prints the status, a code and the
// message, never the body's JSON; a body that is no envelope is printed as it came, cut short.
func TestRefusalEnvelopes(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"admin", 404, `{"error": {"message": "no admin route /x", "code": "not_found"}}`,
			"meshctl: 404 not_found: no admin route /x\n"},
		{"OpenAI, a number code", 404, `{"error":{"message":"unknown route","type":"not_found_error","code":404}}`,
			"meshctl: 404 not_found_error: unknown route\n"},
		{"OpenAI, a string code", 503, `{"error": {"message": "the gateway is draining", "type": "service_unavailable", "code": "draining"}}`,
			"meshctl: 503 draining: the gateway is draining\n"},
		{"OpenAI, a null code", 401, `{"error": {"message": "missing bearer key", "type": "authentication_error", "code": null}}`,
			"meshctl: 401 authentication_error: missing bearer key\n"},
		{"an error string", 502, `{"error": "upstream request failed"}`,
			"meshctl: 502 bad_gateway: upstream request failed\n"},
		{"no envelope", 500, `oops`, "meshctl: 500 internal_server_error: oops\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeAdmin{answers: map[string]canned{"GET /mesh/peers": {tt.status, tt.body}}}
			srv := httptest.NewServer(f)
			defer srv.Close()
			code, stdout, stderr := runCLI(t, srv.URL, nil, "peers")
			if code != exitRefused || stdout != "" || stderr != tt.want {
				t.Errorf("exit %d, stdout %q, stderr\n%q\nwant\n%q", code, stdout, stderr, tt.want)
			}
		})
	}
}
