package e2e

import (
	"fmt"
	"net/http"
	"net/url"
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
