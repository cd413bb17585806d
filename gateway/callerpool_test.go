package gateway

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// TestServesTheCallersPool: a gateway given a pool serves that pool, its workers reached
// through the transports the gateway attached; a pool that already holds a worker is refused.
func TestServesTheCallersPool(t *testing.T) {
	p := pool.New(pool.Config{})
	e := newEnv(t, Config{Pool: p})
	if e.gw.Pool() != p {
		t.Fatal("the gateway serves a pool of its own, not the one it was given")
	}
	e.upstream(okHandler("a"))
	if status, _, body := e.post("/v1/completions", `{"prompt":"x"}`); status != 200 || !strings.Contains(body, `"served_by":"a"`) {
		t.Errorf("through the caller's pool: %d %s", status, body)
	}

	held := pool.New(pool.Config{})
	if _, _, err := held.Upsert(worker.Spec{URL: "http://127.0.0.1:9"}, pool.OriginLocal); err != nil {
		t.Fatal(err)
	}
	if g, err := New(Config{Pool: held, Logger: slog.New(slog.DiscardHandler)}); err == nil {
		g.Close()
		t.Error("a pool holding a worker was accepted")
	}
}
