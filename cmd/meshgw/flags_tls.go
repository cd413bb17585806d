package main

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/certs"
)

// tlsFlags are the control plane's security (DESIGN.md section 12): mutual TLS for raft and
// gRPC, HTTPS for the main listener, and the secure-by-default rule. A gateway whose raft or
// gRPC listener binds beyond loopback runs TLS or says --insecure, else it exits 2.
type tlsFlags struct {
	cert, key, ca string
	http          bool
	verifyNodeID  bool
	insecure      bool

	cluster *clusterFlags // where raft and gRPC bind
	nodeID  *string       // --node-id, checked against the certificate with --tls-verify-node-id

	store *certs.Store // the files, loaded by validate when TLS is on
}

func (f *tlsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "PEM certificate of this gateway (meshctl cert create-node); with --tls-key and --tls-ca, raft and gRPC run mutual TLS")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.ca, "tls-ca", "", "PEM certificate of the cluster's CA (meshctl cert create-ca): every peer's certificate must chain to it")
	fs.BoolVar(&f.http, "tls-http", false, "serve the admin API and the data plane over HTTPS with --tls-cert (a client certificate of the CA opens the admin API)")
	fs.BoolVar(&f.verifyNodeID, "tls-verify-node-id", false, "require that certificates name their gateway's node id (common name or subject alternative name), so that no gateway can speak for another")
	fs.BoolVar(&f.insecure, "insecure", false, "allow raft and gRPC in plaintext beyond loopback, for trusted networks only (logged at WARN and shown by /status)")
}

// enabled reports whether raft and gRPC run mutual TLS.
func (f *tlsFlags) enabled() bool { return f.store != nil }

func (f *tlsFlags) validate() error {
	given := map[string]string{"--tls-cert": f.cert, "--tls-key": f.key, "--tls-ca": f.ca}
	var set, missing []string
	for _, name := range []string{"--tls-cert", "--tls-key", "--tls-ca"} {
		if given[name] != "" {
			set = append(set, name)
		} else {
			missing = append(missing, name)
		}
	}
	switch {
	case len(set) > 0 && f.insecure:
		return usagef("--insecure turns TLS off, and %s turn it on: give one or the other", strings.Join(set, ", "))
	case len(set) > 0 && len(missing) > 0:
		return usagef("--tls-cert, --tls-key and --tls-ca go together: %s missing", strings.Join(missing, ", "))
	case len(set) == 0 && f.http:
		return usagef("--tls-http needs --tls-cert, --tls-key and --tls-ca")
	case len(set) == 0 && f.verifyNodeID:
		return usagef("--tls-verify-node-id needs --tls-cert, --tls-key and --tls-ca")
	}
	if len(set) == 0 {
		if exposed := f.exposed(); exposed != "" && !f.insecure {
			return usagef("%s without TLS: give --tls-cert, --tls-key and --tls-ca (files from `meshctl cert`), or --insecure to allow plaintext on a trusted network",
				exposed)
		}
		return nil
	}
	store, err := certs.Load(certs.Files{Cert: f.cert, Key: f.key, CA: f.ca})
	if err != nil {
		return usagef("%v", err)
	}
	f.store = store
	if f.nodeID != nil && *f.nodeID != "" {
		return f.checkNodeID(*f.nodeID)
	}
	return nil
}

// checkNodeID refuses, with --tls-verify-node-id, a certificate that does not name id: peers
// would refuse every request this gateway sends.
func (f *tlsFlags) checkNodeID(id string) error {
	if !f.verifyNodeID || f.store == nil || certs.NamesID(f.store.Leaf(), id) {
		return nil
	}
	return usagef("--tls-verify-node-id: --tls-cert %s names %s, not the node id %q (make one with `meshctl cert create-node %s`)",
		f.cert, strings.Join(certs.Names(f.store.Leaf()), ", "), id, id)
}

// exposed says which listeners of raft and gRPC bind beyond loopback, and where ("" when
// neither does).
func (f *tlsFlags) exposed() string {
	raft, rpc := f.cluster.raftBind(), f.cluster.rpcBind()
	switch out, in := isLoopback(raft), isLoopback(rpc); {
	case out && in:
		return ""
	case raft == rpc:
		return "raft and gRPC would listen on " + raft
	case !out && !in:
		return fmt.Sprintf("raft would listen on %s and gRPC on %s", raft, rpc)
	case !out:
		return "raft would listen on " + raft
	}
	return "gRPC would listen on " + rpc
}

// warning is the line logged at start and shown by /status under --insecure ("" otherwise).
func (f *tlsFlags) warning() string {
	if !f.insecure {
		return ""
	}
	w := "raft and gRPC run without TLS (--insecure): their traffic, api_keys included, is in the clear, and any process on a mesh member's host may write to raft"
	if exposed := f.exposed(); exposed != "" {
		w += "; " + strings.Replace(exposed, "would listen", "listen", 1)
	}
	return w
}

// isLoopback reports whether a bind host is a loopback address (localhost included).
func isLoopback(host string) bool {
	ip := net.ParseIP(ipOf(host))
	return ip != nil && ip.IsLoopback()
}

// standalone reports whether this gateway expects no peers: no --join, no --bootstrap-expect,
// and no advertised address beyond loopback (--mesh-advertise-host, --raft-advertise). Its
// mesh, raft and gRPC listeners then bind loopback, whatever --host says.
func (f *clusterFlags) standalone() bool {
	if f.clustered() {
		return false
	}
	hosts := []string{f.meshAdvertiseHost}
	if f.state != nil && f.state.raftAdvertise != "" {
		host, _, _ := net.SplitHostPort(f.state.raftAdvertise)
		hosts = append(hosts, host)
	}
	return !slices.ContainsFunc(hosts, func(h string) bool { return h != "" && !isLoopback(h) })
}

// controlHost is where a listener of the control plane (mesh, raft, gRPC) binds: explicit when
// its flag is set; else --host, kept on loopback when the gateway is standalone.
func (f *clusterFlags) controlHost(explicit string) string {
	if explicit != "" {
		return ipOf(explicit)
	}
	host := ipOf(f.gw.host)
	if f.standalone() && !isLoopback(host) {
		return "127.0.0.1"
	}
	return host
}

// raftBind is raft's bind address (raft has no host flag of its own).
func (f *clusterFlags) raftBind() string { return f.controlHost("") }
