package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ownersAnswer has a field meshctl does not know (display_id), which -o wide shows, and an
// answer-level field (generated_by) that -o json --owner keeps.
const ownersAnswer = `{"generated_by": "gw-1", "owners": [
 {"worker": "w-00aa11bb22cc", "url": "http://10.0.0.9:9000", "owner": "gw-2", "epoch": 7, "health_state": "not_ready",
  "breaker": "unknown", "disabled": true, "is_dead": true, "stale": false, "origin": "mesh", "display_id": "10.0.0.9:9000"},
 {"worker": "w-3f1c0a9b2d44", "url": "http://127.0.0.1:8013", "owner": "gw-1", "epoch": 5, "health_state": "ready",
  "breaker": "closed", "disabled": false, "is_dead": false, "stale": false, "origin": "local", "display_id": "127.0.0.1:8013",
  "cache": {"prompt_tokens": 200, "cached_tokens": 150, "hit_ratio": 0.75}},
 {"worker": "w-9e8d7c6b5a41", "url": "http://10.0.0.7:9000", "owner": "gw-2", "epoch": 9, "health_state": "ready",
  "breaker": "unknown", "disabled": false, "is_dead": false, "stale": true, "origin": "mesh", "display_id": "10.0.0.7:9000",
  "cache": {"prompt_tokens": 0, "cached_tokens": 0, "hit_ratio": null}}]}`

func ownersServer(t *testing.T, status int, body string) (*fakeAdmin, string) {
	t.Helper()
	f := &fakeAdmin{answers: map[string]canned{"GET /mesh/owners": {status, body}}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func TestOwnersTables(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"table", nil, `
WORKER          URL                    OWNER  EPOCH  HEALTH     BREAKER  FLAGS          STALE  CACHE_HIT
w-9e8d7c6b5a41  http://10.0.0.7:9000   gw-2   9      ready      unknown  -              true   -
w-00aa11bb22cc  http://10.0.0.9:9000   gw-2   7      not_ready  unknown  disabled,dead  false  -
w-3f1c0a9b2d44  http://127.0.0.1:8013  gw-1   5      ready      closed   -              false  75.0%
3 workers: gw-1 owns 1, gw-2 owns 2, 1 stale
`},
		{"sorted by epoch", []string{"--sort", "epoch"}, `
WORKER          URL                    OWNER  EPOCH  HEALTH     BREAKER  FLAGS          STALE  CACHE_HIT
w-3f1c0a9b2d44  http://127.0.0.1:8013  gw-1   5      ready      closed   -              false  75.0%
w-00aa11bb22cc  http://10.0.0.9:9000   gw-2   7      not_ready  unknown  disabled,dead  false  -
w-9e8d7c6b5a41  http://10.0.0.7:9000   gw-2   9      ready      unknown  -              true   -
3 workers: gw-1 owns 1, gw-2 owns 2, 1 stale
`},
		{"wide", []string{"-o", "wide"}, `
WORKER          URL                    OWNER  EPOCH  HEALTH     BREAKER  FLAGS          STALE  CACHE_HIT  ORIGIN  DISPLAY_ID
w-9e8d7c6b5a41  http://10.0.0.7:9000   gw-2   9      ready      unknown  -              true   -          mesh    10.0.0.7:9000
w-00aa11bb22cc  http://10.0.0.9:9000   gw-2   7      not_ready  unknown  disabled,dead  false  -          mesh    10.0.0.9:9000
w-3f1c0a9b2d44  http://127.0.0.1:8013  gw-1   5      ready      closed   -              false  75.0%      local   127.0.0.1:8013
3 workers: gw-1 owns 1, gw-2 owns 2, 1 stale
`},
		{"one owner", []string{"--owner", "gw-2"}, `
WORKER          URL                   OWNER  EPOCH  HEALTH     BREAKER  FLAGS          STALE  CACHE_HIT
w-9e8d7c6b5a41  http://10.0.0.7:9000  gw-2   9      ready      unknown  -              true   -
w-00aa11bb22cc  http://10.0.0.9:9000  gw-2   7      not_ready  unknown  disabled,dead  false  -
2 workers: gw-2 owns 2, 1 stale
`},
		{"an owner of nothing", []string{"--owner", "gw-9", "-o", "wide"}, `
WORKER  URL  OWNER  EPOCH  HEALTH  BREAKER  FLAGS  STALE  CACHE_HIT  ORIGIN
0 workers
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srvURL := ownersServer(t, 200, ownersAnswer)
			code, stdout, stderr := runCLI(t, srvURL, nil, append([]string{"owners"}, tt.args...)...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if diff := cmp.Diff(strings.TrimPrefix(tt.want, "\n"), trimLines(stdout)); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
			want := []call{{"GET", "/mesh/owners", "", "Bearer " + testKey}}
			if diff := cmp.Diff(want, f.calls); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOwnersJSON: -o json prints the route's answer; with --owner, the same answer with only
// that owner's rows, each as the gateway sent it.
func TestOwnersJSON(t *testing.T) {
	var full map[string]any
	if err := json.Unmarshal([]byte(ownersAnswer), &full); err != nil {
		t.Fatal(err)
	}
	rows := full["owners"].([]any)
	tests := []struct {
		name string
		args []string
		want map[string]any
	}{
		{"all", nil, full},
		{"gw-1", []string{"--owner", "gw-1"}, map[string]any{"generated_by": "gw-1", "owners": []any{rows[1]}}},
		{"gw-2", []string{"--owner", "gw-2"}, map[string]any{"generated_by": "gw-1", "owners": []any{rows[0], rows[2]}}},
		{"nobody", []string{"--owner", "gw-9"}, map[string]any{"generated_by": "gw-1", "owners": []any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, srvURL := ownersServer(t, 200, ownersAnswer)
			code, stdout, stderr := runCLI(t, srvURL, nil, append([]string{"owners", "-o", "json"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("-o json (-want +printed):\n%s", diff)
			}
		})
	}
}

// TestOwnersRefusedOrUnreadable: refusals and unreadable answers exit 1, usage errors exit 2,
// each with one line on stderr and nothing on stdout.
func TestOwnersRefusedOrUnreadable(t *testing.T) {
	tests := []struct {
		name   string
		answer canned
		args   []string
		code   int
		stderr string
		sent   int
	}{
		{"unauthorized", canned{401, `{"error": {"message": "missing or wrong admin bearer key", "code": "unauthorized"}}`},
			nil, 1, "meshctl: 401 unauthorized: missing or wrong admin bearer key", 1},
		{"unauthorized, json, one owner", canned{401, `{"error": {"message": "missing or wrong admin bearer key", "code": "unauthorized"}}`},
			[]string{"-o", "json", "--owner", "gw-1"}, 1, "meshctl: 401 unauthorized: missing or wrong admin bearer key", 1},
		{"an old gateway", canned{404, `{"error": {"message": "no admin route", "code": "not_found"}}`},
			nil, 1, "meshctl: 404 not_found: no admin route", 1},
		{"not JSON", canned{200, `<html>`}, nil, 1, "meshctl: the gateway's answer to GET /mesh/owners cannot be read", 1},
		{"not JSON, json, one owner", canned{200, `<html>`}, []string{"-o", "json", "--owner", "gw-1"}, 1,
			"meshctl: the gateway's answer to GET /mesh/owners cannot be read", 1},
		{"a row of the wrong shape", canned{200, `{"owners": [{"worker": 3}]}`}, nil, 1,
			"meshctl: the gateway's answer to GET /mesh/owners cannot be read", 1},
		{"a row of the wrong shape, json, one owner", canned{200, `{"owners": [{"owner": 3}]}`}, []string{"-o", "json", "--owner", "gw-1"}, 1,
			"meshctl: the gateway's answer to GET /mesh/owners cannot be read", 1},
		{"an argument", canned{200, ownersAnswer}, []string{"gw-1"}, 2, `meshctl: owners: unknown command "gw-1"`, 0},
		{"empty owner", canned{200, ownersAnswer}, []string{"--owner="}, 2, "meshctl: owners: --owner: want a gateway's node id", 0},
		{"unknown flag", canned{200, ownersAnswer}, []string{"--nope"}, 2, "meshctl: owners: unknown flag: --nope", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srvURL := ownersServer(t, tt.answer.status, tt.answer.body)
			code, stdout, stderr := runCLI(t, srvURL, nil, append([]string{"owners"}, tt.args...)...)
			if code != tt.code || !strings.HasPrefix(stderr, tt.stderr) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want %d and one line starting %q", code, stderr, tt.code, tt.stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if len(f.calls) != tt.sent {
				t.Errorf("%d requests sent, want %d", len(f.calls), tt.sent)
			}
			if strings.Contains(stderr, testKey) {
				t.Errorf("the admin key was printed: %q", stderr)
			}
		})
	}
}

// TestOwnersEmpty: a fleet without workers prints the header and its count.
func TestOwnersEmpty(t *testing.T) {
	for _, body := range []string{`{"owners": []}`, `{"owners": null}`, `{}`} {
		_, srvURL := ownersServer(t, 200, body)
		code, stdout, stderr := runCLI(t, srvURL, nil, "owners")
		want := "WORKER  URL  OWNER  EPOCH  HEALTH  BREAKER  FLAGS  STALE  CACHE_HIT\n0 workers\n"
		if code != 0 || trimLines(stdout) != want {
			t.Errorf("%s: exit %d (%q), stdout %q; want %q", body, code, stderr, stdout, want)
		}
	}
}

func TestOwnersHelp(t *testing.T) {
	code, stdout, stderr := runCLI(t, "http://127.0.0.1:1", nil, "owners", "--help")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, s := range []string{"GET /mesh/owners", "--owner NODE", "EPOCH", "FLAGS", "STALE", "CACHE_HIT", "ORIGIN", "-o json"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("help lacks %q:\n%s", s, stdout)
		}
	}
	if _, stdout, _ := runCLI(t, "http://127.0.0.1:1", nil, "--help"); !strings.Contains(stdout, "owners") {
		t.Errorf("meshctl --help does not list owners:\n%s", stdout)
	}
}

// A percentage column sorts by its number: 9.5% before 75.0% before 100.0%.
func TestSortRowsPercent(t *testing.T) {
	rows := [][]string{{"a", "100.0%"}, {"b", "9.5%"}, {"c", "75.0%"}}
	sortRows([]string{"WORKER", "CACHE_HIT"}, rows, "cache_hit")
	if got := rows[0][0] + rows[1][0] + rows[2][0]; got != "bca" {
		t.Fatalf("order %q, want bca", got)
	}
}

// TestOwnersByRegion: workers of several regions read region by region (no region last), with
// a REGION column and the count of each region in the summary.
func TestOwnersByRegion(t *testing.T) {
	const answer = `{"owners": [
 {"worker": "w-1", "url": "http://10.78.2.2:8000", "owner": "gw-us", "region": "us", "epoch": 3, "health_state": "ready", "breaker": "closed", "origin": "mesh"},
 {"worker": "w-2", "url": "http://10.78.1.2:8000", "owner": "gw-eu", "region": "eu", "epoch": 4, "health_state": "ready", "breaker": "closed", "origin": "local"},
 {"worker": "w-3", "url": "http://10.78.0.9:8000", "owner": "gw-eu", "epoch": 5, "health_state": "ready", "breaker": "closed", "origin": "local"},
 {"worker": "w-4", "url": "http://10.78.1.3:8000", "owner": "gw-us", "region": "eu", "epoch": 6, "health_state": "ready", "breaker": "closed", "origin": "mesh"}]}`
	_, srvURL := ownersServer(t, 200, answer)
	code, stdout, stderr := runCLI(t, srvURL, nil, "owners")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := `WORKER  URL                    OWNER  REGION  EPOCH  HEALTH  BREAKER  FLAGS  STALE  CACHE_HIT
w-2     http://10.78.1.2:8000  gw-eu  eu      4      ready   closed   -      false  -
w-4     http://10.78.1.3:8000  gw-us  eu      6      ready   closed   -      false  -
w-1     http://10.78.2.2:8000  gw-us  us      3      ready   closed   -      false  -
w-3     http://10.78.0.9:8000  gw-eu  -       5      ready   closed   -      false  -
4 workers: gw-eu owns 2, gw-us owns 2; by region: eu 2, us 1, no region 1
`
	if diff := cmp.Diff(want, trimLines(stdout)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
