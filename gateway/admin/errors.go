package admin

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// The stable error codes of the admin API (docs/admin-api.md). A code never changes meaning;
// tools match on it, not on the message.
const (
	codeInvalidRequest   = "invalid_request"    // 400: the body is not the JSON object the route takes
	codeInvalidField     = "invalid_field"      // 400: a field's value is refused; the message names it
	codeUnknownField     = "unknown_field"      // 400: a field the route does not take; the message names it
	codeUnauthorized     = "unauthorized"       // 401: missing or wrong bearer key
	codeForbidden        = "forbidden"          // 403: no key configured and the client is not on loopback
	codeWorkerNotFound   = "worker_not_found"   // 404
	codeNotFound         = "not_found"          // 404: no such admin route
	codeMethodNotAllowed = "method_not_allowed" // 405
	codeWorkerExists     = "worker_exists"      // 409: registered with another spec
	codeRevisionConflict = "revision_conflict"  // 409: the record kept changing under a PUT or PATCH
	codeFenced           = "fenced"             // 409: the owner or epoch moved under the command
	codeDrained          = "drained"            // 409: this gateway left the mesh after its drain
	codePayloadTooLarge  = "payload_too_large"  // 413
	codeUnsupportedMedia = "unsupported_media"  // 415
	codeNoLeader         = "no_leader"          // 503: no raft leader; nothing was written
	codeNotLeader        = "not_leader"         // 503: this gateway is a follower; nothing was written
	codeWriteTimeout     = "write_timeout"      // 503: not queued in time; nothing was written
	codeOutcomeUnknown   = "outcome_unknown"    // 503: the write may or may not have committed
	codeUnavailable      = "unavailable"        // 503: no raft node here, or it is shutting down
	codeInternal         = "internal"           // 500
)

// apiError is an answer other than success: status, stable code and a message that names what
// was wrong. It never carries a secret.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errorf(status int, code, msg string) *apiError {
	return &apiError{status: status, code: code, msg: msg}
}

// writeErr writes the admin error body {"error":{"message","code"}} with a stable code.
func writeErr(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	b, _ := json.Marshal(map[string]map[string]string{"error": {"message": msg, "code": code}})
	if status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func writeAPIErr(ctx *fasthttp.RequestCtx, e *apiError) { writeErr(ctx, e.status, e.code, e.msg) }

// writeError maps a raft write's error to its answer. conflictCode is the code of a business
// conflict (worker_exists for a registration, revision_conflict for a compare-and-set).
func writeError(ctx *fasthttp.RequestCtx, err error, conflictCode string) {
	writeAPIErr(ctx, mapWriteError(err, conflictCode))
}

func mapWriteError(err error, conflictCode string) *apiError {
	var (
		ae *apiError
		nl *consensus.NotLeaderError
		ce *fsm.ConflictError
		nq *consensus.NoQuorumError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, consensus.ErrOutcomeUnknown):
		return errorf(503, codeOutcomeUnknown, "the write may or may not have been committed (raft lost leadership or time ran out after it was proposed); read the worker to find out before retrying")
	case errors.As(err, &ce):
		return errorf(409, conflictCode, ce.Error())
	case errors.Is(err, fsm.ErrNotFound):
		return errorf(404, codeWorkerNotFound, err.Error())
	case errors.Is(err, fsm.ErrInvalid):
		return errorf(400, codeInvalidRequest, err.Error())
	case errors.Is(err, consensus.ErrNoLeader) && errors.As(err, &nq):
		return errorf(503, codeNoLeader, nq.Error()+"; nothing was written")
	case errors.Is(err, consensus.ErrNoLeader):
		return errorf(503, codeNoLeader, "the raft group has no leader right now; nothing was written")
	case errors.As(err, &nl):
		return errorf(503, codeNotLeader, "the write was forwarded but did not reach the raft leader ("+nl.Leader+" was named last) within the forwarding bound; nothing was written")
	case errors.Is(err, consensus.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return errorf(503, codeWriteTimeout, "the write could not be handed to raft in time; nothing was written")
	case errors.Is(err, consensus.ErrShutdown):
		return errorf(503, codeUnavailable, "the raft node is shutting down; nothing was written")
	}
	return errorf(500, codeInternal, "the write failed: "+err.Error())
}
