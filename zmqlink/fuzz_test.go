package zmqlink

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// recordSock is a socket that keeps what is sent on it; nothing else of zmq4.Socket is used.
type recordSock struct {
	zmq4.Socket
	mu   sync.Mutex
	sent []zmq4.Msg
}

func (s *recordSock) Send(m zmq4.Msg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, m)
	return nil
}

// FuzzFrames feeds arbitrary frames to both ends of the protocol: the gateway's link (an
// engine's WELCOME, HEARTBEAT, CHUNK, END, ERROR, GOODBYE, to a session with a stream open) and
// the engine's server (a gateway's HELLO, REQUEST, CANCEL, HEARTBEAT, GOODBYE). Nothing may
// panic; a message that parses encodes back to the same frames; every message the server sends
// in answer is well formed; a stream's answer ends at most once.
func FuzzFrames(f *testing.F) {
	seed := func(typ msgType, id uint64, meta, payload string) {
		fr := message{typ: typ, id: id, meta: []byte(meta), payload: []byte(payload)}.frames()
		f.Add(fr[0], fr[1], fr[2])
	}
	seed(typeWelcome, 0, `{"protocol":1,"engine_id":"e","session":"s1","models":["m"],"heartbeat_interval_ms":500}`, "")
	seed(typeHeartbeat, 0, `{"session":"s1"}`, "")
	seed(typeChunk, 1, `{"status":200,"content_type":"text/event-stream"}`, `{"x":1}`)
	seed(typeChunk, 1, ``, `more`)
	seed(typeEnd, 1, ``, ``)
	seed(typeError, 1, `{"code":"overloaded","message":"busy","status":429}`, ``)
	seed(typeError, 0, `{"code":"no_session"}`, ``)
	seed(typeGoodbye, 0, ``, ``)
	seed(typeHello, 0, `{"protocol":1,"gateway":"gw"}`, ``)
	seed(typeRequest, 7, `{"route":"/v1/chat/completions","stream":true,"request_id":"r"}`, `{"model":"m"}`)
	seed(typeCancel, 7, ``, ``)
	f.Add([]byte("MG\x02\x05\x00\x00\x00\x00\x00\x00\x00\x01"), []byte("{"), []byte{})
	f.Add([]byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, header, meta, payload []byte) {
		m, err := parseMessage([][]byte{header, meta, payload})
		if err != nil {
			return
		}
		if again := m.frames(); !bytes.Equal(again[0], header) || !bytes.Equal(again[1], meta) || !bytes.Equal(again[2], payload) {
			t.Fatalf("frames %q %q %q encode back as %q", header, meta, payload, again)
		}
		fuzzLink(t, m)
		fuzzServer(t, m)
	})
}

var discardLog = slog.New(slog.DiscardHandler)

// fuzzLink hands m twice to a ready-to-be-welcomed session with stream 1 open.
func fuzzLink(t *testing.T, m message) {
	l := &Link{url: "tcp://127.0.0.1:1", streams: map[uint64]*Stream{}, closed: make(chan struct{}), done: make(chan struct{}),
		cfg: linkConfig{now: func() time.Time { return time.Unix(1e9, 0) }, log: discardLog, staleBeats: DefaultStaleBeats}}
	s := &session{sock: &recordSock{}, welcomed: make(chan struct{}), dead: make(chan struct{}), readerEnd: make(chan struct{})}
	st := &Stream{l: l, sess: s, id: 1, notify: make(chan struct{}, 1)}
	l.streams[1] = st
	l.sess = s
	for range 2 {
		l.handle(s, m)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil && l.streams[1] == st {
		t.Fatalf("stream 1 ended (%v) but is still registered", st.err)
	}
}

// fuzzServer hands m to an engine's server twice, after a HELLO from the same gateway, and
// checks what it sends back.
func fuzzServer(t *testing.T, m message) {
	sock := &recordSock{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Server{
		cfg: ServerConfig{EngineID: "e", MaxConcurrentRequests: 1, HeartbeatInterval: time.Second,
			Handler: HandlerFunc(func(_ context.Context, req *ServerRequest, w *ChunkWriter) error {
				return w.Send(Chunk{Status: 200, ContentType: "application/json", Data: req.Body})
			})},
		log: discardLog, sock: sock, endpoint: "tcp://127.0.0.1:1", session: "s1",
		ctx: ctx, cancel: cancel, peers: map[string]*peer{},
	}
	identity := []byte("gw-identity")
	hello := message{typ: typeHello, meta: metaJSON(hello{Protocol: ProtocolVersion, Gateway: "gw"})}
	s.dispatch(identity, hello)
	for range 2 {
		s.dispatch(identity, m)
	}
	s.wg.Wait()
	sock.mu.Lock()
	defer sock.mu.Unlock()
	for _, out := range sock.sent {
		if len(out.Frames) != 4 || !bytes.Equal(out.Frames[0], identity) {
			t.Fatalf("the server sent %d frames to %q", len(out.Frames), out.Frames[0])
		}
		if _, err := parseMessage(out.Frames[1:]); err != nil {
			t.Fatalf("the server sent a malformed message: %v", err)
		}
	}
	if s.inflight != 0 {
		t.Fatalf("%d requests still counted in flight after they ended", s.inflight)
	}
}
