package bench

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseWrk(t *testing.T) {
	direct := readTestdata(t, "wrk-direct.txt")
	// Without the Lua check line, the rounded percentiles of the distribution are used.
	plain := strings.Join(slicesFilter(strings.Split(direct, "\n"), func(l string) bool {
		return !strings.HasPrefix(l, "BENCH_CHECK")
	}), "\n")
	tests := []struct {
		name    string
		out     string
		want    WrkResult
		wantErr string
	}{
		{name: "captured run with check", out: direct, want: WrkResult{Requests: 138555, DurationS: 2.01, RPS: 68831.75,
			P50Ms: 0.534, P99Ms: 7.747, MeanMs: 1.2192, Checked: 138555, CheckLoaded: true}},
		{name: "without check line", out: plain, want: WrkResult{Requests: 138555, DurationS: 2.01, RPS: 68831.75,
			P50Ms: 0.534, P99Ms: 7.75}},
		{name: "every answer a 404", out: readTestdata(t, "wrk-404.txt"), want: WrkResult{Requests: 143156, DurationS: 2.02,
			RPS: 71032.96, P50Ms: 0.489, P99Ms: 7.724, MeanMs: 1.2571, Non2xx: 143156, Checked: 143156, BadBodies: 143156, CheckLoaded: true}},
		{name: "socket errors summed", out: "Requests/sec: 10.5\n  50%  1.00ms\n  Socket errors: connect 2, read 3, write 0, timeout 4\n",
			want: WrkResult{RPS: 10.5, P50Ms: 1, SocketErrs: 9}},
		{name: "connection refused", out: "unable to connect to 127.0.0.1:1 Connection refused\n", wantErr: "no Requests/sec"},
		{name: "bad duration", out: "Requests/sec: 1\n  50%  1.00parsecs\n", wantErr: "bad duration"},
		{name: "bad check field", out: "Requests/sec: 1\nBENCH_CHECK ok=x\n", wantErr: "bad BENCH_CHECK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseWrk(tt.out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got, approx); d != "" {
				t.Errorf("ParseWrk (-want +got):\n%s", d)
			}
		})
	}
}

// near reports whether a and b agree to 1e-9, relative.
func near(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= 1e-9*max(1, a, -a)
}

var approx = cmp.Comparer(near)

func slicesFilter(s []string, keep func(string) bool) []string {
	var out []string
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

func TestParseWrkDuration(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{{"812.00us", 0.812}, {"1.23ms", 1.23}, {"2.01s", 2010}, {"1.50m", 90000}, {"1.00h", 3600000}}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseWrkDuration(tt.in)
			if err != nil || !near(got, tt.want) {
				t.Errorf("parseWrkDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestWrkScriptChecksEveryAnswer(t *testing.T) {
	s := wrkScript(`"object":"chat.completion"`)
	for _, want := range []string{`wrk.method = "POST"`, `wrk.headers["Content-Type"] = "application/json"`,
		"function response(status, headers, body)", `string.find(body, marker, 1, true)`, "BENCH_CHECK ok=%d bad=%d",
		`local marker = "\"object\":\"chat.completion\""`} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q", want)
		}
	}
	if !strings.Contains(s, `"max_tokens\":16}"`) {
		t.Errorf("script does not post ChatBody:\n%s", s)
	}
}

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    cpuUse
		wantErr bool
	}{
		{name: "plain", stat: "123 (haproxy) S 1 123 123 0 -1 4194560 1 0 0 0 250 130 0 0 20 0 2 0 1 1 1\n",
			want: cpuUse{user: 2500 * time.Millisecond, sys: 1300 * time.Millisecond}},
		{name: "name with spaces and parens", stat: "9 (a (b) c) R 1 9 9 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 1 1",
			want: cpuUse{user: 70 * time.Millisecond, sys: 30 * time.Millisecond}},
		{name: "truncated", stat: "9 (x) R 1 2", wantErr: true},
		{name: "no name", stat: "garbage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.stat)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseStatCPU = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCPUTimeOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := cpuTime(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if busy, err := machineBusy(); err != nil || busy <= 0 {
		t.Errorf("machineBusy = %v, %v; want > 0", busy, err)
	}
	if _, err := selfAndChildrenCPU(); err != nil {
		t.Error(err)
	}
	rss, peak, err := rssBytes(os.Getpid())
	if err != nil || rss <= 0 || peak < rss {
		t.Errorf("rssBytes = %d, %d, %v; want 0 < rss ≤ peak", rss, peak, err)
	}
}
