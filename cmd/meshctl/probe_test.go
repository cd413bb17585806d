package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// meshctl probe exits 0 on a 200 and 1 on anything else (the Docker HEALTHCHECK reads the exit
// status), with the readiness answer's status and reason, not its JSON; and 2 on a probe it
// does not know.
func TestProbe(t *testing.T) {
	f := &fakeAdmin{answers: map[string]canned{
		"GET /liveness":  {200, `{"status": "ok"}`},
		"GET /readiness": {503, `{"status":"not_ready","reason":"draining","healthy_workers":0,"total_workers":2}`},
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	tests := []struct {
		name, probe string
		code        int
		out, errOut string
	}{
		{"live", "liveness", exitOK, "liveness 200 OK", ""},
		{"not ready", "readiness", exitRefused, "", "meshctl: 503 not_ready: draining\n"},
		{"unknown", "startup", exitUsage, "", `probe "startup": want liveness or readiness`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, srv.URL, nil, "probe", tt.probe)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errOut, tt.errOut) {
				t.Errorf("meshctl probe %s: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					tt.probe, code, out, errOut, tt.code, tt.out, tt.errOut)
			}
		})
	}
}
