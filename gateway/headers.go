package gateway

import (
	"bytes"
	"iter"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/reqmeta"
)

// Headers the gateway sets or reads.
const (
	hdrWorker     = "X-Mesh-Worker"
	hdrRequestID  = "X-Mesh-Request-Id"
	hdrAttempt    = "X-Mesh-Route-Attempt"
	hdrGateway    = "X-Mesh-Gateway"
	hdrOwner      = "X-Mesh-Owner"
	hdrClientID   = "X-Request-Id"
	hdrRoutingKey = "X-Mesh-Routing-Key"
	hdrSMGKey     = "X-SMG-Routing-Key"

	// hdrWorkerRegion is the answering worker's region; absent when it has none.
	hdrWorkerRegion = "X-Mesh-Worker-Region"
)

// The names above in fasthttp's canonical form (each word capitalized, the rest lower case),
// which is how fasthttp stores every header it parses. Comparing a parsed name with them is a
// byte comparison, and SetCanonical and PeekCanonical skip normalizing the name on every call.
// TestCanonicalHeaderNames checks them against fasthttp's own normalization.
var (
	keyWorker        = []byte("X-Mesh-Worker")
	keyRequestID     = []byte("X-Mesh-Request-Id")
	keyAttempt       = []byte("X-Mesh-Route-Attempt")
	keyGateway       = []byte("X-Mesh-Gateway")
	keyOwner         = []byte("X-Mesh-Owner")
	keyWorkerRegion  = []byte("X-Mesh-Worker-Region")
	keyClientID      = []byte("X-Request-Id")
	keyAuthorization = []byte("Authorization")
)

// The canonical names one pass over a request's headers looks for.
const (
	canonRoutingKey    = "X-Mesh-Routing-Key"
	canonSMGKey        = "X-Smg-Routing-Key"
	canonClientID      = "X-Request-Id"
	canonAuthorization = "Authorization"
	canonModel         = "X-Mesh-Route-Model"
	canonCapabilities  = "X-Mesh-Route-Capabilities"
	canonStream        = "X-Mesh-Route-Stream"
	canonWorkerRegion  = "X-Mesh-Worker-Region"
)

// stripBits marks headers that never cross the proxy: the hop-by-hop headers (RFC 9110 section
// 7.6.1) and, on requests, the routing hints. fasthttp frames bodies itself, so
// Transfer-Encoding and Content-Length are rewritten anyway.
type stripBits uint16

const (
	stripConnection stripBits = 1 << iota
	stripKeepAlive
	stripProxyConnection
	stripProxyAuthenticate
	stripProxyAuthorization
	stripTE
	stripTrailer
	stripUpgrade
	stripModel
	stripCapabilities
	stripStream
	// stripWorkerRegion: an upstream's own X-Mesh-Worker-Region (a gateway behind this one
	// sends it), replaced by this gateway's or dropped when the worker has no region.
	stripWorkerRegion
	numStrip = iota
)

// stripNames are the names of the stripBits, in bit order.
var stripNames = [numStrip]string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Upgrade", canonModel, canonCapabilities, canonStream, canonWorkerRegion}

// hopBit is the bit of a canonical hop-by-hop header name, 0 for any other name.
func hopBit(key []byte) stripBits {
	switch string(key) {
	case "Connection":
		return stripConnection
	case "Keep-Alive":
		return stripKeepAlive
	case "Proxy-Connection":
		return stripProxyConnection
	case "Proxy-Authenticate":
		return stripProxyAuthenticate
	case "Proxy-Authorization":
		return stripProxyAuthorization
	case "Te":
		return stripTE
	case "Trailer":
		return stripTrailer
	case "Upgrade":
		return stripUpgrade
	}
	return 0
}

// reqHeaders is what one pass over a model request's headers found: the values the gateway
// reads (the first of each name, as Peek returns) and the headers to strip. The slices point
// into the header and are valid until it changes.
type reqHeaders struct {
	hints                                           reqmeta.Hints
	routingKey, smgKey, requestID, auth, connection []byte
	hasAuth                                         bool
	strip                                           stripBits
}

// scan reads h in one pass.
func (s *reqHeaders) scan(h *fasthttp.RequestHeader) {
	*s = reqHeaders{}
	for k, v := range h.All() {
		switch string(k) {
		case canonRoutingKey:
			s.routingKey = first(s.routingKey, v)
		case canonSMGKey:
			s.smgKey = first(s.smgKey, v)
		case canonClientID:
			s.requestID = first(s.requestID, v)
		case canonAuthorization:
			if !s.hasAuth {
				s.auth, s.hasAuth = v, true
			}
		case canonModel:
			s.hints.Model = s.hint(stripModel, s.hints.Model, v)
		case canonCapabilities:
			s.hints.Capabilities = s.hint(stripCapabilities, s.hints.Capabilities, v)
		case canonStream:
			s.hints.Stream = s.hint(stripStream, s.hints.Stream, v)
		default:
			if b := hopBit(k); b != 0 {
				if b == stripConnection && s.strip&b == 0 {
					s.connection = v
				}
				s.strip |= b
			}
		}
	}
}

// hint keeps the first value of a hint header (non-nil even when empty, as Peek returns it).
func (s *reqHeaders) hint(b stripBits, cur, v []byte) []byte {
	if s.strip&b != 0 {
		return cur
	}
	s.strip |= b
	if v == nil {
		v = []byte{}
	}
	return v
}

func first(cur, v []byte) []byte {
	if len(cur) > 0 {
		return cur
	}
	return v
}

// editableHeader is what strip needs of a request or response header.
type editableHeader interface {
	All() iter.Seq2[[]byte, []byte]
	Del(key string)
}

// hopHeaders finds the hop-by-hop headers of a response, and an upstream's
// X-Mesh-Worker-Region, in one pass.
func hopHeaders(h *fasthttp.ResponseHeader) (strip stripBits, connection []byte) {
	for k, v := range h.All() {
		if string(k) == canonWorkerRegion {
			strip |= stripWorkerRegion
		} else if b := hopBit(k); b != 0 {
			if b == stripConnection && strip&b == 0 {
				connection = v
			}
			strip |= b
		}
	}
	return strip, connection
}

// strip deletes the headers marked in bits and those the Connection value names (other than
// close and keep-alive). scratch holds a copy of connection while deleting; it is returned for
// reuse. Nothing is deleted, and nothing normalized, when bits is 0, which is the usual case.
func strip(h editableHeader, bits stripBits, connection, scratch []byte) []byte {
	if bits == 0 {
		return scratch
	}
	if bits&stripConnection != 0 && len(connection) > 0 {
		scratch = append(scratch[:0], connection...)
		for tok := range bytes.SplitSeq(scratch, []byte{','}) {
			tok = bytes.TrimSpace(tok)
			if len(tok) > 0 && !bytes.EqualFold(tok, []byte("close")) && !bytes.EqualFold(tok, []byte("keep-alive")) {
				h.Del(string(tok))
			}
		}
	}
	for i, name := range stripNames {
		if bits&(1<<i) != 0 {
			h.Del(name)
		}
	}
	return scratch
}
