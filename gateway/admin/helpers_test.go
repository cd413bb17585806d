package admin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/gateway/fleet"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/test/logbuf"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	loopback = net.ParseIP("127.0.0.1")
	remote   = net.ParseIP("10.1.2.3")
)

// req is one admin request.
type req struct {
	method, uri, body, auth string
	from                    net.IP
}

// answer is what the handler wrote.
type answer struct {
	status int
	body   string
	header *fasthttp.ResponseHeader
}

// errCode returns the "code" of an error body.
func (a answer) errCode() string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.body), &e)
	return e.Error.Code
}

// message returns the "message" of an error body.
func (a answer) message() string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(a.body), &e)
	return e.Error.Message
}

// record decodes a record body.
func (a answer) record(t *testing.T) Record {
	t.Helper()
	var r Record
	if err := json.Unmarshal([]byte(a.body), &r); err != nil {
		t.Fatalf("not a record: %v: %s", err, a.body)
	}
	return r
}

// do runs one request through h; a zero answer means h did not serve the path.
func do(h *Handler, r req) answer {
	var fr fasthttp.Request
	fr.Header.SetMethod(r.method)
	fr.SetRequestURI(r.uri)
	if r.auth != "" {
		fr.Header.Set("Authorization", r.auth)
	}
	if r.body != "" {
		fr.SetBodyString(r.body)
		fr.Header.SetContentType("application/json")
	}
	from := r.from
	if from == nil {
		from = loopback
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&fr, &net.TCPAddr{IP: from, Port: 40000}, nil)
	if !h.Serve(&ctx) {
		return answer{}
	}
	var hdr fasthttp.ResponseHeader
	ctx.Response.Header.CopyTo(&hdr)
	return answer{status: ctx.Response.StatusCode(), body: string(ctx.Response.Body()), header: &hdr}
}

// env is an admin handler over a real in-memory raft node, its writer, a pool the reconciler
// keeps in step, and the log lines of it all.
type env struct {
	node   *consensus.Node
	writer *fleet.Writer
	pool   *pool.Pool
	h      *Handler
	cfg    Config
	logs   *logBuffer
}

// newEnv starts the node, waits until it leads, and returns the env; mutate adjusts the
// handler's config (a drainer, a key, another writer) before the handler is made.
func newEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	_, trans := raft.NewInmemTransport("mem-n1")
	n, err := consensus.Start(consensus.Config{NodeID: "n1", Ephemeral: true, Transport: trans, Logger: testkit.Quiet(), Tune: testkit.FastRaft})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown() })
	testkit.For(t, "n1 to lead", func() bool { return n.IsLeader() && n.ClusterID() != "" })
	e := &env{node: n, pool: pool.New(pool.Config{}), logs: &logBuffer{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.writer = &fleet.Writer{Node: n, NodeID: "n1", Logger: log, Timeout: 5 * time.Second}
	rec := fleet.New(fleet.Config{NodeID: "n1", Records: n, Pool: e.pool, Logger: log})
	rec.Start()
	t.Cleanup(rec.Stop)
	cfg := Config{
		Pool: e.pool, NodeID: "n1", Region: "eu", Status: func() any { return map[string]string{"node_id": "n1"} },
		Records: n, Writer: e.writer, Raft: n, Logger: log,
		// The mesh: the owners the tests' registrations name are alive peers.
		Peers: meshOf{{ID: "n1", Status: "alive", Self: true}, {ID: "n2", Status: "alive"}, {ID: "gw-2", Status: "alive"}},
		Now:   func() time.Time { return time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC) },
	}
	e.cfg = cfg
	e.h = e.handler(mutate)
	return e
}

// meshOf is a mesh whose peers never change.
type meshOf []Peer

func (m meshOf) Peers() []Peer { return m }

// handler returns another handler over the env's node and pool; mutate adjusts its config.
func (e *env) handler(mutate func(*Config)) *Handler {
	cfg := e.cfg
	if mutate != nil {
		mutate(&cfg)
	}
	return New(cfg)
}

// register POSTs a worker and returns its record.
func (e *env) register(t *testing.T, body string) Record {
	t.Helper()
	a := do(e.h, req{method: "POST", uri: "/workers", body: body})
	if a.status != 201 {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	return a.record(t)
}

type logBuffer = logbuf.Buffer

func workerURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

func idOf(t testing.TB, url string) worker.ID {
	t.Helper()
	s := worker.Spec{URL: url}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return s.ID()
}
