package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/harness"
)

// failStaticBound is how soon a restarted gateway must serve, alone, with its whole fleet down.
const failStaticBound = 2 * time.Second

// TestWholeFleetRestartServesAtOnce: three gateways, two engines owned by A, one disabled; every
// gateway is killed with SIGKILL (a power cut). A, started alone (no quorum, no leader), serves
// a chat within 2 s of starting, and never sends one to the disabled engine. Starting B and C
// brings back the quorum and writes.
func TestWholeFleetRestartServesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	off := harness.StartEngine(t, b, "engine-off")
	on := harness.StartEngine(t, b, "engine-on")
	gws := []*clusterGW{newClusterGW(t, "ra"), newClusterGW(t, "rb"), newClusterGW(t, "rc")}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	waitFormed(t, gws...)
	a := newAdmin(gws[0].Gateway, "")
	for _, e := range []*harness.Proc{off, on} {
		a.must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e.URL))
	}
	path := "/workers/" + url.PathEscape(off.URL)
	harness.WaitFor(t, clusterBound, "a disable through rb", func() bool {
		code, _ := newAdmin(gws[1].Gateway, "").do(t, "PUT", path, `{"disabled":true,"reason":"restart test"}`)
		return code == 200
	})
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" shows the disable", func() bool {
			_, disabled := hasWorker(t, g, off.URL)
			return disabled
		})
	}

	for _, g := range gws {
		g.Kill()
	}
	offBefore, _ := engineStats(t, off, "ra")
	started := time.Now()
	gws[0].start(t, b) // alone: its two peers are down, raft has no quorum
	client := &http.Client{Timeout: 2 * time.Second}
	var took time.Duration
	harness.WaitFor(t, 10*time.Second, "ra serves a chat alone", func() bool {
		code, _, err := chat(client, gws[0].URL, "after the power cut")
		took = time.Since(started)
		return err == nil && code == http.StatusOK
	})
	t.Logf("ra served its first chat %v after it was started, alone", took.Round(time.Millisecond))
	if took > failStaticBound {
		t.Errorf("ra served its first chat %v after it was started; want within %v", took, failStaticBound)
	}
	var st struct {
		Quorum *bool `json:"quorum"`
	}
	if !getJSON(t, gws[0], "/status", &st) || st.Quorum == nil || *st.Quorum {
		t.Errorf("ra alone: /status quorum %v, want false", st.Quorum)
	}
	sendChats(t, gws[0].Gateway, 20, http.StatusOK)
	if after, _ := engineStats(t, off, "ra"); after != offBefore {
		t.Errorf("the engine disabled before the crash got %d requests from ra after the restart", after-offBefore)
	}

	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	waitFormed(t, gws...)
	harness.WaitFor(t, clusterBound, "an enable through rc", func() bool {
		code, _ := newAdmin(gws[2].Gateway, "").do(t, "PUT", path, `{"disabled":false}`)
		return code == 200
	})
	for _, g := range gws {
		harness.WaitFor(t, clusterBound, g.id+" shows the enable", func() bool {
			found, disabled := hasWorker(t, g, off.URL)
			return found && !disabled
		})
	}
}

// TestRestartAloneRoutesImportedWorkers: A imports an engine that B owns. Every gateway is killed
// (a power cut) and A starts alone: the engine's owner is down and no leader exists, yet A
// serves a chat through it within 2 s, by the state it imported before the crash (saved on
// disk), shown stale. An engine B had marked not ready before the crash is not routed to.
func TestRestartAloneRoutesImportedWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	b := harness.Build(t)
	up := harness.StartEngine(t, b, "engine-up")
	down := harness.StartEngine(t, b, "engine-down")
	gws := []*clusterGW{newClusterGW(t, "ia", "--log-level", "debug"), newClusterGW(t, "ib"), newClusterGW(t, "ic")}
	gws[0].start(t, b)
	gws[1].start(t, b, gws[0].meshAddr())
	gws[2].start(t, b, gws[0].meshAddr())
	waitFormed(t, gws...)
	for _, e := range []*harness.Proc{up, down} {
		newAdmin(gws[1].Gateway, "").must(t, 201, "POST", "/workers", fmt.Sprintf(`{"url":%q}`, e.URL))
	}
	// The fault comes once engine-down is ready: a worker that fails from its registration on
	// stays pending (DESIGN section 2: pending turns failed only after 10 × F probes), and the
	// test wants it not_ready.
	harness.WaitFor(t, clusterBound, "ia imports both engines ready from ib", func() bool {
		ws, err := bulWorkers(gws[0].Gateway)
		return err == nil && ws[up.URL].HealthState == "ready" && ws[down.URL].HealthState == "ready"
	})
	fault(t, down, `{"health_status":503}`)
	harness.WaitFor(t, clusterBound, "ia imports engine-up ready and engine-down not ready from ib", func() bool {
		ws, err := bulWorkers(gws[0].Gateway)
		return err == nil && ws[up.URL].Owner == "ib" && ws[up.URL].HealthState == "ready" &&
			ws[down.URL].HealthState != "" && ws[down.URL].HealthState != "ready" && ws[down.URL].HealthState != "unknown"
	})
	downID := bulWorkerID(t, gws[0].Gateway, down.URL)
	harness.WaitFor(t, clusterBound, "ia saves engine-down's state", func() bool {
		for _, line := range strings.Split(gws[0].Output(), "\n") {
			if strings.Contains(line, "saved imported state") && strings.Contains(line, downID+"=not_ready") {
				return true
			}
		}
		return false
	})

	for _, g := range gws {
		g.Kill()
	}
	downBefore, _ := engineStats(t, down, "ia")
	started := time.Now()
	gws[0].start(t, b) // alone: the owner is down, raft has no quorum
	client := &http.Client{Timeout: 2 * time.Second}
	var took time.Duration
	harness.WaitFor(t, 10*time.Second, "ia serves a chat alone through ib's engine", func() bool {
		code, _, err := chat(client, gws[0].URL, "owner down")
		took = time.Since(started)
		return err == nil && code == http.StatusOK
	})
	t.Logf("ia served its first chat %v after it was started, alone", took.Round(time.Millisecond))
	if took > failStaticBound {
		t.Errorf("ia served its first chat %v after it was started; want within %v", took, failStaticBound)
	}
	ws, err := bulWorkers(gws[0].Gateway)
	if err != nil {
		t.Fatal(err)
	}
	if w := ws[up.URL]; !w.Routable || w.HealthState != "ready" {
		t.Errorf("engine-up after the restart: %v, want ready and routable", w)
	}
	// Its owner is never heard: the state turns stale once 3 probe intervals have passed since
	// it was received, before the crash.
	harness.WaitFor(t, 10*time.Second, "ia shows engine-up stale", func() bool {
		ws, err := bulWorkers(gws[0].Gateway)
		return err == nil && ws[up.URL].Stale && ws[up.URL].Routable
	})
	sendChats(t, gws[0].Gateway, 10, http.StatusOK)
	if after, _ := engineStats(t, down, "ia"); after != downBefore {
		t.Errorf("the engine not ready before the crash got %d requests from ia after the restart", after-downBefore)
	}
}

// bulWorkerID is the id g's GET /workers gives the worker of url.
func bulWorkerID(t *testing.T, g *harness.Gateway, url string) string {
	t.Helper()
	resp, err := bulClient.Get(g.URL + "/workers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Workers []struct{ ID, URL string } `json:"workers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, w := range list.Workers {
		if w.URL == url {
			return w.ID
		}
	}
	t.Fatalf("%s lists no worker %s", g.Name, url)
	return ""
}
