package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/gateway/owned"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/test/fakeengine"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// modelIDs answers the ids GET /v1/models lists.
func (e *testEnv) modelIDs() []string {
	e.t.Helper()
	status, _, body := e.get("/v1/models")
	if status != http.StatusOK {
		e.t.Fatalf("GET /v1/models: %d %s", status, body)
	}
	var list modelList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// startFakeEngine serves a fake engine that serves model over mode (http, grpc or zmq).
func startFakeEngine(t *testing.T, mode, model string) string {
	t.Helper()
	fe := fakeengine.New(fakeengine.Config{Model: model, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { fe.Close() })
	var url string
	var err error
	switch mode {
	case "http":
		url, err = fe.Start("127.0.0.1:0")
	case "grpc":
		url, err = fe.StartGRPC("127.0.0.1:0")
	case "zmq":
		url, err = fe.StartZMQ("tcp://127.0.0.1:0", fakeengine.ZMQOptions{HeartbeatInterval: 50 * time.Millisecond})
	}
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// GET /v1/models lists what the owner discovered from engines registered by URL only, over
// HTTP, gRPC and ZMQ (the ZMQ one through the data plane's link, AnnouncedModels); declared
// models win over what an engine says; --model stands in for a worker nothing was discovered
// from; and routing still sends any model to a worker that declares none.
func TestModelsListsDiscovered(t *testing.T) {
	e := newEnv(t, Config{DefaultModel: "fallback-m", StartPending: true})
	hc := health.DefaultConfig()
	hc.CheckIntervalSecs, hc.TimeoutSecs = 1, 2
	m, err := owned.New(owned.Options{Pool: e.gw.Pool(), NodeID: "gw-test", Health: hc,
		Breaker: breaker.DefaultConfig(), Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	noList, _ := e.upstream(okHandler("no-list")) // /v1/models answers 200 with no list
	specs := []worker.Spec{
		{URL: startFakeEngine(t, "http", "http-model")},
		{URL: startFakeEngine(t, "grpc", "grpc-model")},
		{URL: startFakeEngine(t, "zmq", "zmq-model")},
		{URL: startFakeEngine(t, "http", "engine-says"), Models: []string{"declared-m"}},
		{URL: noList.URL},
	}
	for _, s := range specs {
		e.add(s)
		m.Own(s, 1, false)
	}
	want := []string{"declared-m", "fallback-m", "grpc-model", "http-model", "zmq-model"}
	var got []string
	testkit.For(t, "GET /v1/models to list the discovered models", func() bool {
		got = e.modelIDs()
		return slices.Equal(got, want)
	})
	for _, w := range e.gw.Pool().Snapshot().All {
		if w.URL == specs[3].URL && w.DiscoveredModels() != nil {
			t.Errorf("a worker with declared models was asked: %q", w.DiscoveredModels())
		}
	}
	for range 3 {
		code, hdr, body := e.post("/v1/chat/completions", `{"model":"not-listed-anywhere","messages":[{"role":"user","content":"hi"}]}`)
		if code != http.StatusOK {
			t.Fatalf("a model nobody lists: %d %s (routing must still take any model)", code, body)
		}
		if hdr.Get("X-Mesh-Worker") == string(e.gw.Pool().Snapshot().Lookup(specs[3].URL).ID) {
			t.Fatal("a worker that declares its models took a model it does not declare")
		}
	}
}
