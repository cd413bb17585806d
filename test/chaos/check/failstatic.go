package check

import (
	"time"

	"github.com/meshgw/meshgw/test/chaos/history"
)

// Requests counts the client requests of a run by class; GatewayDown are those sent to a
// gateway whose process was killed or stopped while they ran, left out of the rate, as are
// Drained, the 503 draining of a gateway drained and out of the mesh (its readiness said 503
// since its drain began: a load balancer would not have sent them there).
type Requests struct {
	OK          int `json:"ok"`
	NoWorker    int `json:"failed_no_worker"`
	Drained     int `json:"refused_drained"`
	GatewayLost int `json:"failed_gateway"`
	GatewayDown int `json:"gateway_down"`
}

// CountRequests sorts the history's requests.
func CountRequests(h history.History) Requests {
	var c Requests
	for _, q := range h.Requests {
		switch {
		case q.Class != history.Served && downDuring(h, q.Gateway, q.Invoke, q.Complete):
			c.GatewayDown++
		case q.Class == history.Served:
			c.OK++
		case q.Class == history.NoWorker:
			c.NoWorker++
		case q.Class == history.Drained:
			c.Drained++
		default:
			c.GatewayLost++
		}
	}
	return c
}

// FailStatic checks that the data plane served at least min of the requests that had a
// reachable worker and a running gateway: ok / (ok + failed_gateway).
func FailStatic(h history.History, min float64) Result {
	c := CountRequests(h)
	total := c.OK + c.GatewayLost
	if total == 0 {
		return Fail("no request had a reachable worker and a running gateway")
	}
	rate := float64(c.OK) / float64(total)
	if rate < min {
		return Fail("served %.4f of %d requests (want ≥ %.2f); %d more found no worker, %d were refused by a drained gateway, %d went to a gateway that was down", rate, total, min, c.NoWorker, c.Drained, c.GatewayDown)
	}
	return Pass("served %.4f of %d requests (want ≥ %.2f); %d more found no worker, %d were refused by a drained gateway, %d went to a gateway that was down", rate, total, min, c.NoWorker, c.Drained, c.GatewayDown)
}

// downDuring reports whether node's process was killed or stopped at some time in [from, to].
func downDuring(h history.History, node string, from, to time.Duration) bool {
	for _, d := range h.Down {
		if d.Node == node && !d.Serving && d.From <= to && from <= d.To {
			return true
		}
	}
	return false
}
