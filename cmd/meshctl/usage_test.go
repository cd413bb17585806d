package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestGatewayWithAPath: the admin API is at a gateway's root, so a --gateway (or
// $MESHCTL_GATEWAY) with a path is a usage error, refused before any request, as a query or a
// fragment is; an empty path or "/" is the root.
func TestGatewayWithAPath(t *testing.T) {
	f, srv := newFake(t)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string // a part of the one stderr line; "" for none
	}{
		{"a path", []string{"--gateway", srv.URL + "/some/path", "peers"}, nil, exitUsage,
			`meshctl: --gateway "` + srv.URL + `/some/path": want no path (the admin API is at the gateway's root)`},
		{"a path with a trailing slash", []string{"--gateway", srv.URL + "/admin/", "raft"}, nil, exitUsage,
			`--gateway "` + srv.URL + `/admin": want no path`},
		{"an escaped path", []string{"--gateway", srv.URL + "/%2F", "raft"}, nil, exitUsage, "want no path"},
		{"a path from the environment", []string{"raft"}, map[string]string{"MESHCTL_GATEWAY": srv.URL + "/v1"}, exitUsage,
			`--gateway "` + srv.URL + `/v1": want no path`},
		{"the root", []string{"--gateway", srv.URL + "/", "raft"}, nil, exitOK, ""},
		{"no path", []string{"--gateway", srv.URL, "raft"}, nil, exitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.calls = nil
			code, _, stderr := runCLI(t, srv.URL, tt.env, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) || (tt.want != "" && strings.Count(stderr, "\n") != 1) {
				t.Errorf("exit %d, stderr %q; want %d and one line with %q", code, stderr, tt.code, tt.want)
			}
			if sent := len(f.calls); (tt.code == exitUsage) != (sent == 0) {
				t.Errorf("%d requests sent with exit %d", sent, code)
			}
		})
	}
}

// TestAdminKeyControlCharacter: an admin key with a control character (a newline from a file, a
// carriage return from Windows) cannot be a bearer token: it is a usage error naming where the
// key came from, and the key is never printed.
func TestAdminKeyControlCharacter(t *testing.T) {
	const secret = "k3y-zzsecretzz"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"newline in the flag", []string{"--admin-key", secret + "\nx", "peers"}, nil,
			`meshctl: --admin-key: the admin key contains a control character (\n), which an HTTP header cannot carry`},
		{"carriage return in the environment", []string{"peers"}, map[string]string{"MESHCTL_ADMIN_KEY": secret + "\r"},
			`meshctl: $MESHCTL_ADMIN_KEY: the admin key contains a control character (\r), which an HTTP header cannot carry`},
		{"tab in the flag", []string{"--admin-key", "\t" + secret, "workers", "list"}, nil,
			`meshctl: --admin-key: the admin key contains a control character (\t)`},
		{"NUL in the flag", []string{"--admin-key", secret + "\x00", "raft"}, nil,
			`meshctl: --admin-key: the admin key contains a control character (\x00)`},
		{"DEL in the flag", []string{"--admin-key", secret + "\x7f", "raft"}, nil,
			`meshctl: --admin-key: the admin key contains a control character (\x7f)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t)
			code, stdout, stderr := runCLI(t, srv.URL, tt.env, tt.args...)
			if code != exitUsage || !strings.HasPrefix(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want %d and one line starting %q", code, stderr, exitUsage, tt.want)
			}
			if strings.Contains(stdout+stderr, "zzsecretzz") {
				t.Errorf("the admin key was printed: %q %q", stdout, stderr)
			}
			if len(f.calls) != 0 {
				t.Errorf("asked the gateway: %v", f.calls)
			}
		})
	}
}

// TestDrainNeitherOrBoth: drain names one gateway or one color; the message says which of the
// two mistakes was made.
func TestDrainNeitherOrBoth(t *testing.T) {
	const usage = " (usage: meshctl drain PEER | --color COLOR [flags])\n"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"neither", []string{"drain"}, "meshctl: drain: name the gateway to drain, or --color COLOR" + usage},
		{"both", []string{"drain", "gw-1", "--color", "blue"}, "meshctl: drain: name one gateway or --color COLOR, not both" + usage},
		{"an empty color", []string{"drain", "--color", ""}, "meshctl: drain: --color: want a color, such as blue" + usage},
		{"an empty peer", []string{"drain", ""}, "meshctl: drain: PEER: want a gateway's node id" + usage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t)
			code, stdout, stderr := runCLI(t, srv.URL, nil, tt.args...)
			if code != exitUsage || stderr != tt.want || stdout != "" || len(f.calls) != 0 {
				t.Errorf("exit %d, stdout %q, %d requests, stderr\n%q\nwant\n%q", code, stdout, len(f.calls), stderr, tt.want)
			}
		})
	}
}

// TestGroupsNeedASubcommand: every command that groups subcommands (meshctl itself included),
// run without one, says so in one line naming them, and exits 2, asking no gateway (a bad
// $MESHCTL_GATEWAY is not what is wrong then); a subcommand it lacks is refused the same way.
func TestGroupsNeedASubcommand(t *testing.T) {
	want := map[string]string{
		"meshctl":         "meshctl: name a command: cert, completion, drain, journal, owners, peers, probe, raft, rebalance, status, workers (see meshctl --help)\n",
		"meshctl workers": "meshctl: workers: name a subcommand: add, disable, enable, get, list, quarantine, remove, transfer, unquarantine (see meshctl workers --help)\n",
		"meshctl cert":    "meshctl: cert: name a subcommand: create-ca, create-client, create-node (see meshctl cert --help)\n",
		"meshctl journal": "meshctl: journal: name a subcommand: resolve, show (see meshctl journal --help)\n",
	}
	var groups []string
	app := &app{getenv: func(string) string { return "" }}
	stack := []*cobra.Command{app.rootCommand()}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], c.Commands()...)
		if c.HasAvailableSubCommands() {
			groups = append(groups, c.CommandPath())
		}
	}
	slices.Sort(groups)
	if !slices.Equal(groups, []string{"meshctl", "meshctl cert", "meshctl journal", "meshctl workers"}) {
		t.Errorf("command groups %v: give each new one its line in this test", groups)
	}
	for _, g := range groups {
		args := strings.Fields(g)[1:]
		for _, env := range []map[string]string{nil, {"MESHCTL_GATEWAY": "ftp://not-a-gateway"}} {
			t.Run(strings.Join(append([]string{g}, env["MESHCTL_GATEWAY"]), " "), func(t *testing.T) {
				f, srv := newFake(t)
				code, stdout, stderr := runCLI(t, srv.URL, env, args...)
				if code != exitUsage || stdout != "" || stderr != want[g] {
					t.Errorf("exit %d, stdout %q, stderr\n%q\nwant exit 2 and\n%q", code, stdout, stderr, want[g])
				}
				if len(f.calls) != 0 {
					t.Errorf("asked the gateway: %v", f.calls)
				}
			})
		}
		if g == "meshctl" {
			continue
		}
		t.Run(g+" nope", func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "http://127.0.0.1:1", nil, append(args, "nope")...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, `unknown command "nope"`) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line naming the unknown command", code, stdout, stderr)
			}
		})
	}
}
