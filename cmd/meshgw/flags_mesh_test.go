package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestClusterFlags(t *testing.T) {
	const key = "c2VjcmV0LWtleS0xNi1ieQ==" // 16 bytes
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, o *options)
	}{
		{"defaults", nil, nil, "", func(t *testing.T, o *options) {
			c := o.cluster
			if c.meshPort != 39527 || c.rpcPort != 39529 || c.meshProfile != "lan" || c.raftVoters != 0 || c.deadVoterGrace != 60 ||
				c.reconcileInterval != 30 || c.bootstrapExpect != 0 || len(c.join) != 0 || c.clustered() {
				t.Errorf("defaults %+v", c)
			}
			if c.meshBind() != "127.0.0.1" || c.raftBind() != "127.0.0.1" || c.rpcBind() != "127.0.0.1" || c.advertiseHost(c.meshBind()) != "127.0.0.1" {
				t.Errorf("a mesh of one binds mesh %s, raft %s, gRPC %s, advertises %s; want loopback",
					c.meshBind(), c.raftBind(), c.rpcBind(), c.advertiseHost(c.meshBind()))
			}
		}},
		{"join repeatable, comma-separated, default port", []string{"--host", "10.0.0.1", "--join", "10.0.0.2,10.0.0.3:4000", "--join=gw4:39600", "--insecure"}, nil, "", func(t *testing.T, o *options) {
			want := "10.0.0.2:39527 10.0.0.3:4000 gw4:39600"
			if got := strings.Join(o.cluster.join, " "); got != want || !o.cluster.clustered() {
				t.Errorf("join %q, want %q", got, want)
			}
			if h := o.cluster.advertiseHost(o.cluster.meshBind()); h != "10.0.0.1" {
				t.Errorf("advertise %s, want the bind address", h)
			}
		}},
		{"env", nil, map[string]string{"MESHGW_JOIN": "127.0.0.1:1", "MESHGW_BOOTSTRAP_EXPECT": "3", "MESHGW_MESH_PROFILE": "local",
			"MESHGW_MESH_ADVERTISE_HOST": "gw1.internal", "MESHGW_MESH_ENCRYPT_KEY": key, "MESHGW_INSECURE": "true"}, "", func(t *testing.T, o *options) {
			c := o.cluster
			if len(c.join) != 1 || c.bootstrapExpect != 3 || c.meshProfile != "local" || c.meshEncryptKey != key || c.advertiseHost("0.0.0.0") != "gw1.internal" {
				t.Errorf("env not applied: %+v", c)
			}
		}},
		{"join needs an advertise host on 0.0.0.0", []string{"--join", "10.0.0.2"}, nil, "--mesh-advertise-host is required", nil},
		{"bootstrap-expect too", []string{"--bootstrap-expect", "3"}, nil, "--mesh-advertise-host is required", nil},
		{"rpc host on 0.0.0.0 too", []string{"--host", "127.0.0.1", "--rpc-host", "0.0.0.0", "--join", "127.0.0.1:1"}, nil, "--mesh-advertise-host is required", nil},
		{"bad join", []string{"--host", "127.0.0.1", "--join", "10.0.0.2:x"}, nil, `--join "10.0.0.2:x" is not host[:port]`, nil},
		{"bad profile", []string{"--mesh-profile", "fast"}, nil, `--mesh-profile "fast" is not one of lan, wan, local`, nil},
		{"bad mesh port", []string{"--mesh-port", "70000"}, nil, "--mesh-port 70000 is not a port", nil},
		{"bad rpc port", nil, map[string]string{"MESHGW_RPC_PORT": "-1"}, "--rpc-port -1 is not a port", nil},
		{"negative expect", []string{"--bootstrap-expect", "-1"}, nil, "--bootstrap-expect -1 is below the minimum 0", nil},
		{"voters", []string{"--raft-voters", "-1"}, nil, "--raft-voters -1 is below the minimum 0", nil},
		{"an explicit voter count", []string{"--raft-voters", "3"}, nil, "", func(t *testing.T, o *options) {
			if o.cluster.raftVoters != 3 {
				t.Errorf("--raft-voters 3 gave %d", o.cluster.raftVoters)
			}
		}},
		{"grace", []string{"--dead-voter-grace-secs", "0"}, nil, "--dead-voter-grace-secs 0 is below the minimum 1", nil},
		{"interval", []string{"--reconcile-interval-secs", "0"}, nil, "--reconcile-interval-secs 0 is below the minimum 1", nil},
		{"bad bind host", []string{"--mesh-bind-host", "eth0"}, nil, `--mesh-bind-host "eth0" is not an IP address`, nil},
		{"unspecified advertise", []string{"--mesh-advertise-host", "0.0.0.0"}, nil, "unspecified address", nil},
		{"key not base64", []string{"--mesh-encrypt-key", "not base64!"}, nil, "--mesh-encrypt-key is not valid base64", nil},
		{"key length", []string{"--mesh-encrypt-key", "c2hvcnQ="}, nil, "--mesh-encrypt-key decodes to 5 bytes", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, tt.env)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				tt.check(t, o)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestBadKeyNeverEchoed: exit 2 with one line naming the flag, without the value.
func TestBadKeyNeverEchoed(t *testing.T) {
	const secret = "zzsecretzz-not-base64"
	var stderr bytes.Buffer
	code := run([]string{"--mesh-encrypt-key", secret}, env(nil), io.Discard, &stderr)
	if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "--mesh-encrypt-key") ||
		strings.Contains(stderr.String(), "zzsecretzz") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestOwnerFailoverGraceFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    int
		wantErr string
	}{
		{"default", nil, nil, 10, ""},
		{"flag", []string{"--owner-failover-grace-secs", "2"}, nil, 2, ""},
		{"env", nil, map[string]string{"MESHGW_OWNER_FAILOVER_GRACE_SECS": "7"}, 7, ""},
		{"zero", []string{"--owner-failover-grace-secs", "0"}, nil, 0, "--owner-failover-grace-secs 0 is below the minimum 1"},
		{"bad env", nil, map[string]string{"MESHGW_OWNER_FAILOVER_GRACE_SECS": "-3"}, 0, "--owner-failover-grace-secs -3 is below the minimum 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(tt.args, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.cluster.ownerFailoverGrace != tt.want || o.cluster.ownerFailoverGraceDuration().Seconds() != float64(tt.want) {
				t.Errorf("grace %d, want %d", o.cluster.ownerFailoverGrace, tt.want)
			}
		})
	}
	var stderr bytes.Buffer
	if code := run([]string{"--owner-failover-grace-secs", "ten"}, env(nil), io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "owner-failover-grace-secs") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
