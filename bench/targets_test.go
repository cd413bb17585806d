package bench

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHAProxyConfig(t *testing.T) {
	cfg := HAProxyConfig(8123, []string{"127.0.0.1:1001", "127.0.0.1:1002"})
	for _, want := range []string{"nbthread 2", "mode http", "http-reuse always", "option http-keep-alive",
		"option http-no-delay", "bind 127.0.0.1:8123", "balance roundrobin",
		"server engine1 127.0.0.1:1001\n", "server engine2 127.0.0.1:1002\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	for _, line := range strings.Split(cfg, "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "log" || f[0] == "option" && slices.Contains(f, "httplog")) {
			t.Errorf("config logs: %q", line)
		}
	}
}

func TestMeshgwArgs(t *testing.T) {
	base := []string{"--host", "127.0.0.1", "--port", "9000", "--worker-urls", "http://127.0.0.1:1,http://127.0.0.1:2"}
	next := 40000
	free := func() int { next++; return next }
	tests := []struct {
		name    string
		help    string
		metrics int
		pprof   bool
		reqLog  string
		want    []string
	}{
		{name: "request log at its default, at INFO", help: "--log-level string\n--request-log\n",
			want: append(slices.Clone(base), "--log-level", "info")},
		{name: "request log forced on", help: "--log-level string\n--request-log\n", reqLog: "on",
			want: append(slices.Clone(base), "--log-level", "info", "--request-log=true")},
		{name: "request log forced off", help: "--log-level string\n--request-log\n", reqLog: "off",
			want: append(slices.Clone(base), "--log-level", "info", "--request-log=false")},
		{name: "today's flags", help: "  --host string\n  --port int\n  --worker-urls strings\n  --policy string\n  --prometheus-port int\n  --log-level string\n",
			metrics: 9100, want: append(slices.Clone(base), "--policy", "round_robin", "--log-level", "warn", "--prometheus-port", "9100")},
		{name: "metrics off", help: "--prometheus-port int\n--prometheus-host string", metrics: 0,
			want: append(slices.Clone(base), "--prometheus-port", "0")},
		{name: "ephemeral wins over a state dir", help: "--state-dir DIR\n--ephemeral\n",
			want: append(slices.Clone(base), "--ephemeral")},
		{name: "state dir when no ephemeral", help: "      --state-dir string   where raft keeps its data\n",
			want: append(slices.Clone(base), "--state-dir", "/tmp/x/state")},
		{name: "mesh listeners on picked loopback ports", help: "--mesh-port int, --raft-port int, --rpc-port int, --mesh-advertise-host string",
			want: append(slices.Clone(base), "--mesh-port", "40001", "--raft-port", "40002", "--rpc-port", "40003", "--mesh-advertise-host", "127.0.0.1")},
		{name: "no help at all", help: "", want: base},
		{name: "pprof on the metrics listener", help: "--prometheus-port int\n--enable-pprof\n", metrics: 9100, pprof: true,
			want: append(slices.Clone(base), "--prometheus-port", "9100", "--enable-pprof")},
		{name: "no pprof without a metrics listener", help: "--prometheus-port int\n--enable-pprof\n", pprof: true,
			want: append(slices.Clone(base), "--prometheus-port", "0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next = 40000
			got := MeshgwArgs(HelpFlags(tt.help), MeshgwOptions{Port: 9000, MetricsPort: tt.metrics, Pprof: tt.pprof, RequestLog: tt.reqLog, StateDir: "/tmp/x/state",
				Workers: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}, FreePort: free})
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("MeshgwArgs (-want +got):\n%s", d)
			}
		})
	}
}

func TestHelpFlags(t *testing.T) {
	got := HelpFlags("Usage:\n  meshgw [flags]\n\nFlags:\n      --host string   listen (default \"0.0.0.0\")\n  -h, --help\n  --worker-urls strings\nsee https://x/--not-a-flag and a--b")
	want := map[string]bool{"host": true, "help": true, "worker-urls": true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("HelpFlags (-want +got):\n%s", d)
	}
}

func TestParsePprofTop(t *testing.T) {
	out := `File: meshgw
Build ID: 123
Type: cpu
Time: 2026-12-01 03:06:48 UTC
Duration: 8s, Total samples = 6.53s (81.59%)
Showing nodes accounting for 5.63s, 86.22% of 6.53s total
Dropped 121 nodes (cum <= 0.03s)
Showing top 2 nodes out of 137
      flat  flat%   sum%        cum   cum%
     4.02s 61.56% 61.56%      4.02s 61.56%  internal/runtime/syscall/linux.Syscall6
     0.20s  3.06% 64.62%      0.20s  3.06%  runtime.memmove
`
	want := []string{"Duration: 8s, Total samples = 6.53s (81.59%)", "Showing nodes accounting for 5.63s, 86.22% of 6.53s total",
		"Showing top 2 nodes out of 137", "      flat  flat%   sum%        cum   cum%",
		"     4.02s 61.56% 61.56%      4.02s 61.56%  internal/runtime/syscall/linux.Syscall6",
		"     0.20s  3.06% 64.62%      0.20s  3.06%  runtime.memmove"}
	if d := cmp.Diff(want, parsePprofTop(out)); d != "" {
		t.Errorf("parsePprofTop (-want +got):\n%s", d)
	}
}

// TestFreePortIsBelowTheEphemeralRange: the harness's ports come from below the kernel's
// ephemeral range, where no outgoing connection or listener on port 0 can take one before the
// process it is meant for binds it (a routing row lost a gateway to "address already in use").
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no ephemeral port range to read:", err)
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for range 50 {
		p, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if p >= low && p <= high {
			t.Fatalf("freePort gave %d, inside the ephemeral range %d-%d", p, low, high)
		}
		if seen[p] {
			t.Fatalf("freePort gave %d twice", p)
		}
		seen[p] = true
	}
}
