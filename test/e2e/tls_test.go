package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/certs"
	"github.com/meshgw/meshgw/test/harness"
)

// securityDoc holds the commands of docs/security.md that the TLS tests run: by section, the
// logical lines (continuations joined) of its sh blocks.
type securityDoc map[string][]string

func readSecurityDoc(t *testing.T) securityDoc {
	t.Helper()
	f, err := os.Open(filepath.Join(harness.ModuleRoot(), "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc := securityDoc{}
	section, inBlock, cont := "", false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case strings.HasPrefix(line, "```"):
			inBlock = line == "```sh"
		case inBlock && !strings.HasPrefix(strings.TrimSpace(line), "#"):
			cont += strings.TrimSpace(line)
			if strings.HasSuffix(cont, "\\") {
				cont = strings.TrimSuffix(cont, "\\") + " "
				continue
			}
			if cont != "" {
				doc[section] = append(doc[section], cont)
			}
			cont = ""
		}
	}
	return doc
}

// commands returns the lines of section that start with prefix.
func (d securityDoc) commands(t *testing.T, section, prefix string) [][]string {
	t.Helper()
	var out [][]string
	for _, l := range d[section] {
		if strings.HasPrefix(l, prefix) {
			out = append(out, strings.Fields(l))
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/security.md, section %q: no %q command", section, prefix)
	}
	return out
}

// docHost maps the documentation's hosts to loopback.
var docHost = regexp.MustCompile(`^10\.0\.0\.\d+$`)

// runMeshctl runs the documentation's meshctl command in dir, its hosts on loopback.
func runMeshctl(t *testing.T, b harness.Bins, dir string, args []string) string {
	t.Helper()
	args = append([]string(nil), args[1:]...)
	for i, a := range args {
		args[i] = docHost.ReplaceAllString(a, "127.0.0.1")
	}
	cmd := exec.Command(b.Meshctl, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("meshctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tlsFlagsOf takes the node id and the TLS flags of one of the documentation's meshgw lines,
// paths made absolute in dir.
func tlsFlagsOf(words []string, dir string) (id string, flags []string) {
	for i := 0; i < len(words); i++ {
		switch w := words[i]; {
		case w == "--node-id" && i+1 < len(words):
			id = words[i+1]
		case w == "--tls-verify-node-id" || w == "--tls-http":
			flags = append(flags, w)
		case strings.HasPrefix(w, "--tls-") && i+1 < len(words):
			flags = append(flags, w, filepath.Join(dir, words[i+1]))
			i++
		}
	}
	return id, flags
}

// TestTLSCluster: three gateways started with the certificates and flags of docs/security.md
// form a cluster over mutual TLS on loopback, and a write sent to a follower is forwarded to
// the leader. Clients without a certificate, with a certificate of another CA, in plaintext,
// and plaintext HTTP/2 get nothing from the raft and gRPC ports. A certificate rotated as the
// document says is served after a SIGHUP, and the cluster keeps taking writes.
func TestTLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	doc := readSecurityDoc(t)
	work := t.TempDir()
	for _, c := range doc.commands(t, "A three-host cluster", "meshctl cert ") {
		runMeshctl(t, b, work, c)
	}
	engine := harness.StartEngine(t, b, "engine-tls")
	var gws []*clusterGW
	for i, line := range doc.commands(t, "A three-host cluster", "meshgw ") {
		id, flags := tlsFlagsOf(line, work)
		if id == "" || len(flags) < 6 {
			t.Fatalf("docs/security.md: a meshgw line without --node-id or the TLS flags: %v", line)
		}
		g := newClusterGW(t, id, flags...)
		if i == 0 {
			g.start(t, b)
		} else {
			g.start(t, b, gws[0].meshAddr())
		}
		gws = append(gws, g)
	}
	if len(gws) != 3 {
		t.Fatalf("docs/security.md starts %d gateways, want 3", len(gws))
	}
	leaderID := waitFormed(t, gws...)
	var follower, leader *clusterGW
	for _, g := range gws {
		if g.id == leaderID {
			leader = g
		} else if follower == nil {
			follower = g
		}
	}
	// Forwarded to the leader and fleet-acknowledged by every gateway, all over mutual TLS.
	var w workerAnswer
	body := newAdmin(follower.Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, engine.URL))
	if err := json.Unmarshal([]byte(body), &w); err != nil || w.FleetAck == nil || len(w.FleetAck.Acked) != 3 || len(w.FleetAck.Lagging) != 0 {
		t.Errorf("a write through %s: %v %s; want acknowledged by all three", follower.id, err, body)
	}
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" lists the worker written through "+follower.id, func() bool {
			found, _ := hasWorker(t, g, engine.URL)
			return found
		})
	}
	for _, g := range gws { // peers with their own certificates are never refused, names pinned
		if strings.Contains(g.Output(), "refused a call to the cluster's gRPC listener") {
			t.Errorf("%s refused a peer's call:\n%s", g.id, g.Output())
		}
	}
	var st struct {
		Security struct{ TLS, Insecure bool } `json:"security"`
	}
	if !getJSON(t, leader, "/status", &st) || !st.Security.TLS || st.Security.Insecure {
		t.Errorf("/status security %+v, want tls", st.Security)
	}

	// A CA nobody trusts, with a node certificate of the same name.
	other := filepath.Join(work, "other")
	runMeshctl(t, b, work, []string{"meshctl", "cert", "create-ca", "--dir", other})
	runMeshctl(t, b, work, []string{"meshctl", "cert", "create-node", leader.id, "--host", "127.0.0.1", "--dir", other})
	stranger := loadStore(t, other, leader.id)
	for _, port := range []struct {
		name string
		port int
	}{{"raft", leader.raftPort}, {"gRPC", leader.rpcPort}} {
		addr := "127.0.0.1:" + strconv.Itoa(port.port)
		t.Run(port.name+" refuses a client without a certificate", func(t *testing.T) {
			expectRefused(t, addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		})
		t.Run(port.name+" refuses a certificate of another CA", func(t *testing.T) {
			cfg := stranger.DialConfig()
			cfg.NextProtos = []string{"h2"}
			expectRefused(t, addr, cfg)
		})
	}
	t.Run("plaintext HTTP/2 to the gRPC port gets nothing", func(t *testing.T) {
		addr := "127.0.0.1:" + strconv.Itoa(leader.rpcPort)
		expectNoHTTP2(t, addr)
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = consensusv1.NewForwardClient(cc).Apply(ctx, &consensusv1.ApplyRequest{Entry: []byte{5}, From: "x"})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("a plaintext gRPC call: %v, want Unavailable", err)
		}
	})

	for _, line := range []string{"raft listener: refused a connection whose TLS handshake failed", "gRPC listener: refused a connection whose TLS handshake failed"} {
		if !strings.Contains(leader.Output(), line) {
			t.Errorf("%s does not log %q", leader.id, line)
		}
	}

	// Rotation, as the document says it: a new certificate, then SIGHUP.
	rot := doc.commands(t, "Rotating certificates", "meshctl cert create-node ")[0]
	rotated := follower
	for _, g := range gws {
		if g.id == rot[3] {
			rotated = g
		}
	}
	if !strings.Contains(strings.Join(doc["Rotating certificates"], "\n"), "kill -HUP") {
		t.Fatal("docs/security.md: the rotation does not send SIGHUP")
	}
	before := servedSerial(t, "127.0.0.1:"+strconv.Itoa(rotated.raftPort), loadStore(t, filepath.Join(work, "certs"), leader.id))
	runMeshctl(t, b, work, rot)
	if err := rotated.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 10*time.Second, rotated.id+" logs the reload", func() bool {
		return strings.Contains(rotated.Output(), "SIGHUP: reloaded the TLS certificate")
	})
	after := servedSerial(t, "127.0.0.1:"+strconv.Itoa(rotated.raftPort), loadStore(t, filepath.Join(work, "certs"), leader.id))
	if want := loadStore(t, filepath.Join(work, "certs"), rotated.id).Leaf().SerialNumber.String(); after != want || after == before {
		t.Errorf("after SIGHUP %s serves serial %s (before %s), want the new %s", rotated.id, after, before, want)
	}
	if code, body := newAdmin(rotated.Gateway, "").do(t, "PUT", "/workers/"+url.PathEscape(engine.URL), `{"disabled":true,"reason":"after rotation"}`); code != 200 {
		t.Errorf("a write through %s after its rotation: %d %s", rotated.id, code, body)
	}
}

func loadStore(t *testing.T, dir, id string) *certs.Store {
	t.Helper()
	cert, key := certs.NodeFiles(dir, id)
	s, err := certs.Load(certs.Files{Cert: cert, Key: key, CA: filepath.Join(dir, certs.CACertFile)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// servedSerial is the serial of the certificate a node's listener at addr serves to a peer.
func servedSerial(t *testing.T, addr string, peer *certs.Store) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, peer.DialConfig())
	if err != nil {
		t.Fatalf("a peer's TLS connection to %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// expectRefused dials addr with cfg and fails unless the server refuses: the handshake fails,
// or (TLS 1.3 judges the client's certificate after the client finished) the first read fails
// without a timeout and without data.
func expectRefused(t *testing.T, addr string, cfg *tls.Config) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	switch {
	case n > 0:
		t.Fatalf("%s answered %d bytes to a client it should refuse", addr, n)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("%s kept the connection of a client it should refuse open", addr)
	case err == nil:
		t.Fatalf("%s: no refusal", addr)
	}
}

// expectNoHTTP2 speaks plaintext HTTP/2 (the preface and an empty SETTINGS frame) to addr and
// fails if a SETTINGS frame comes back or the connection stays open.
func expectNoHTTP2(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)); err != nil {
		return // already closed
	}
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s kept a plaintext HTTP/2 connection open (read %d bytes)", addr, len(got))
	}
	if len(got) >= 9 && got[3] == 4 {
		t.Fatalf("%s answered plaintext HTTP/2 with a SETTINGS frame", addr)
	}
}

// TestInsecureRefusedByDefault: a gateway with --join whose raft binds 0.0.0.0 without TLS
// exits 2 with one line naming the TLS flags and --insecure, before it listens. With
// --insecure a clustered gateway starts and says so, in its log and in /status.
func TestInsecureRefusedByDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	p := harness.Start(t, "exposed", b.Meshgw, []string{"--host", "0.0.0.0", "--port", strconv.Itoa(harness.FreePort(t)),
		"--join", "127.0.0.1:1", "--mesh-advertise-host", "127.0.0.1", "--state-dir", t.TempDir(),
		"--mesh-port", "0", "--raft-port", "0", "--rpc-port", "0", "--prometheus-port", "0"}, nil, nil)
	code, err := p.Wait(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := p.Output()
	if code != 2 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "meshgw: raft and gRPC would listen on 0.0.0.0 without TLS") {
		t.Fatalf("exit %d, output %q; want 2 and one line", code, out)
	}
	for _, flag := range []string{"--tls-cert", "--tls-key", "--tls-ca", "--insecure"} {
		if !strings.Contains(out, flag) {
			t.Errorf("the line does not name %s: %q", flag, out)
		}
	}

	first := newClusterGW(t, "in1")
	first.start(t, b)
	g := newClusterGW(t, "in2", "--insecure")
	g.start(t, b, first.meshAddr())
	if !regexp.MustCompile(`level=WARN msg="raft and gRPC run without TLS \(--insecure\)`).MatchString(g.Output()) {
		t.Errorf("no WARN line at start:\n%s", g.Output())
	}
	var st struct {
		Security struct {
			TLS, Insecure bool
			Warning       string
		} `json:"security"`
	}
	if !getJSON(t, g, "/status", &st) || st.Security.TLS || !st.Security.Insecure || !strings.Contains(st.Security.Warning, "--insecure") {
		t.Errorf("/status security %+v, want insecure with the warning", st.Security)
	}
	waitFormed(t, first, g)
}

// TestTLSHTTP: with --tls-http a gateway serves its data plane and admin API over HTTPS with
// its node certificate, and proxies a request that came over HTTPS to an http:// engine;
// meshctl reaches it with the CA and, as docs/security.md shows, a client certificate, which
// opens the admin API without the admin key.
func TestTLSHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	doc := readSecurityDoc(t)
	work := t.TempDir()
	for _, c := range doc.commands(t, "A three-host cluster", "meshctl cert ") {
		runMeshctl(t, b, work, c)
	}
	_, flags := tlsFlagsOf(doc.commands(t, "A three-host cluster", "meshgw ")[0], work)
	engine := harness.StartEngine(t, b, "engine-https")
	port := harness.FreePort(t)
	const key = "tls-http-admin-key"
	p := harness.Start(t, "https", b.Meshgw, append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--node-id", "gw1",
		"--state-dir", t.TempDir(), "--mesh-port", "0", "--raft-port", "0", "--rpc-port", "0", "--prometheus-port", "0",
		"--admin-api-key", key, "--tls-http", "--worker-urls", engine.URL}, flags...), nil, nil)
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(work, "certs", "ca.crt"))
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.crt: %v", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	harness.WaitFor(t, 20*time.Second, "the gateway is ready over HTTPS", func() bool {
		if p.Exited() {
			t.Fatalf("meshgw exited:\n%s", p.Output())
		}
		resp, err := client.Get(base + "/readiness")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if code, body, err := chat(client, base, "over https"); err != nil || code != http.StatusOK {
		t.Errorf("a chat completion over HTTPS: %d %v %s", code, err, body)
	}
	if harness.Get("http://127.0.0.1:"+strconv.Itoa(port)+"/liveness") == http.StatusOK {
		t.Error("the HTTPS listener answered plain HTTP")
	}
	line := doc.commands(t, "A three-host cluster", "meshctl --gateway https://")[0]
	for i, w := range line {
		if strings.HasPrefix(w, "https://") {
			line[i] = base
		}
	}
	if out := runMeshctl(t, b, work, line); !strings.Contains(out, "gw1") {
		t.Errorf("meshctl peers over HTTPS with a client certificate: %s", out)
	}
	cmd := exec.Command(b.Meshctl, "--gateway", base, "--tls-ca", filepath.Join(work, "certs", "ca.crt"), "workers", "list")
	cmd.Env = append(os.Environ(), "MESHCTL_ADMIN_KEY=")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "401") {
		t.Errorf("without a client certificate or the key: %v %s; want 401", err, out)
	}
	cmd = exec.Command(b.Meshctl, "--gateway", base, "--tls-ca", filepath.Join(work, "certs", "ca.crt"), "--admin-key", key, "workers", "list")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), strings.TrimPrefix(engine.URL, "http://")) {
		t.Errorf("with the key: %v %s", err, out)
	}
}
