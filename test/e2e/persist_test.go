package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshgw/meshgw/test/harness"
)

// engineCounts reads an engine's GET /_stats totals.
func engineCounts(t *testing.T, e *harness.Proc) (requests, probes int64) {
	t.Helper()
	resp, err := http.Get(e.URL + "/_stats")
	if err != nil {
		t.Fatalf("%s /_stats: %v", e.Name, err)
	}
	defer resp.Body.Close()
	var s struct{ Requests, Probes int64 }
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s /_stats: %v %s", e.Name, err, b)
	}
	return s.Requests, s.Probes
}

// durable is what a restart must keep of a record, exactly.
type durable struct {
	ID, Owner                              string
	Epoch                                  uint64
	Disabled                               bool
	DisabledReason, DisabledBy, DisabledAt string
	IsDead                                 bool
	RegisteredAt                           string
}

func durableOf(r adminRecord) durable {
	return durable{r.ID, r.Owner, r.Epoch, r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt, r.IsDead, r.RegisteredAt}
}

// TestPersistAcrossKill9 registers three workers through the admin API, disables one and
// quarantines another, then ten times: writes an acknowledged label, kills the gateway with
// SIGKILL, restarts it on the same state dir (every other time with the same --worker-urls, whose
// registration must not clear a flag), and checks that every record, flag and acknowledged write
// came back and that requests reach only the healthy, enabled worker.
func TestPersistAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	b := harness.Build(t)
	healthy := harness.StartEngine(t, b, "engine-healthy")
	disabled := harness.StartEngine(t, b, "engine-disabled")
	dead := harness.StartEngine(t, b, "engine-dead")
	stateDir := t.TempDir()
	urls := strings.Join([]string{healthy.URL, disabled.URL, dead.URL}, ",")
	gwArgs := func(withURLs bool) []string {
		args := []string{"--state-dir", stateDir, "--node-id", "gw-persist", "--health-check-interval-secs", "1", "--shutdown-settle-secs", "0"}
		if withURLs {
			args = append(args, "--worker-urls", urls)
		}
		return args
	}
	gw := harness.StartGateway(t, b, "meshgw-0", gwArgs(false)...)
	adm := newAdmin(gw, "")
	for _, e := range []*harness.Proc{healthy, disabled, dead} {
		body := fmt.Sprintf(`{"url":%q}`, e.URL)
		harness.WaitFor(t, 20*time.Second, "the registration of "+e.Name, func() bool { code, _ := adm.do(t, "POST", "/workers", body); return code == 201 })
	}
	adm.must(t, 200, "PUT", workerPath(disabled), `{"disabled":true,"reason":"persist test"}`)
	adm.must(t, 200, "PUT", workerPath(dead), `{"is_dead":true}`)
	want := map[string]durable{}
	for u, r := range adm.list(t) {
		want[u] = durableOf(r)
	}
	if !want[disabled.URL].Disabled || !want[dead.URL].IsDead || want[healthy.URL].Disabled || want[healthy.URL].IsDead {
		t.Fatalf("flags before the first kill: %+v", want)
	}
	var deadProbes int64
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 10 {
		// A restarted gateway serves before it leads (fail-static); its raft write waits for
		// the election, and answers 503 no_leader if that takes longer than 2 s (a loaded host).
		harness.WaitFor(t, 20*time.Second, "the label write", func() bool {
			code, body := adm.do(t, "PATCH", workerPath(healthy), fmt.Sprintf(`{"labels":{"round":"%d"}}`, i))
			if code != 200 && !(code == 503 && errorCode(body) == "no_leader") {
				t.Fatalf("PATCH: %d %s, want 200 (or 503 no_leader before the election)", code, body)
			}
			return code == 200
		})
		gw.Kill()
		withURLs := i%2 == 1
		gw = harness.StartGateway(t, b, fmt.Sprintf("meshgw-%d", i+1), gwArgs(withURLs)...)
		adm = newAdmin(gw, "")
		harness.WaitFor(t, 20*time.Second, "the records to be recovered and the healthy worker routable", func() bool {
			code, body := adm.do(t, "GET", "/readiness", "")
			return code == 200 && strings.Contains(body, `"healthy_workers":1,"total_workers":3`)
		})
		if withURLs {
			harness.WaitFor(t, 20*time.Second, "the command line's registrations to settle", func() bool {
				// The healthy worker's record differs from the command line's (its label): kept.
				out := gw.Output()
				return strings.Count(out, `msg="worker already registered"`) == 2 && strings.Count(out, `msg="kept the registered worker`) == 1
			})
		}
		got := map[string]durable{}
		for u, r := range adm.list(t) {
			got[u] = durableOf(r)
			if u == healthy.URL && r.Labels["round"] != fmt.Sprint(i) {
				t.Fatalf("round %d: the acknowledged label write was lost: %v", i, r.Labels)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d (worker urls %v): records changed across kill -9 (-want +got):\n%s", i, withURLs, diff)
		}
		if i == 0 {
			_, deadProbes = engineCounts(t, dead) // from now on every gateway starts with the quarantine
		}
		before := [3]int64{}
		for j, e := range []*harness.Proc{healthy, disabled, dead} {
			before[j], _ = engineCounts(t, e)
		}
		const n = 20
		for k := range n {
			if code, body, err := chat(client, gw.URL, fmt.Sprintf("round %d request %d", i, k)); err != nil || code != 200 {
				t.Fatalf("round %d: chat %d %v %.200s", i, code, err, body)
			}
		}
		for j, e := range []*harness.Proc{healthy, disabled, dead} {
			after, _ := engineCounts(t, e)
			if wantN := map[bool]int64{true: n, false: 0}[j == 0]; after-before[j] != wantN {
				t.Fatalf("round %d: %s got %d requests, want %d", i, e.Name, after-before[j], wantN)
			}
		}
	}
	if _, probes := engineCounts(t, dead); probes != deadProbes {
		t.Errorf("the quarantined worker was probed %d times", probes-deadProbes)
	}
	if _, probes := engineCounts(t, disabled); probes == 0 {
		t.Error("the disabled worker was never probed (disabled must keep health checks)")
	}
	t.Logf("ten kill -9 restarts in %v", time.Since(start).Round(time.Second))
}
