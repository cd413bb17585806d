package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestResolveStateDir(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"MESHGW_STATE_DIR": "/env/state", "XDG_STATE_HOME": "/xdg"}
	tests := []struct {
		name       string
		flag       string
		vars       map[string]string
		home       string
		wantPath   string
		wantSource string
		wantErr    string
	}{
		{"flag wins over everything", "/flag/dir", all, "/home/u", "/flag/dir", "--state-dir", ""},
		{"env when no flag", "", all, "/home/u", "/env/state", "$MESHGW_STATE_DIR", ""},
		{"xdg when no flag or env", "", map[string]string{"XDG_STATE_HOME": "/xdg"}, "/home/u",
			"/xdg/meshgw", "$XDG_STATE_HOME", ""},
		{"home last", "", nil, "/home/u", "/home/u/.local/state/meshgw", "home", ""},
		{"relative xdg is ignored", "", map[string]string{"XDG_STATE_HOME": "rel"}, "/home/u",
			"/home/u/.local/state/meshgw", "home", ""},
		{"relative flag made absolute", "st", nil, "/home/u", filepath.Join(cwd, "st"), "--state-dir", ""},
		{"relative env made absolute", "", map[string]string{"MESHGW_STATE_DIR": "./e"}, "",
			filepath.Join(cwd, "e"), "$MESHGW_STATE_DIR", ""},
		{"flag is cleaned", "/a/b/../c/", nil, "", "/a/c", "--state-dir", ""},
		{"nothing applies", "", nil, "", "", "", "state dir cannot be resolved"},
		{"relative home does not count", "", nil, "home", "", "", "state dir cannot be resolved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveStateDir(tt.flag, env(tt.vars), tt.home)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ResolveStateDir = %+v, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveStateDir: %v", err)
			}
			want := Location{Path: tt.wantPath, Source: tt.wantSource}
			if got != want {
				t.Errorf("ResolveStateDir = %+v, want %+v", got, want)
			}
		})
	}
}

func TestNodeDirName(t *testing.T) {
	tests := []struct {
		id, want string
		wantErr  bool
	}{
		{id: "node-a", want: "node-a"},
		{id: "127.0.0.1:30000", want: "127.0.0.1_30000"},
		{id: "127.0.0.1_30000", want: "127.0.0.1_30000"},
		{id: "[::1]:30000", want: "___1__30000"},
		{id: "../../etc", want: ".._.._etc"},
		{id: "a/b\\c d", want: "a_b_c_d"},
		{id: "nœud", want: "n_ud"},
		{id: "", wantErr: true},
		{id: ".", wantErr: true},
		{id: "..", wantErr: true},
		{id: strings.Repeat("x", 129), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got, err := NodeDirName(tt.id)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("NodeDirName(%q) = %q, %v; want %q, error %v", tt.id, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func perm(t *testing.T, path string) fs.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func TestPrepareNodeDirCreatesPrivateLayout(t *testing.T) {
	base := filepath.Join(t.TempDir(), "state", "meshgw")
	d, err := PrepareNodeDir(base, "127.0.0.1:30000", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("PrepareNodeDir: %v", err)
	}
	if want := filepath.Join(base, "127.0.0.1_30000"); d.Path != want {
		t.Errorf("Path = %s, want %s", d.Path, want)
	}
	for _, dir := range []string{base, d.Path, d.Snapshots()} {
		if got := perm(t, dir); got != 0o700 {
			t.Errorf("%s mode = %#o, want 0700", dir, got)
		}
	}
	if d.RaftDB() != filepath.Join(d.Path, "raft.db") || d.Snapshots() != filepath.Join(d.Path, "snapshots") {
		t.Errorf("layout = %s, %s", d.RaftDB(), d.Snapshots())
	}
	entries, _ := os.ReadDir(d.Path)
	if len(entries) != 1 || entries[0].Name() != "snapshots" {
		t.Errorf("node folder holds %v, want only snapshots (the probe file must be gone)", entries)
	}
	s, err := Open(d.RaftDB(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := perm(t, d.RaftDB()); got != 0o600 {
		t.Errorf("raft.db mode = %#o, want 0600", got)
	}
}

func TestPrepareNodeDirTightensNeverLoosens(t *testing.T) {
	tests := []struct {
		name                  string
		nodeMode, dbMode      fs.FileMode
		wantNode, wantDB      fs.FileMode
		wantWarnings          int
		baseMode, wantBaseMod fs.FileMode
	}{
		{"open folder and file are tightened", 0o755, 0o644, 0o700, 0o600, 2, 0o755, 0o755},
		{"world-writable is tightened", 0o777, 0o666, 0o700, 0o600, 2, 0o755, 0o755},
		{"already private is untouched", 0o700, 0o600, 0o700, 0o600, 0, 0o755, 0o755},
		{"stricter file is not loosened", 0o700, 0o400, 0o700, 0o400, 0, 0o711, 0o711},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			node := filepath.Join(base, "n1")
			mustMkdir(t, node, 0o700)
			mustMkdir(t, filepath.Join(node, SnapshotsDirName), 0o700)
			if err := os.WriteFile(filepath.Join(node, RaftDBName), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			chmod(t, base, tt.baseMode)
			chmod(t, node, tt.nodeMode)
			chmod(t, filepath.Join(node, RaftDBName), tt.dbMode)
			var logs bytes.Buffer
			d, err := PrepareNodeDir(base, "n1", slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("PrepareNodeDir: %v", err)
			}
			if got := perm(t, d.Path); got != tt.wantNode {
				t.Errorf("node folder mode = %#o, want %#o", got, tt.wantNode)
			}
			if got := perm(t, d.RaftDB()); got != tt.wantDB {
				t.Errorf("raft.db mode = %#o, want %#o", got, tt.wantDB)
			}
			if got := perm(t, base); got != tt.wantBaseMod {
				t.Errorf("base mode = %#o, want %#o (the operator's, left alone)", got, tt.wantBaseMod)
			}
			if got := strings.Count(logs.String(), "tightened state dir permissions"); got != tt.wantWarnings {
				t.Errorf("%d warnings, want %d:\n%s", got, tt.wantWarnings, logs.String())
			}
		})
	}
}

func mustMkdir(t *testing.T, dir string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareNodeDirRefusesUnusablePaths covers cases that fail for root too (tests run as root
// here, where permission bits stop nothing).
func TestPrepareNodeDirRefusesUnusablePaths(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodeIsFile := filepath.Join(tmp, "base")
	mustMkdir(t, nodeIsFile, 0o700)
	if err := os.WriteFile(filepath.Join(nodeIsFile, "n1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, base, want string
	}{
		{"base under a regular file", filepath.Join(file, "meshgw"),
			"state dir " + filepath.Join(file, "meshgw") + " cannot be created: not a directory"},
		{"base is a regular file", file,
			"state dir " + file + " cannot be created: not a directory"},
		{"node folder is a regular file", nodeIsFile,
			"state dir " + filepath.Join(nodeIsFile, "n1") + " is not a directory"},
		{"base under /proc", "/proc/meshgw-test/state",
			"state dir /proc/meshgw-test/state cannot be created: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PrepareNodeDir(tt.base, "n1", slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("PrepareNodeDir succeeded, want an error")
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error = %q, want one line starting %q", msg, tt.want)
			}
		})
	}
}

// TestPrepareNodeDirUnwritable uses permission bits, so it runs only for a user they bind.
func TestPrepareNodeDirUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores permission bits; TestPrepareNodeDirRefusesUnusablePaths covers root")
	}
	base := t.TempDir()
	node := filepath.Join(base, "n1")
	mustMkdir(t, node, 0o700)
	mustMkdir(t, filepath.Join(node, SnapshotsDirName), 0o700)
	chmod(t, node, 0o500)
	t.Cleanup(func() { _ = os.Chmod(node, 0o700) })
	_, err := PrepareNodeDir(base, "n1", slog.New(slog.DiscardHandler))
	want := "state dir " + node + " is not writable: permission denied"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("error %v does not wrap fs.ErrPermission", err)
	}
}
