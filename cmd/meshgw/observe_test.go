package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestRequestLogFlag: --request-log writes a record per model request through the daemon's
// logger; by default (off, for its measured cost) and with --request-log=false, none.
func TestRequestLogFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{{[]string{"--request-log"}, 1}, {nil, 0}, {[]string{"--request-log=false"}, 0}} {
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
