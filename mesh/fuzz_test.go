package mesh

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/health"
)

// FuzzPublishBulletin publishes a bulletin whose free-text fields come from outside (a probe's
// last error, which may quote what a worker answered, and the models a worker lists) and
// gossips it, as a broadcast and in the owner's whole state: nothing panics, and the peer
// imports it with its text intact when that text is valid UTF-8, repaired otherwise.
func FuzzPublishBulletin(f *testing.F) {
	f.Add("w-0123456789ab", "rpc Unavailable: engine warming up", "model-a", int64(3))
	f.Add("w-0123456789ab", strings.Repeat("é", 150), "", int64(-1))
	f.Add("w-1", "status 503: \xff\xfe", "\xc3", int64(1<<40))
	f.Fuzz(func(t *testing.T, worker, lastError, model string, n int64) {
		if worker == "" || !utf8.ValidString(worker) {
			return // worker ids are made by meshgw: "w-" and hex digits
		}
		net, recs := newFakeNet("a", "b")
		a, b := net.engines["a"], net.engines["b"]
		in := Bulletin{Worker: worker, Epoch: 1, Health: health.NotReady, Breaker: breaker.Open, LastError: lastError,
			LastStatusCode: int(n), Models: []string{model}, BreakerFailures: int(n), ActiveRequests: n, ProbeInterval: time.Duration(n)}
		a.publish(in)
		a.flush(net.now())
		net.gossip()
		b.mergeRemote(a.localState(true))
		got := recs["b"].take()
		if len(got) == 0 {
			t.Fatalf("b imported nothing")
		}
		for _, g := range got {
			if g.Worker != worker || g.LastError != strings.ToValidUTF8(lastError, "\uFFFD") ||
				len(g.Models) != 1 || g.Models[0] != strings.ToValidUTF8(model, "\uFFFD") {
				t.Fatalf("b imported %+v; published %+v", g, in)
			}
		}
	})
}
