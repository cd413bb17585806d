package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestRequestLogFlag: by default and with --request-log, a model request gets one record in the
// daemon's log, written by the time it has stopped (the records are batched); with
// --request-log=false, none.
func TestRequestLogFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{{[]string{"--request-log"}, 1}, {nil, 1}, {[]string{"--request-log=false"}, 0}} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			d := startDaemon(t, append([]string{"--ephemeral"}, tc.args...)...)
			resp, err := http.Post(d.url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			id := resp.Header.Get("X-Request-Id")
			if resp.StatusCode != 503 || id == "" {
				t.Fatalf("answer %d, X-Request-Id %q", resp.StatusCode, id)
			}
			d.stop(t)
			got := d.logs.Lines("msg=route_rejected", "request_id="+id, "path=/v1/chat/completions", "status=503", "outcome=no_available_workers")
			if len(got) != tc.want {
				t.Errorf("%d route_rejected records, want %d; logs:\n%s", len(got), tc.want, d.logs.String())
			}
		})
	}
}

// TestRequestLogLevel: the request log writes at INFO, so --log-level warn or above silences
// it (the gateway then builds no record: gateway's TestRequestLogOff).
func TestRequestLogLevel(t *testing.T) {
	for _, tc := range []struct {
		level string
		want  bool
	}{{"info", true}, {"debug", true}, {"warn", false}, {"error", false}} {
		t.Run(tc.level, func(t *testing.T) {
			o, err := parse([]string{"--log-level", tc.level}, nil)
			if err != nil {
				t.Fatal(err)
			}
			lg := o.observe.logs(io.Discard)
			defer lg.close()
			if got := lg.reqLog.Enabled(context.Background(), slog.LevelInfo); got != tc.want {
				t.Errorf("request log at INFO enabled: %v, want %v", got, tc.want)
			}
		})
	}
}
