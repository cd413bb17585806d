package zmqlink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Request is one model request as the gateway forwards it.
type Request struct {
	// Route is the route the client called, such as "/v1/chat/completions".
	Route string
	// Body is the original request body, byte for byte.
	Body []byte
	// Stream says whether the client asked for a streamed (SSE) answer.
	Stream bool
	// RequestID is the gateway's request id (X-Mesh-Request-Id), for the engine's logs.
	RequestID string
}

// Chunk is a piece of an answer. The first chunk carries the HTTP-equivalent Status and the
// ContentType; later chunks have them zero. For a streamed answer each chunk's Data is the
// payload of one SSE event ("[DONE]" last); otherwise the Data of all chunks concatenate to the
// body.
type Chunk struct {
	Status      int
	ContentType string
	Data        []byte
}

// EngineError is an ERROR message from the engine.
type EngineError struct {
	// Code is one of the Code constants, or what the engine chose.
	Code string
	// Message says what went wrong.
	Message string
	// Status is the HTTP-equivalent status, when the engine gave one (429 for overloaded).
	Status int
}

func (e *EngineError) Error() string {
	return fmt.Sprintf("zmqlink: engine error %s: %s", e.Code, e.Message)
}

func decodeEngineError(meta []byte) *EngineError {
	var em errorMeta
	if err := json.Unmarshal(meta, &em); err != nil {
		return &EngineError{Code: CodeEngine, Message: "undecodable ERROR: " + err.Error()}
	}
	return &EngineError{Code: em.Code, Message: em.Message, Status: em.Status}
}

// ErrStreamClosed is what Next returns after the caller closed the stream.
var ErrStreamClosed = errors.New("zmqlink: stream closed")

// Stream is the answer to one request. Next and Close may be called from different goroutines.
type Stream struct {
	l    *Link
	sess *session
	id   uint64
	stop func() bool // stops the context watch

	mu     sync.Mutex
	queue  []Chunk
	err    error // io.EOF after END, or why the stream failed
	notify chan struct{}
}

// Do sends req to the engine and returns its answer as a stream. It fails at once with an error
// wrapping ErrNotReady when no session is open. Ending ctx cancels the request: the engine is
// sent CANCEL and Next returns ctx's error.
func (l *Link) Do(ctx context.Context, req Request) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	s := l.sess
	if s == nil || !s.ready {
		err := l.lastErr
		l.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
		}
		return nil, ErrNotReady
	}
	l.nextID++
	st := &Stream{l: l, sess: s, id: l.nextID, notify: make(chan struct{}, 1)}
	l.streams[st.id] = st
	l.mu.Unlock()
	meta := metaJSON(requestMeta{Route: req.Route, Stream: req.Stream, RequestID: req.RequestID})
	if err := s.send(message{typ: typeRequest, id: st.id, meta: meta, payload: req.Body}); err != nil {
		err = fmt.Errorf("%w: sending REQUEST: %v", ErrLinkLost, err)
		st.finish(err)
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { st.abort(ctx.Err()) })
	st.mu.Lock()
	if st.err != nil { // the answer is already complete
		st.mu.Unlock()
		stop()
		return st, nil
	}
	st.stop = stop
	st.mu.Unlock()
	return st, nil
}

// Next returns the next chunk, io.EOF after the last, or the error that ended the stream: an
// *EngineError or an error wrapping ErrLinkLost (after the chunks that came before it), or at
// once the request context's error or ErrStreamClosed.
func (st *Stream) Next() (Chunk, error) {
	for {
		st.mu.Lock()
		if len(st.queue) > 0 {
			c := st.queue[0]
			st.queue[0] = Chunk{}
			st.queue = st.queue[1:]
			st.mu.Unlock()
			return c, nil
		}
		err := st.err
		st.mu.Unlock()
		if err != nil {
			return Chunk{}, err
		}
		<-st.notify
	}
}

// Close abandons the stream; if the answer is not complete, the engine is sent CANCEL.
func (st *Stream) Close() error {
	st.abort(ErrStreamClosed)
	return nil
}

// abort ends the stream with err, dropping chunks not yet read, and, if the answer was still
// coming, tells the engine.
func (st *Stream) abort(err error) {
	st.mu.Lock()
	st.queue = nil
	st.mu.Unlock()
	if st.finish(err) {
		_ = st.sess.send(message{typ: typeCancel, id: st.id})
	}
}

// deliver takes a CHUNK, END or ERROR for this stream; it never blocks.
func (st *Stream) deliver(m message) {
	switch m.typ {
	case typeChunk:
		c := Chunk{Data: m.payload}
		if len(m.meta) > 0 {
			var cm chunkMeta
			if err := json.Unmarshal(m.meta, &cm); err != nil {
				st.finish(&EngineError{Code: CodeEngine, Message: "undecodable CHUNK meta: " + err.Error()})
				return
			}
			c.Status, c.ContentType = cm.Status, cm.ContentType
		}
		st.mu.Lock()
		if st.err == nil {
			st.queue = append(st.queue, c)
		}
		st.mu.Unlock()
		st.wake()
	case typeEnd:
		st.finish(io.EOF)
	case typeError:
		st.finish(decodeEngineError(m.meta))
	}
}

// finish sets the stream's end once, unregisters it and wakes Next. It reports whether this
// call ended the stream.
func (st *Stream) finish(err error) bool {
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return false
	}
	st.err = err
	stop := st.stop
	st.stop = nil
	st.mu.Unlock()
	st.l.mu.Lock()
	if st.l.streams[st.id] == st {
		delete(st.l.streams, st.id)
	}
	st.l.mu.Unlock()
	if stop != nil {
		stop()
	}
	st.wake()
	return true
}

func (st *Stream) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}
