package gateway

import (
	"strconv"

	"github.com/meshgw/meshgw/gateway/reqmeta"
)

// checkUnread refuses a request whose model or capabilities the gateway could not read (a JSON
// body beyond the scan limit, a streamed body, an upload it could not read to its end) when the
// workers of its route differ in them: routing would guess, and could send it to a worker of
// another model. The 400 names the hint header that says it, as the SGLang-Omni router's does.
// Where the workers agree, nothing needs saying and the request goes on. It runs only for such
// requests, never for a body read whole.
func (c *call) checkUnread() *reqmeta.Error {
	m := &c.meta
	snap := c.g.pool.Snapshot()
	models, caps := snap.Differ(m.Caps, m.Model, m.UnreadModel, m.UnreadCaps)
	n := reqmeta.ScanLimit
	if c.streamed {
		n = min(n, len(*c.body))
	}
	what := "the request body is larger than the " + strconv.Itoa(n) + " bytes the gateway reads for routing"
	if !c.route.JSON() {
		what = "the gateway could not read the upload's form fields to their end"
	}
	switch {
	case models:
		return &reqmeta.Error{Header: reqmeta.HeaderModel, Msg: what + ", and what it read names no model; the workers of " +
			c.route.Path() + " serve different models: name the model in the " + reqmeta.HeaderModel + " header"}
	case caps != 0:
		return &reqmeta.Error{Header: reqmeta.HeaderCapabilities, Msg: what + "; the workers that may serve it differ in " +
			caps.String() + ", which the rest may require: list what it requires in the " + reqmeta.HeaderCapabilities +
			" header (empty for nothing beyond the route's own)"}
	}
	return nil
}
