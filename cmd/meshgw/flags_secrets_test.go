package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Keys read from files: the file's content less one trailing newline, from the flag or its
// variable; a file that cannot serve is one line naming the flag and the file, never the key.
func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const meshKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
	admin := write("admin", "sk-admin-canary\n", 0o600)
	adminCRLF := write("admin-crlf", "sk-admin-canary\r\n", 0o600)
	adminBare := write("admin-bare", "sk-admin-canary", 0o600)
	mesh := write("mesh", meshKey+"\n", 0o600)
	const meshKey2 = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=" // 32 bytes
	meshTwo := write("mesh-two", meshKey+"\n"+meshKey2+"\n", 0o600)
	meshBadSecond := write("mesh-bad-second", meshKey+"\nc2hvcnQ=\n", 0o600)
	empty := write("empty", "\n", 0o600)
	badMesh := write("bad-mesh", "zzsecretzz-not-base64\n", 0o600)
	unreadable := write("unreadable", "sk-admin-canary\n", 0o000)
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantErr    string
		admin      string
		meshKey    string
		skipAsRoot bool
	}{
		{name: "admin key file", args: []string{"--admin-api-key-file", admin}, admin: "sk-admin-canary"},
		{name: "CRLF dropped", args: []string{"--admin-api-key-file", adminCRLF}, admin: "sk-admin-canary"},
		{name: "no newline", args: []string{"--admin-api-key-file", adminBare}, admin: "sk-admin-canary"},
		{name: "admin key file from the variable", env: map[string]string{"MESHGW_ADMIN_API_KEY_FILE": admin}, admin: "sk-admin-canary"},
		{name: "admin key variable still works", env: map[string]string{"MESHGW_ADMIN_API_KEY": "sk-env"}, admin: "sk-env"},
		{name: "mesh key file", args: []string{"--mesh-encrypt-key-file", mesh}, meshKey: meshKey},
		{name: "mesh key variable still works", env: map[string]string{"MESHGW_MESH_ENCRYPT_KEY": meshKey}, meshKey: meshKey},
		{name: "missing file", args: []string{"--admin-api-key-file", filepath.Join(dir, "none")},
			wantErr: "--admin-api-key-file " + filepath.Join(dir, "none") + ": cannot read it: no such file or directory"},
		{name: "unreadable file", args: []string{"--admin-api-key-file", unreadable}, skipAsRoot: true,
			wantErr: "--admin-api-key-file " + unreadable + ": cannot read it: permission denied"},
		{name: "a folder", args: []string{"--mesh-encrypt-key-file", dir}, wantErr: "--mesh-encrypt-key-file " + dir + " is not a regular file"},
		{name: "empty file", args: []string{"--admin-api-key-file", empty}, wantErr: "--admin-api-key-file " + empty + " is empty"},
		{name: "empty mesh key file", args: []string{"--mesh-encrypt-key-file", empty}, wantErr: "--mesh-encrypt-key-file " + empty + " is empty"},
		{name: "mesh key file, the primary then another key, one per line", args: []string{"--mesh-encrypt-key-file", meshTwo}, meshKey: meshKey + "\n" + meshKey2},
		{name: "bad second mesh key in the file", args: []string{"--mesh-encrypt-key-file", meshBadSecond}, wantErr: "--mesh-encrypt-key-file " + meshBadSecond + ": key 2 of 2: --mesh-encrypt-key decodes to 5 bytes"},
		{name: "bad mesh key in the file", args: []string{"--mesh-encrypt-key-file", badMesh}, wantErr: "--mesh-encrypt-key-file " + badMesh + ": --mesh-encrypt-key is not valid base64"},
		{name: "both", args: []string{"--admin-api-key", "sk-x", "--admin-api-key-file", admin}, wantErr: "--admin-api-key and --admin-api-key-file are both set"},
		{name: "variable and file", args: []string{"--mesh-encrypt-key-file", mesh}, env: map[string]string{"MESHGW_MESH_ENCRYPT_KEY": meshKey},
			wantErr: "--mesh-encrypt-key and --mesh-encrypt-key-file are both set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.skipAsRoot && os.Geteuid() == 0 {
				t.Skip("root reads a 0000 file")
			}
			o, err := parse(tt.args, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") ||
					strings.Contains(err.Error(), "canary") || strings.Contains(err.Error(), "zzsecretzz") {
					t.Errorf("error %v, want one line containing %q and no key", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.gw.adminAPIKey != tt.admin || o.cluster.meshEncryptKey != tt.meshKey {
				t.Errorf("admin key %q, mesh key %q; want %q, %q", o.gw.adminAPIKey, o.cluster.meshEncryptKey, tt.admin, tt.meshKey)
			}
		})
	}
}

// A key file that cannot serve makes meshgw exit 2 with one line on stderr.
func TestKeyFileExitsTwo(t *testing.T) {
	var stderr bytes.Buffer
	code := run([]string{"--admin-api-key-file", filepath.Join(t.TempDir(), "none")}, env(nil), io.Discard, &stderr)
	if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "meshgw: --admin-api-key-file ") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
