package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/zmqlink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startLine is what harnesses parse; keep this expression in step with the docs.
var startLine = regexp.MustCompile(`^fakeworker listening on (\S+) \(mode (\w+), model (\S+), node (\S+), control (\S+)\)\n$`)

func TestBadFlagsExit2WithOneLine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"mode", []string{"--mode", "udp"}, `invalid value "udp" for flag --mode: want http, grpc or zmq`},
		{"port range", []string{"--port", "70000"}, "invalid value 70000 for flag --port: want 0-65535"},
		{"port syntax", []string{"--port", "x"}, `--port "x" is not a whole number`},
		{"cache blocks syntax", []string{"--cache-blocks", "abc"}, `--cache-blocks "abc" is not a whole number`},
		{"cache blocks range", []string{"--cache-blocks", "99999999999999999999"}, `--cache-blocks "99999999999999999999" is out of range for a whole number`},
		{"seed syntax", []string{"--seed", "-1"}, `--seed "-1" is not a whole number`},
		{"prefill syntax", []string{"--prefill-us-per-token", "fast"}, `--prefill-us-per-token "fast" is not a number`},
		{"heartbeat syntax", []string{"--heartbeat-interval", "5"}, `--heartbeat-interval "5" is not a duration such as 500ms or 2s`},
		{"cache answers syntax", []string{"--cache-answers=maybe"}, `--cache-answers "maybe" is not true or false`},
		{"unknown flag", []string{"--colour", "red"}, "unknown flag: --colour"},
		{"listen outside zmq", []string{"--listen", "tcp://127.0.0.1:1"}, "flag --listen applies only to --mode zmq"},
		{"listen scheme", []string{"--mode", "zmq", "--listen", "udp://x"}, `invalid value "udp://x" for flag --listen: want tcp://HOST:PORT or ipc:///PATH`},
		{"heartbeat", []string{"--heartbeat-interval", "0s"}, "invalid value 0s for flag --heartbeat-interval: must be > 0"},
		{"faults", []string{"--faults", `{"hang":1}`}, "invalid value for flag --faults: hang: want bool, got number"},
		{"log level", []string{"--log-level", "loud"}, `invalid value "loud" for flag --log-level: want debug, info, warn or error`},
		{"argument", []string{"extra"}, `unexpected argument "extra"; fakeworker takes only flags`},
		{"cache blocks", []string{"--cache-blocks", "-1"}, "invalid value -1 for flag --cache-blocks: must be >= 0"},
		{"block size", []string{"--cache-block-chars", "0"}, "invalid value 0 for flag --cache-block-chars: must be >= 1"},
		{"prefill", []string{"--prefill-us-per-token", "-1"}, "invalid value -1 for flag --prefill-us-per-token: want 0-1000000"},
		{"decode", []string{"--decode-us-per-token", "NaN"}, "invalid value NaN for flag --decode-us-per-token: want 0-1000000"},
		{"slots", []string{"--slots", "-2"}, "invalid value -2 for flag --slots: must be >= 0"},
		{"prefill lanes", []string{"--prefill-lanes", "-1"}, "invalid value -1 for flag --prefill-lanes: must be >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if got := stderr.String(); got != "fakeworker: "+tt.want+"\n" {
				t.Errorf("stderr %q, want the one line %q", got, "fakeworker: "+tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

func TestHelpDescribesEveryFlag(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help exit %d, want 0", code)
	}
	for _, flag := range []string{"host", "port", "mode", "model", "node-name", "control-port", "listen",
		"heartbeat-interval", "max-concurrent-requests", "seed", "faults", "log-level",
		"cache-blocks", "cache-block-chars", "prefill-us-per-token", "decode-us-per-token", "slots", "prefill-lanes", "cache-answers", "any-model"} {
		if !strings.Contains(stdout.String(), "  --"+flag+" ") {
			t.Errorf("--help does not describe --%s:\n%s", flag, stdout.String())
		}
	}
}

// An engine serving --model answers 404, as vLLM does, to a request naming another model, and
// serves a request naming its model or none; --any-model serves any name.
func TestOtherModelIs404(t *testing.T) {
	const notFound = `{"error":{"message":"The model ` + "`gpt-4o`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`
	tests := []struct {
		name       string
		flags      []string
		model      string // "" sends no model
		wantStatus int
		wantBody   string // "" checks only the status
	}{
		{"another model", nil, "gpt-4o", 404, notFound},
		{"its model", nil, "m1", 200, ""},
		{"no model", nil, "", 200, ""},
		{"another model with --any-model", []string{"--any-model"}, "gpt-4o", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line, stop := startRun(t, append([]string{"--model", "m1"}, tt.flags...)...)
			defer stop()
			m := startLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("start line %q does not parse", line)
			}
			body := `{"messages":[{"role":"user","content":"hi"}]}`
			if tt.model != "" {
				body = `{"model":"` + tt.model + `",` + body[1:]
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Post(m[1]+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || tt.wantBody != "" && string(got) != tt.wantBody {
				t.Errorf("answer %d %s, want %d %s", resp.StatusCode, got, tt.wantStatus, tt.wantBody)
			}
			if tt.wantStatus == 200 && !strings.Contains(string(got), `"model":"m1"`) {
				t.Errorf("answer %s does not name the served model m1", got)
			}
		})
	}
}

// startRun runs the command in-process until its start line; stop ends it as a signal would and
// returns the exit status.
func startRun(t *testing.T, args ...string) (line string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr) //nolint:errcheck // drain until run returns
	if err != nil {
		cancel()
		t.Fatalf("no start line: %v (exit %d)", err, <-code)
	}
	return line, func() int { cancel(); return <-code }
}

func TestHTTPModeStartLineAndControl(t *testing.T) {
	line, stop := startRun(t, "--port", "0", "--model", "m-x", "--node-name", "n-1")
	m := startLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("start line %q does not parse", line)
	}
	url, mode, model, node, control := m[1], m[2], m[3], m[4], m[5]
	if !strings.HasPrefix(url, "http://127.0.0.1:") || mode != "http" || model != "m-x" || node != "n-1" || control != url {
		t.Errorf("start line %q", line)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(control + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /_stats: %d", resp.StatusCode)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit %d after the signal context ended, want 0", code)
	}
	if _, err := client.Get(control + "/_stats"); err == nil {
		t.Error("the listener is still open after exit")
	}
}

// TestComputeFlags: the flags reach the engine; a repeated prompt is answered from its cache,
// and with --cache-answers the cache keeps each answer after its prompt.
func TestComputeFlags(t *testing.T) {
	// The prompt and its answer ("fake answer from fake-PORT to: " and 40 bytes of the prompt)
	// are 3 full blocks; the prompt alone, 2.
	for _, c := range []struct {
		flags  []string
		blocks int
	}{{nil, 2}, {[]string{"--cache-answers"}, 3}} {
		t.Run(fmt.Sprint(c.flags), func(t *testing.T) { testComputeFlags(t, c.flags, c.blocks) })
	}
}

func testComputeFlags(t *testing.T, flags []string, wantBlocks int) {
	args := append([]string{"--cache-blocks", "16", "--slots", "2", "--prefill-us-per-token", "0.5", "--decode-us-per-token", "1"}, flags...)
	line, stop := startRun(t, args...)
	defer stop()
	m := startLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("start line %q does not parse", line)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	body := `{"prompt":"` + strings.Repeat("x", 130) + `"}` // 33 tokens, 2 full blocks
	var cached []int
	for range 2 {
		resp, err := client.Post(m[1]+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || a.Usage.PromptTokens != 33 {
			t.Fatalf("answer: %+v, %v; want 33 prompt tokens", a, err)
		}
		cached = append(cached, a.Usage.PromptTokensDetails.CachedTokens)
	}
	if cached[0] != 0 || cached[1] != 32 {
		t.Errorf("cached tokens %v, want [0 32]", cached)
	}
	resp, err := client.Get(m[5] + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		PromptTokens int `json:"prompt_tokens"`
		CachedTokens int `json:"cached_tokens"`
		CacheBlocks  int `json:"cache_blocks"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.PromptTokens != 66 || st.CachedTokens != 32 || st.CacheBlocks != wantBlocks {
		t.Errorf("GET /_stats: %+v, %v; want 66 prompt tokens, 32 cached, %d blocks", st, err, wantBlocks)
	}
}

func TestDefaultNodeNameFromPort(t *testing.T) {
	line, stop := startRun(t)
	defer stop()
	m := startLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("start line %q does not parse", line)
	}
	port := m[1][strings.LastIndex(m[1], ":")+1:]
	if m[4] != "fake-"+port {
		t.Errorf("node %q, want fake-%s", m[4], port)
	}
}

// TestSIGTERMExitsZero runs the real binary, as harnesses do.
func TestSIGTERMExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "fakeworker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "--port", "0")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = io.Discard
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			var waitErr error
			exited := make(chan struct{})
			go func() { waitErr = cmd.Wait(); close(exited) }()
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
			if err != nil || !startLine.MatchString(line) {
				t.Fatalf("start line %q: %v", line, err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
				if waitErr != nil {
					t.Errorf("exit after %v: %v, want status 0", sig, waitErr)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("still running 20s after %v", sig)
			}
		})
	}
}

func TestGRPCModeServesControlOnTheSamePort(t *testing.T) {
	line, stop := startRun(t, "--mode", "grpc")
	defer stop()
	m := startLine.FindStringSubmatch(line)
	if m == nil || m[2] != "grpc" {
		t.Fatalf("start line %q", line)
	}
	hostPort := strings.TrimPrefix(m[1], "grpc://")
	if m[5] != "http://"+hostPort {
		t.Errorf("control %q, want http://%s", m[5], hostPort)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(m[5]+"/_fault", "application/json", strings.NewReader(`{"latency_ms":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("POST /_fault: %d", resp.StatusCode)
	}
}

func TestZMQModeOnIPCWithControlPort(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fw.sock")
	line, stop := startRun(t, "--mode", "zmq", "--listen", "ipc://"+sock, "--heartbeat-interval", "20ms")
	defer stop()
	m := startLine.FindStringSubmatch(line)
	if m == nil || m[1] != "ipc://"+sock || m[2] != "zmq" || !strings.HasPrefix(m[5], "http://127.0.0.1:") {
		t.Fatalf("start line %q", line)
	}
	if port := m[5][strings.LastIndex(m[5], ":")+1:]; m[4] != "fake-"+port {
		t.Errorf("node %q, want fake-%s (the control port names an ipc engine)", m[4], port)
	}
	link, err := zmqlink.Dial(m[1], "gw-t", zmqlink.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	deadline := time.Now().Add(10 * time.Second)
	for link.Check(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no handshake: %v", link.Check(context.Background()))
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
	if info := link.Info(); info.HeartbeatIntervalMS != 20 {
		t.Errorf("WELCOME %+v, want a 20 ms heartbeat", info)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(m[5] + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `"by_gateway":{"gw-t":{"requests":0,"probes":1}}`; !strings.Contains(string(body), want) {
		t.Errorf("GET /_stats = %s, want it to contain %s", body, want)
	}
}
