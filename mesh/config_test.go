package mesh

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestStartRejectsBadConfig(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQ=" // base64 of 20 bytes: a wrong AES key length
	tests := []struct {
		name string
		edit func(*Config)
		want string // in the error
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }, "--node-id"},
		{"bad profile", func(c *Config) { c.Profile = "fast" }, "--mesh-profile"},
		{"key not base64", func(c *Config) { c.EncryptKey = "not base64!" }, "--mesh-encrypt-key"},
		{"key of 20 bytes", func(c *Config) { c.EncryptKey = secret }, "--mesh-encrypt-key"},
		{"unspecified bind without advertise", func(c *Config) { c.BindAddr = "0.0.0.0" }, "--mesh-advertise-host"},
		{"default bind without advertise", func(c *Config) { c.BindAddr = "" }, "--mesh-advertise-host"},
		{"unspecified advertise", func(c *Config) { c.AdvertiseAddr = "::" }, "--mesh-advertise-host"},
		{"bind not an IP", func(c *Config) { c.BindAddr = "localhost" }, "not an IP"},
		{"port out of range", func(c *Config) { c.BindPort = 70000 }, "--mesh-port"},
		{"advertise port out of range", func(c *Config) { c.AdvertisePort = -1 }, "port"},
		{"meta names another node", func(c *Config) { c.Meta.NodeID = "other" }, "differs"},
		{"meta leaving", func(c *Config) { c.Meta.Leaving = true }, "Leaving"},
		{"meta too large", func(c *Config) {
			c.Meta.Region, c.Meta.Color, c.Meta.Version = strings.Repeat("r", 200), strings.Repeat("c", 200), strings.Repeat("v", 200)
		}, "limit"},
		{"negative timeout", func(c *Config) { c.UpdateTimeout = -time.Second }, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{NodeID: "n1", BindAddr: "127.0.0.1", Profile: ProfileLocal}
			tt.edit(&cfg)
			m, err := Start(cfg)
			if err == nil {
				_ = m.Shutdown()
				t.Fatal("started")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming %q", msg, tt.want)
			}
			if strings.Contains(msg, secret) || strings.Contains(msg, "not base64!") {
				t.Errorf("error %q echoes the key", msg)
			}
		})
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStartBindsInUsePort(t *testing.T) {
	a := start(t, testConfig("a", nil))
	cfg := Config{NodeID: "b", BindAddr: "127.0.0.1", BindPort: portOf(t, a.Addr()), Profile: ProfileLocal, Logger: nil}
	m, err := Start(cfg)
	if err == nil {
		_ = m.Shutdown()
		t.Fatal("two nodes bound one port")
	}
	var le *ListenError
	if !errors.As(err, &le) || le.Addr != a.Addr() || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %q, want a *ListenError for %s, address in use", err, a.Addr())
	}
}

func TestProfiles(t *testing.T) {
	for _, p := range []string{"", ProfileLAN, ProfileWAN, ProfileLocal} {
		if _, err := profileConfig(p); err != nil {
			t.Fatalf("%q: %v", p, err)
		}
	}
	wan, _ := profileConfig(ProfileWAN)
	if def := memberlist.DefaultWANConfig(); wan.ProbeInterval != def.ProbeInterval || wan.GossipInterval != def.GossipInterval ||
		wan.PushPullInterval != def.PushPullInterval || wan.UDPBufferSize != def.UDPBufferSize {
		t.Error("the wan profile is not memberlist's WAN defaults")
	}
	// Failure detection and the packet size stay memberlist's on real networks.
	lan, _ := profileConfig(ProfileLAN)
	if def := memberlist.DefaultLANConfig(); lan.ProbeInterval != def.ProbeInterval || lan.ProbeTimeout != def.ProbeTimeout ||
		lan.SuspicionMult != def.SuspicionMult || lan.UDPBufferSize != def.UDPBufferSize {
		t.Error("the lan profile changed failure detection or the packet size")
	}
}

func TestAdvertiseHostName(t *testing.T) {
	cfg := testConfig("n1", nil)
	cfg.AdvertiseAddr = "localhost"
	m := start(t, cfg)
	if !strings.HasPrefix(m.Addr(), "127.0.0.1:") && !strings.HasPrefix(m.Addr(), "[::1]:") {
		t.Errorf("advertised %s for localhost", m.Addr())
	}
}
