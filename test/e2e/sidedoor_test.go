package e2e

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/clusterkey"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/test/harness"
	"github.com/meshgw/meshgw/worker"
)

// The control plane's side doors: with --admin-api-key, a local process that holds neither the
// key nor a node certificate changes nothing through the gRPC port (forwarded writes), raft's
// port (a forged AppendEntries) or the mesh, on a gateway alone or in a loopback cluster;
// without a key, loopback is trusted as documented (docs/security.md, "The local threat
// model").

const sideDoorKey = "side-door-admin-key"

// statusTerm is raft's term as GET /status gives it.
func statusTerm(t *testing.T, a *adminClient) (term, applied uint64) {
	t.Helper()
	var st struct {
		Raft struct {
			Term         uint64 `json:"term"`
			AppliedIndex uint64 `json:"applied_index"`
		} `json:"raft"`
	}
	if !getJSONWith(t, a, "/status", &st) {
		t.Fatal("GET /status did not answer")
	}
	return st.Raft.Term, st.Raft.AppliedIndex
}

// forgeApply sends one forwarded write to the gRPC port at addr, as a process that is not a peer
// does, with creds (nil: none), and returns the leader's answer or the refusal.
func forgeApply(t *testing.T, addr string, creds credentials, c fsm.Command) (consensusv1.ApplyStatus, error) {
	t.Helper()
	entry, err := fsm.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if creds != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(creds))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := consensusv1.NewForwardClient(cc).Apply(ctx, &consensusv1.ApplyRequest{Entry: entry, From: "attacker"})
	if err != nil {
		return 0, err
	}
	return resp.GetStatus(), nil
}

// credentials is the per-call credentials of a forged gRPC call.
type credentials = interface {
	GetRequestMetadata(context.Context, ...string) (map[string]string, error)
	RequireTransportSecurity() bool
}

// forgeAppend sends raft's port at addr an AppendEntries of a higher term that carries c as the
// next entry and commits it, as a process that speaks raft's protocol can.
func forgeAppend(t *testing.T, addr string, term, last uint64, c fsm.Command) error {
	t.Helper()
	entry, err := fsm.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("attacker"), Addr: []byte(trans.LocalAddr())},
		Term:              term + 100,
		PrevLogEntry:      last,
		PrevLogTerm:       term,
		Entries:           []*raft.Log{{Index: last + 1, Term: term + 100, Type: raft.LogCommand, Data: entry}},
		LeaderCommitIndex: last + 1,
	}
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries("target", raft.ServerAddress(addr), req, &resp)
}

// disableAs is a forged disable of worker id, signed by.
func disableAs(id, by string) fsm.Command {
	yes := true
	return fsm.SetFlags{ID: worker.ID(id), Flags: fsm.FlagChange{Disabled: &yes, Reason: "forged", By: by, At: time.Now()}}
}

// expectUntouched fails when u's record on a was disabled or removed, or raft's term moved.
func expectUntouched(t *testing.T, a *adminClient, u string, term uint64) {
	t.Helper()
	rec, ok := a.list(t)[u]
	if !ok || rec.Disabled {
		t.Errorf("after the forged writes: record %+v (listed %v), want it enabled", rec, ok)
	}
	if now, _ := statusTerm(t, a); now != term {
		t.Errorf("raft's term went from %d to %d: a forged AppendEntries reached raft", term, now)
	}
}

func rpcAddr(g *clusterGW) string  { return "127.0.0.1:" + strconv.Itoa(g.rpcPort) }
func raftAddr(g *clusterGW) string { return "127.0.0.1:" + strconv.Itoa(g.raftPort) }

func TestSideDoorsStandaloneWithAdminKey(t *testing.T) {
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine")
	g := newClusterGW(t, "solo", "--admin-api-key", sideDoorKey, "--worker-urls", engine.URL)
	g.start(t, b)
	a := newAdmin(g.Gateway, sideDoorKey)
	harness.WaitFor(t, clusterBound, "the worker registered", func() bool { _, ok := a.list(t)[engine.URL]; return ok })
	id := a.list(t)[engine.URL].ID
	term, last := statusTerm(t, a)

	if st, err := forgeApply(t, rpcAddr(g), nil, disableAs(id, "attacker")); err == nil {
		t.Errorf("a forged SetFlags over --rpc-port: %v, want refused", st)
	}
	if st, err := forgeApply(t, rpcAddr(g), nil, fsm.Remove{ID: worker.ID(id)}); err == nil {
		t.Errorf("a forged Remove over --rpc-port: %v, want refused", st)
	}
	if st, err := forgeApply(t, rpcAddr(g), clusterkey.Derive("a guess").Credentials(), disableAs(id, "attacker")); err == nil {
		t.Errorf("a forged SetFlags with another key's proof: %v, want refused", st)
	}
	if err := forgeAppend(t, raftAddr(g), term, last, disableAs(id, "attacker")); err == nil {
		t.Error("a forged AppendEntries over raft's port was answered, want the connection refused")
	}
	expectUntouched(t, a, engine.URL, term)

	// The mesh: a process without the key cannot gossip with the gateway.
	if n, err := joinMesh(t, g.meshAddr()); err == nil {
		t.Errorf("a mesh member without the key joined %d gateway(s)", n)
	}
	expectRefusalsLogged(t, g)
}

// expectRefusalsLogged fails unless g logged the refusals of both ports, and never its key.
func expectRefusalsLogged(t *testing.T, g *clusterGW) {
	t.Helper()
	harness.WaitFor(t, clusterBound, g.id+" logs the refusals", func() bool {
		out := g.Output()
		return strings.Contains(out, "raft listener: refused a connection that did not prove the cluster key") &&
			strings.Contains(out, "the caller proved no cluster key")
	})
	if strings.Contains(g.Output(), sideDoorKey) {
		t.Errorf("%s logs its admin key", g.id)
	}
}

func TestSideDoorsLoopbackClusterWithAdminKey(t *testing.T) {
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine")
	g1 := newClusterGW(t, "sd1", "--admin-api-key", sideDoorKey, "--worker-urls", engine.URL)
	g1.start(t, b)
	g2 := newClusterGW(t, "sd2", "--admin-api-key", sideDoorKey)
	g2.start(t, b, g1.meshAddr())
	a1, a2 := newAdmin(g1.Gateway, sideDoorKey), newAdmin(g2.Gateway, sideDoorKey)
	harness.WaitFor(t, clusterBound, "both gateways list the worker", func() bool {
		_, ok1 := a1.list(t)[engine.URL]
		_, ok2 := a2.list(t)[engine.URL]
		return ok1 && ok2
	})
	id := a1.list(t)[engine.URL].ID
	term, last := statusTerm(t, a2)

	for _, g := range []*clusterGW{g1, g2} {
		if st, err := forgeApply(t, rpcAddr(g), nil, disableAs(id, "attacker")); err == nil {
			t.Errorf("a forged SetFlags over %s's --rpc-port: %v, want refused", g.id, st)
		}
		if err := forgeAppend(t, raftAddr(g), term, last, disableAs(id, "attacker")); err == nil {
			t.Errorf("a forged AppendEntries over %s's raft port was answered, want the connection refused", g.id)
		}
	}
	expectUntouched(t, a1, engine.URL, term)
	expectUntouched(t, a2, engine.URL, term)
	if n, err := joinMesh(t, g1.meshAddr()); err == nil {
		t.Errorf("a mesh member without the key joined %d gateway(s)", n)
	}

	// The peers prove themselves: a write through the follower is forwarded over gRPC and
	// acknowledged by both; then the key's holder may use the gRPC port as the admin API.
	a2.must(t, 200, "PUT", workerPath(engine), `{"disabled":true,"reason":"through the follower"}`)
	for _, a := range []*adminClient{a1, a2} {
		if rec := a.list(t)[engine.URL]; !rec.Disabled {
			t.Errorf("%s: a write through the follower is not applied: %+v", a.base, rec)
		}
	}
	if st, err := forgeApply(t, rpcAddr(g1), clusterkey.Derive(sideDoorKey).Credentials(), fsm.SetFlags{ID: worker.ID(id), Flags: fsm.FlagChange{Disabled: new(bool)}}); err != nil || st != consensusv1.ApplyStatus_APPLY_STATUS_APPLIED {
		t.Errorf("a write by a holder of the key over --rpc-port: %v %v, want applied", st, err)
	}
}

func TestSideDoorsWithoutAdminKeyTrustLoopback(t *testing.T) {
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine")
	g := newClusterGW(t, "open", "--worker-urls", engine.URL)
	g.start(t, b)
	a := newAdmin(g.Gateway, "")
	harness.WaitFor(t, clusterBound, "the worker registered", func() bool { _, ok := a.list(t)[engine.URL]; return ok })
	id := a.list(t)[engine.URL].ID
	if st, err := forgeApply(t, rpcAddr(g), nil, disableAs(id, "loopback")); err != nil || st != consensusv1.ApplyStatus_APPLY_STATUS_APPLIED {
		t.Fatalf("a write over --rpc-port from loopback without an admin key: %v %v, want applied (loopback is trusted)", st, err)
	}
	if rec := a.list(t)[engine.URL]; !rec.Disabled || rec.DisabledBy != "loopback" {
		t.Errorf("record after a trusted loopback write: %+v", rec)
	}
}

// joinMesh joins the mesh at addr as a member without a key and returns how many it reached.
func joinMesh(t *testing.T, addr string) (int, error) {
	t.Helper()
	cfg := memberlist.DefaultLocalConfig()
	cfg.Name, cfg.BindAddr, cfg.BindPort, cfg.AdvertisePort = "intruder", "127.0.0.1", 0, 0
	cfg.LogOutput = io.Discard
	cfg.TCPTimeout = 2 * time.Second
	ml, err := memberlist.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ml.Shutdown() }()
	return ml.Join([]string{addr})
}

// getJSONWith is getJSON with an admin key.
func getJSONWith(t *testing.T, a *adminClient, path string, v any) bool {
	t.Helper()
	code, body := a.do(t, "GET", path, "")
	return code == 200 && json.Unmarshal([]byte(body), v) == nil
}

// TestAdminKeyRotationKeepsTheClusterWhole: mid-rotation, a gateway whose key file is "old,
// new" and one whose file is "new, old" prove themselves to each other: the second joins the
// first, and a write through it with either key is forwarded and applied on both.
func TestAdminKeyRotationKeepsTheClusterWhole(t *testing.T) {
	b := harness.Build(t)
	engine := harness.StartEngine(t, b, "engine")
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	g1 := newClusterGW(t, "rot1", "--admin-api-key-file", file("round1", "key-old\nkey-new\n"), "--worker-urls", engine.URL)
	g1.start(t, b)
	g2 := newClusterGW(t, "rot2", "--admin-api-key-file", file("round2", "key-new\nkey-old\n"))
	g2.start(t, b, g1.meshAddr())
	a1, a2 := newAdmin(g1.Gateway, "key-new"), newAdmin(g2.Gateway, "key-old")
	harness.WaitFor(t, clusterBound, "both gateways list the worker", func() bool {
		_, ok1 := a1.list(t)[engine.URL]
		_, ok2 := a2.list(t)[engine.URL]
		return ok1 && ok2
	})
	a2.must(t, 200, "PUT", workerPath(engine), `{"disabled":true,"reason":"mid-rotation"}`)
	for _, a := range []*adminClient{a1, a2} {
		if rec := a.list(t)[engine.URL]; !rec.Disabled {
			t.Errorf("%s: a write through the second gateway is not applied: %+v", a.base, rec)
		}
	}
}
