package main

import (
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

var metricsListen = regexp.MustCompile(`msg="meshgw started" .*\bmetrics_listen=(\S*)`)

// freeLoopbackPort returns a port of 127.0.0.1 that was free a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestMetricsListenerFollowsHost: without --prometheus-host, /metrics (and the profiler riding
// on it) binds --host, not every interface; --prometheus-host still wins.
func TestMetricsListenerFollowsHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // the listener's host
	}{
		{"follows --host", []string{"--host", "127.0.0.1"}, "127.0.0.1"},
		{"--prometheus-host wins", []string{"--host", "127.0.0.1", "--prometheus-host", "127.0.0.2"}, "127.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freeLoopbackPort(t)
			d := startDaemon(t, append(tc.args, "--ephemeral", "--prometheus-port", strconv.Itoa(port), "--enable-pprof")...)
			m := metricsListen.FindStringSubmatch(d.logs.String())
			if want := net.JoinHostPort(tc.want, strconv.Itoa(port)); m == nil || m[1] != want {
				t.Fatalf("metrics listen on %q, want %q", m, want)
			}
			resp, err := http.Get("http://" + m[1] + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("/metrics: %d", resp.StatusCode)
			}
		})
	}
	o, err := parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.observe.metricsAddr(o.gw.host); got != "0.0.0.0:29000" {
		t.Errorf("default metrics address %q, want 0.0.0.0:29000 (the default --host)", got)
	}
}
