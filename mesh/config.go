package mesh

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	// DefaultPort is --mesh-port's default, for TCP and UDP. Config.BindPort itself defaults to
	// 0 (a free port), which tests use.
	DefaultPort = 39527
	// DefaultBindAddr is where memberlist listens when Config.BindAddr is empty.
	DefaultBindAddr = "0.0.0.0"
	// DefaultUpdateTimeout bounds how long SetMeta waits for memberlist to gossip the new
	// metadata.
	DefaultUpdateTimeout = 5 * time.Second
	// DefaultRetention is how long a dead, left or foreign peer stays in Members.
	DefaultRetention = 5 * time.Minute
)

// Profiles name a set of memberlist timings (--mesh-profile); see profile.go.
const (
	ProfileLAN   = "lan"
	ProfileWAN   = "wan"
	ProfileLocal = "local"
)

// Config configures a Mesh. The zero value of every optional field is a working default.
type Config struct {
	// NodeID is --node-id: the memberlist node name and Meta.NodeID. It must be unique in the
	// mesh and stay the same across restarts. Required.
	NodeID string

	// BindAddr is the IP memberlist listens on, TCP and UDP. Default DefaultBindAddr.
	BindAddr string
	// BindPort is the port memberlist listens on, TCP and UDP. 0 (the default) lets the system
	// pick a free port, as tests do; the gateway passes --mesh-port (DefaultPort).
	BindPort int
	// Listener is the mesh's sockets, bound by Listen beforehand; its address replaces BindAddr
	// and BindPort. Start takes it over: Shutdown closes it, and so does a Start that fails.
	// Nil (the default): Start binds BindAddr:BindPort itself.
	Listener *Listener

	// AdvertiseAddr is the address peers use to reach this node: an IP, or a host name that
	// resolves to one (--mesh-advertise-host). Required when BindAddr is unspecified (0.0.0.0
	// or ::); default BindAddr otherwise.
	AdvertiseAddr string
	// AdvertisePort is the port peers use. Default: the bound port.
	AdvertisePort int

	// Profile is --mesh-profile: ProfileLAN (the default), ProfileWAN or ProfileLocal.
	Profile string

	// EncryptKey is --mesh-encrypt-key: the base64 encoding of a 16, 24 or 32-byte AES key, or
	// several separated by commas or newlines, the primary first (ParseEncryptKeys).
	// When set, all gossip is encrypted and authenticated, and peers without the key can neither
	// join nor be heard. Empty means no encryption.
	EncryptKey string

	// Meta is the metadata the node starts with. Its NodeID is set to NodeID, and Leaving must
	// be false.
	Meta Meta

	// UpdateTimeout bounds how long SetMeta waits for memberlist to gossip new metadata.
	// Default DefaultUpdateTimeout.
	UpdateTimeout time.Duration

	// Retention is how long a dead, left or foreign peer stays listed by Members after it was
	// last seen (memberlist itself forgets a dead node after its GossipToTheDeadTime). Default
	// DefaultRetention.
	Retention time.Duration

	// Logger receives the mesh's lines and memberlist's own. Nil means slog.Default().
	Logger *slog.Logger

	// Registerer receives the meshgw_mesh_* metrics. Nil means they are not registered.
	Registerer prometheus.Registerer

	// BulletinCoalesce is the least time between two bulletins of one worker. Default
	// DefaultCoalesce (100 ms).
	BulletinCoalesce time.Duration
	// BulletinBeat is how often an owner of published workers gossips its Beat. Default
	// DefaultBeat (1 s).
	BulletinBeat time.Duration

	// Tune, if set, adjusts memberlist's configuration after the profile and this Config have
	// been applied (tests shorten timers with it). Name, the delegates and Logger are the
	// mesh's and must be left alone.
	Tune func(*memberlist.Config)
}

// deadNodeReclaimTime lets a node that restarts on a new address (a pod rescheduled, a gateway
// moved to another host) take its name back from its dead entry at once. memberlist's default
// (0) refuses any other address for a name until the dead entry is forgotten after
// GossipToTheDeadTime (30 s on a LAN), logging "Conflicting address" at every message
// meanwhile. A name whose entry is alive or suspect is never taken over: that is a second
// gateway with the same node id, which Join refuses (conflict.go).
const deadNodeReclaimTime = time.Nanosecond

// errFlag is a configuration error naming the flag an operator sets.
func errFlag(flag, format string, args ...any) error {
	return fmt.Errorf("mesh: %s: %s", flag, fmt.Sprintf(format, args...))
}

// memberlistConfig validates c and builds memberlist's configuration from its profile, without
// the delegates and logger, which Start sets.
func (c *Config) memberlistConfig() (*memberlist.Config, error) {
	if c.NodeID == "" {
		return nil, errFlag("--node-id", "required")
	}
	if c.Meta.NodeID != "" && c.Meta.NodeID != c.NodeID {
		return nil, fmt.Errorf("mesh: Meta.NodeID %q differs from NodeID %q", c.Meta.NodeID, c.NodeID)
	}
	if c.Meta.Leaving {
		return nil, errors.New("mesh: Meta.Leaving is set by Leave, not by the configuration")
	}
	mc, err := profileConfig(c.Profile)
	if err != nil {
		return nil, err
	}
	mc.Name = c.NodeID
	mc.DeadNodeReclaimTime = deadNodeReclaimTime

	bind, port := c.BindAddr, c.BindPort
	if c.Listener != nil {
		bind, port = c.Listener.ip, c.Listener.port
	}
	if bind == "" {
		bind = DefaultBindAddr
	}
	ip := net.ParseIP(bind)
	if ip == nil {
		return nil, errFlag("--host", "mesh bind address %q is not an IP address", bind)
	}
	if port < 0 || port > 65535 {
		return nil, errFlag("--mesh-port", "%d is not a port (0-65535)", port)
	}
	mc.BindAddr, mc.BindPort = bind, port

	adv := c.AdvertiseAddr
	if adv == "" {
		if ip.IsUnspecified() {
			return nil, errFlag("--mesh-advertise-host", "required when the mesh binds %s: peers need an address to reach this node", bind)
		}
		adv = bind
	}
	if mc.AdvertiseAddr, err = resolveAdvertise(adv); err != nil {
		return nil, err
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		return nil, errFlag("--mesh-advertise-host", "advertised port %d is not a port (0-65535)", c.AdvertisePort)
	}
	mc.AdvertisePort = c.AdvertisePort // 0: Start sets the port it bound

	if c.EncryptKey != "" {
		keys, err := ParseEncryptKeys(c.EncryptKey)
		if err != nil {
			return nil, fmt.Errorf("mesh: %w", err)
		}
		if mc.Keyring, err = newKeyring(keys); err != nil {
			return nil, errFlag("--mesh-encrypt-key", "not a usable AES key")
		}
	}
	if c.UpdateTimeout < 0 || c.Retention < 0 {
		return nil, errors.New("mesh: UpdateTimeout and Retention must not be negative")
	}
	return mc, nil
}

// ParseEncryptKey decodes --mesh-encrypt-key: the base64 of a 16, 24 or 32-byte AES key. Its
// errors name the flag and never include the key; cmd/meshgw checks the flag with it.
func ParseEncryptKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("--mesh-encrypt-key is not valid base64 (want the base64 of a 16, 24 or 32-byte AES key, e.g. from `openssl rand -base64 32`)")
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("--mesh-encrypt-key decodes to %d bytes; want 16, 24 or 32 (AES-128, -192 or -256)", len(key))
}

// resolveAdvertise returns adv as an IP string, resolving a host name (memberlist accepts
// only IPs).
func resolveAdvertise(adv string) (string, error) {
	if ip := net.ParseIP(adv); ip != nil {
		if ip.IsUnspecified() {
			return "", errFlag("--mesh-advertise-host", "%s is not an address peers can reach", adv)
		}
		return adv, nil
	}
	ips, err := net.LookupIP(adv)
	if err != nil || len(ips) == 0 {
		return "", errFlag("--mesh-advertise-host", "%q is neither an IP address nor a host name that resolves", adv)
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip.String(), nil
		}
	}
	return ips[0].String(), nil
}
