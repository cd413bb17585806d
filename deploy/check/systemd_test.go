package check

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// unitFile is what the flags and hardening checks read of deploy/systemd/meshgw.service
// (systemd-analyze verify, in scripts/deploy-check.sh, checks the rest).
type unitFile struct {
	execStart string
	env       map[string]string // Environment= lines
	service   map[string][]string
}

func readUnit(t *testing.T) unitFile {
	t.Helper()
	b, err := readRepo("deploy", "systemd", "meshgw.service")
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{env: map[string]string{}, service: map[string][]string{}}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section != "Service" {
			continue
		}
		u.service[k] = append(u.service[k], v)
		switch k {
		case "ExecStart":
			u.execStart = v
		case "Environment":
			for _, kv := range strings.Fields(v) {
				ek, ev, _ := strings.Cut(kv, "=")
				u.env[ek] = ev
			}
		}
	}
	if u.execStart == "" {
		t.Fatal("meshgw.service has no ExecStart")
	}
	return u
}

// readEnvFile reads KEY=VALUE lines, as systemd's EnvironmentFile= does (comments aside).
func readEnvFile(t *testing.T, parts ...string) map[string]string {
	t.Helper()
	b, err := readRepo(parts...)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("%s: %q is not KEY=VALUE", strings.Join(parts, "/"), line)
			continue
		}
		env[k] = v
	}
	return env
}

// TestSystemdUnit: the unit keeps its state in StateDirectory=, reads an EnvironmentFile=,
// restarts on failure but not on a bad command line (exit 2), and is hardened.
func TestSystemdUnit(t *testing.T) {
	u := readUnit(t)
	want := map[string]string{
		"StateDirectory":           "meshgw",
		"StateDirectoryMode":       "0700",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "2",
		"NoNewPrivileges":          "yes",
		"ProtectSystem":            "strict",
		"ProtectHome":              "yes",
		"PrivateTmp":               "yes",
		"CapabilityBoundingSet":    "",
		"EnvironmentFile":          "/etc/meshgw/meshgw.env",
		"ExecReload":               "/bin/kill -HUP $MAINPID",
	}
	for k, v := range want {
		got, ok := u.service[k]
		if !ok || got[len(got)-1] != v {
			t.Errorf("[Service] %s=%v, want %q", k, got, v)
		}
	}
	if u.env["MESHGW_STATE_DIR"] != "%S/meshgw" {
		t.Errorf("MESHGW_STATE_DIR=%q; want %%S/meshgw, the StateDirectory", u.env["MESHGW_STATE_DIR"])
	}
	if u.service["User"] == nil || u.service["User"][0] == "root" {
		t.Errorf("User=%v; want an unprivileged user", u.service["User"])
	}
}
