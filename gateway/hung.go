package gateway

import "github.com/meshgw/meshgw/gateway/pool"

// holdHung takes w out of this gateway's routing after a request to it got no answer within
// the request timeout (pool.HoldHung, for Config.HungHold or until the owner's verdict on it
// changes), and counts the hold in meshgw_worker_hung_holds_total. A worker held already is
// left as it is.
func (g *Gateway) holdHung(w *pool.Worker) {
	if !g.pool.HoldHung(w.ID, g.cfg.HungHold) {
		return
	}
	g.metrics.hung(w.URL)
	g.log.Warn("worker held out of routing here: a request to it got no answer within the request timeout",
		"worker", w.URL, "hold", g.cfg.HungHold, "request_timeout", g.cfg.RequestTimeout)
}
