package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/meshgw/meshgw/ctxtime"
	"github.com/meshgw/meshgw/test/chaos/history"
)

// MaxPerLoop bounds every loop's count of operations, whatever its time.
const MaxPerLoop = 200000

// Requests sends chat completions through g until ctx ends, streaming or not, and records
// each with the worker that served it; a request that the end of ctx cut short is not recorded.
func Requests(ctx context.Context, rec *history.Recorder, g Gateway, stream bool) {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := 0; i < MaxPerLoop && ctx.Err() == nil; i++ {
		q := request(ctx, client, rec, g, stream, i)
		if q.Class != history.Served && ctx.Err() != nil {
			return // cut short by the run's own end: no outcome of the system
		}
		rec.Request(q)
		if ctxtime.Sleep(ctx, 20*time.Millisecond) != nil {
			return
		}
	}
}

func request(ctx context.Context, client *http.Client, rec *history.Recorder, g Gateway, stream bool, i int) history.Request {
	q := history.Request{Gateway: g.ID, Stream: stream, Invoke: rec.Now(), Class: history.GatewayLost}
	defer func() { q.Complete = rec.Now() }()
	body := fmt.Sprintf(`{"model":"fake-model","stream":%v,"messages":[{"role":"user","content":"chaos %d"}]}`, stream, i)
	req, err := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		q.Complete = rec.Now()
		return q
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		q.Complete = rec.Now()
		return q
	}
	defer resp.Body.Close()
	q.Status, q.Worker = resp.StatusCode, resp.Header.Get("X-Mesh-Worker")
	var buf bytes.Buffer
	ok := readBody(resp, &buf)
	switch {
	case resp.StatusCode == 200 && ok && (!stream || strings.Contains(buf.String(), "[DONE]")):
		q.Class = history.Served
	case resp.StatusCode == 503 && strings.Contains(buf.String(), "no_available_workers"):
		q.Class = history.NoWorker
	case resp.StatusCode == 503 && strings.Contains(buf.String(), `"code":"draining"`):
		q.Class = history.Drained
	}
	q.Complete = rec.Now()
	return q
}

// readBody reads the answer (at most 1 MiB) and reports whether it ended cleanly, without an
// SSE error event.
func readBody(resp *http.Response, buf *bytes.Buffer) bool {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if buf.Len() < 1<<20 {
			buf.WriteString(line + "\n")
		}
		if strings.HasPrefix(line, "data:") && strings.Contains(line, `"error"`) {
			return false
		}
	}
	return sc.Err() == nil
}

// operations are the admin operations of Operations with their weights: mostly disables,
// enables and consistent reads, some (idempotent) registrations, which also bring deleted
// workers back, and a few ownership transfers, deletes (drain, then remove) and rebalances.
var operations = []struct {
	kind   history.Kind
	weight int
}{
	{history.Disable, 3}, {history.Enable, 3}, {history.Read, 4}, {history.Register, 3},
	{history.Transfer, 2}, {history.Delete, 1}, {history.Rebalance, 1},
}

// drawOperation draws a kind by the weights of operations.
func drawOperation(rng *rand.Rand) history.Kind {
	total := 0
	for _, o := range operations {
		total += o.weight
	}
	n := rng.IntN(total)
	for _, o := range operations {
		if n < o.weight {
			return o.kind
		}
		n -= o.weight
	}
	return history.Read
}

// Operations runs admin operations (drawOperation) on random workers through random gateways
// until ctx ends; a transfer goes to a random gateway.
func Operations(ctx context.Context, a *Admin, client int, rng *rand.Rand, workers []Worker, gateways []Gateway) {
	for i := 0; i < MaxPerLoop && ctx.Err() == nil; i++ {
		kind := drawOperation(rng)
		w, g := workers[rng.IntN(len(workers))], gateways[rng.IntN(len(gateways))]
		to := gateways[rng.IntN(len(gateways))].ID
		if kind == history.Rebalance {
			w = Worker{}
		}
		a.DoTo(ctx, client, kind, w, g, to)
		if ctxtime.Sleep(ctx, time.Duration(50+rng.IntN(150))*time.Millisecond) != nil {
			return
		}
	}
}

// Weights runs weight updates of w through random gateways until ctx ends, following the
// runbook after each that did not finish: resolve a record left open, then enable the target.
func Weights(ctx context.Context, a *Admin, client int, rng *rand.Rand, w Worker, gateways []Gateway) {
	for i := 0; i < MaxPerLoop && ctx.Err() == nil; i++ {
		g := gateways[rng.IntN(len(gateways))]
		op := a.Do(ctx, client, history.WeightUpdate, w, g)
		if op.Status != 200 && ctx.Err() == nil {
			if op.Status == 409 {
				_, _, _ = a.send(ctx, "POST", g.URL+"/weight_update_journal/resolve", `{"acknowledge":true}`)
			}
			a.Do(ctx, client, history.Enable, w, g)
		}
		if ctxtime.Sleep(ctx, time.Duration(500+rng.IntN(1000))*time.Millisecond) != nil {
			return
		}
	}
}

// Sample reads every gateway's GET /mesh/owners and every engine's probe counts (GET /_stats)
// every period until ctx ends. engines maps a worker id to its engine's URL.
//
// It ends with one more round of ownership samples (bounded by the client's timeout), after
// its last probe counts: a gateway that applied a move to itself and probed at once, just
// before the end, shows the probe there, and only a later ownership sample shows it owned
// the worker.
func Sample(ctx context.Context, rec *history.Recorder, key string, gateways []Gateway, engines map[string]string, period time.Duration) {
	client := &http.Client{Timeout: time.Second}
	owners := func(ctx context.Context) {
		for _, g := range gateways {
			var owners struct {
				Owners []history.OwnerRow `json:"owners"`
			}
			if getJSON(ctx, client, g.URL+"/mesh/owners", key, &owners) {
				rec.Owners(history.OwnerSample{At: rec.Now(), Gateway: g.ID, Rows: owners.Owners})
			}
		}
	}
	defer owners(context.WithoutCancel(ctx))
	for i := 0; i < MaxPerLoop && ctx.Err() == nil; i++ {
		owners(ctx)
		for id, u := range engines {
			var stats struct {
				ByGateway map[string]struct {
					Probes int64 `json:"probes"`
				} `json:"by_gateway"`
			}
			if getJSON(ctx, client, u+"/_stats", "", &stats) {
				s := history.ProbeSample{At: rec.Now(), Worker: id, Probes: map[string]int64{}}
				for gw, c := range stats.ByGateway {
					s.Probes[gw] = c.Probes
				}
				rec.Probes(s)
			}
		}
		if ctxtime.Sleep(ctx, period) != nil {
			return
		}
	}
}

func getJSON(ctx context.Context, client *http.Client, u, key string, v any) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return false
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(v) == nil
}
