package zmqlink

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-zeromq/zmq4"
)

// ProtocolVersion is the version of the framing in docs/zmq-framing.md that this package
// speaks. It is in every header frame and in HELLO.
const ProtocolVersion = 1

// msgType is the type byte of a header frame.
type msgType byte

// Message types (docs/zmq-framing.md).
const (
	typeHello     msgType = 1 // gateway → engine: open a session
	typeWelcome   msgType = 2 // engine → gateway: session open, with the engine's facts
	typeHeartbeat msgType = 3 // both ways, every heartbeat interval
	typeRequest   msgType = 4 // gateway → engine: one model request
	typeChunk     msgType = 5 // engine → gateway: a piece of an answer
	typeEnd       msgType = 6 // engine → gateway: the answer is complete
	typeError     msgType = 7 // engine → gateway: the request (or, with id 0, the session) failed
	typeCancel    msgType = 8 // gateway → engine: stop working on a request
	typeGoodbye   msgType = 9 // both ways: the sender is closing the session
)

var typeNames = [...]string{"", "HELLO", "WELCOME", "HEARTBEAT", "REQUEST", "CHUNK", "END", "ERROR", "CANCEL", "GOODBYE"}

func (t msgType) String() string {
	if int(t) < len(typeNames) && t != 0 {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", byte(t))
}

// headerLen is the length of the header frame: magic "MG", version, type, request id.
const headerLen = 12

// message is one protocol message: a header frame, a meta frame (JSON or empty) and a payload
// frame (raw bytes or empty). On a ROUTER socket the peer identity frame comes first.
type message struct {
	typ     msgType
	id      uint64 // request id; 0 for session-level messages
	meta    []byte
	payload []byte
}

var errBadMessage = errors.New("zmqlink: malformed message")

// frames encodes m as the three frames of docs/zmq-framing.md.
func (m message) frames() [][]byte {
	h := make([]byte, headerLen)
	h[0], h[1], h[2], h[3] = 'M', 'G', ProtocolVersion, byte(m.typ)
	binary.BigEndian.PutUint64(h[4:], m.id)
	return [][]byte{h, m.meta, m.payload}
}

// parseMessage decodes the three frames of a message.
func parseMessage(frames [][]byte) (message, error) {
	if len(frames) != 3 {
		return message{}, fmt.Errorf("%w: %d frames, want 3", errBadMessage, len(frames))
	}
	h := frames[0]
	if len(h) != headerLen || h[0] != 'M' || h[1] != 'G' {
		return message{}, fmt.Errorf("%w: bad header frame", errBadMessage)
	}
	if h[2] != ProtocolVersion {
		return message{}, fmt.Errorf("%w: framing version %d, want %d", errBadMessage, h[2], ProtocolVersion)
	}
	return message{
		typ:     msgType(h[3]),
		id:      binary.BigEndian.Uint64(h[4:]),
		meta:    frames[1],
		payload: frames[2],
	}, nil
}

// newMsg builds a zmq4 message; prefix is the peer identity on a ROUTER, else nil.
func newMsg(prefix []byte, m message) zmq4.Msg {
	f := m.frames()
	if prefix != nil {
		f = append([][]byte{prefix}, f...)
	}
	return zmq4.NewMsgFrom(f...)
}

// metaJSON encodes a meta frame; the types encoded here cannot fail.
func metaJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("zmqlink: encoding %T: %v", v, err))
	}
	return b
}

// hello is the meta of HELLO.
type hello struct {
	Protocol int    `json:"protocol"`
	Gateway  string `json:"gateway"`
}

// Welcome is what an engine tells a gateway when a session opens.
type Welcome struct {
	// Protocol is the protocol version the engine speaks.
	Protocol int `json:"protocol"`
	// EngineID names the engine (its node name).
	EngineID string `json:"engine_id"`
	// Session is a nonce new at every engine start; a change means the engine restarted.
	Session string `json:"session"`
	// Models are the model ids the engine serves.
	Models []string `json:"models"`
	// MaxConcurrentRequests is how many requests the engine runs at once; more are refused.
	MaxConcurrentRequests int `json:"max_concurrent_requests"`
	// MaxContextLength is the longest context the engine takes, in tokens (0: not said).
	MaxContextLength int `json:"max_context_length"`
	// HeartbeatIntervalMS is how often each side sends HEARTBEAT.
	HeartbeatIntervalMS int `json:"heartbeat_interval_ms"`
}

// heartbeat is the meta of an engine's HEARTBEAT.
type heartbeat struct {
	Session string `json:"session"`
}

// requestMeta is the meta of REQUEST.
type requestMeta struct {
	Route     string `json:"route"`
	Stream    bool   `json:"stream"`
	RequestID string `json:"request_id,omitempty"`
}

// chunkMeta is the meta of the first CHUNK of an answer.
type chunkMeta struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
}

// errorMeta is the meta of ERROR.
type errorMeta struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status,omitempty"`
}

// Error codes of ERROR messages.
const (
	CodeNoSession   = "no_session"           // REQUEST or HEARTBEAT before HELLO: say HELLO again
	CodeProtocol    = "unsupported_protocol" // HELLO with a protocol the engine does not speak
	CodeUnavailable = "unavailable"          // the engine refuses sessions for now (unhealthy)
	CodeOverloaded  = "overloaded"           // max_concurrent_requests reached (status 429)
	CodeBadRequest  = "bad_request"          // a REQUEST that cannot be served (status 400)
	CodeEngine      = "engine_error"         // the engine failed the request mid-way
)
