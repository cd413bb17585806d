package admin

import (
	"net"
	"testing"
)

// TestUnknownAdminRoutes: every path under an admin prefix (/workers, /mesh,
// /weight_update_journal, /update_weights_from_disk) is the admin API's: one it does not serve
// is 404 not_found in the admin envelope, after authentication (401 without the key, so that
// nobody learns the routes without it). Paths outside the prefixes are left to the data plane.
func TestUnknownAdminRoutes(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.APIKey = "admin-key" })
	paths := []string{"/mesh", "/mesh/", "/mesh/x", "/mesh/peers/x", "/mesh/raft/", "/mesh/drain/x", "/mesh/rebalance/x",
		"/weight_update_journal/x", "/weight_update_journal/resolve/x", "/update_weights_from_disk/x", "/workers/x/y"}
	for _, p := range paths {
		for _, method := range []string{"GET", "POST", "DELETE"} {
			t.Run(method+" "+p, func(t *testing.T) {
				if a := do(e.h, req{method: method, uri: p}); a.status != 401 || a.errCode() != "unauthorized" {
					t.Errorf("without the key: %d %s, want 401 unauthorized", a.status, a.body)
				}
				a := do(e.h, req{method: method, uri: p, auth: "Bearer admin-key"})
				if a.status != 404 || a.errCode() != "not_found" || a.message() != "no admin route "+p {
					t.Errorf("with the key: %d %s, want 404 not_found", a.status, a.body)
				}
			})
		}
	}
	for _, p := range []string{"/meshes", "/workersx", "/other", "/weight_update_journalx", "/statusx"} {
		if a := do(e.h, req{method: "GET", uri: p, auth: "Bearer admin-key"}); a.status != 0 {
			t.Errorf("%s is not an admin path, but the handler answered %d %s", p, a.status, a.body)
		}
	}
}

// TestBearerSchemeAnyCase: the authentication scheme is case-insensitive and followed by one
// or more spaces (RFC 7235, section 2.1); the key is compared exactly.
func TestBearerSchemeAnyCase(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.APIKey = "admin-key" })
	tests := []struct {
		auth   string
		status int
	}{
		{"Bearer admin-key", 200},
		{"bearer admin-key", 200},
		{"BEARER admin-key", 200},
		{"bEaReR admin-key", 200},
		{"Bearer ADMIN-KEY", 401},
		{"bearer  admin-key", 200}, // 1*SP
		{"bearer", 401},
		{"bearer ", 401},
		{"Basic admin-key", 401},
		{"bearers admin-key", 401},
		{"admin-key", 401},
	}
	for _, tt := range tests {
		t.Run(tt.auth, func(t *testing.T) {
			a := do(e.h, req{method: "GET", uri: "/workers", auth: tt.auth, from: net.ParseIP("10.0.0.1")})
			if a.status != tt.status {
				t.Errorf("%d %s, want %d", a.status, a.body, tt.status)
			}
		})
	}
}
