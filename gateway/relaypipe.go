package gateway

import (
	"io"
	"sync"
)

// Relay buffering.
const (
	// relayReadSize is one read of the upstream body. fasthttp returns at most one upstream
	// chunk per read; SSE events are far smaller.
	relayReadSize = 16 << 10
	// relayMaxPending bounds what the reader holds ahead of a slow client before it waits.
	relayMaxPending = 64 << 10
	// relayBufKeep is the largest buffer handed back to relayBufs: pending may pass
	// relayMaxPending by one read and the error event.
	relayBufKeep = relayMaxPending + relayReadSize + 1<<10
)

// relayBufs recycles the relays' buffers across streams.
var relayBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, relayReadSize)
	return &b
}}

func getRelayBuf() []byte { return (*relayBufs.Get().(*[]byte))[:0] }

func putRelayBuf(b []byte) {
	if cap(b) >= relayReadSize && cap(b) <= relayBufKeep {
		b = b[:0]
		relayBufs.Put(&b)
	}
}

// relayPipe hands what one reader goroutine reads to one writer, gathering the reads the writer
// has not taken yet into one piece. Two buffers swap between the sides, so a stream copies each
// byte once here and allocates nothing once its buffers come from relayBufs. The zero value is
// closed; open readies it, free returns its buffers, and it can then be opened again.
type relayPipe struct {
	mu      sync.Mutex
	pending []byte // read, not yet taken (with the error event after a cut)
	ended   bool   // nothing more will be added: the answer ended or failed, or the writer quit
	cut     bool   // the upstream failed mid-stream
	quit    bool   // the writer is gone
	gone    bool   // the client closed its connection

	wake  chan struct{} // cap 1: pending grew, or ended was set
	space chan struct{} // cap 1: the writer took pending, or quit

	out []byte // the writer's buffer, swapped with pending by take
}

// open readies the pipe for a new stream.
func (p *relayPipe) open() {
	if p.wake == nil {
		p.wake, p.space = make(chan struct{}, 1), make(chan struct{}, 1)
	}
	drain(p.wake)
	drain(p.space)
	p.pending, p.out = getRelayBuf(), getRelayBuf()
	p.ended, p.cut, p.quit, p.gone = false, false, false, false
}

// free returns the buffers once both sides are done.
func (p *relayPipe) free() {
	putRelayBuf(p.pending)
	putRelayBuf(p.out)
	p.pending, p.out = nil, nil
}

// add appends one read and its error (io.EOF at the end; any other error cuts the stream and
// appends the SSE error event), then wakes the writer. It reports whether the reader should go
// on: false once the stream has ended or the writer quit.
func (p *relayPipe) add(b []byte, err error) bool {
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return false
	}
	p.pending = append(p.pending, b...)
	if err != nil {
		p.ended = true
		if err != io.EOF {
			p.cut = true
			p.pending = append(p.pending, sseUpstreamError...)
		}
	}
	ended := p.ended
	p.mu.Unlock()
	notify(p.wake)
	return !ended
}

// waitSpace holds the reader while relayMaxPending bytes are pending; false when the writer
// quit.
func (p *relayPipe) waitSpace() bool {
	for {
		p.mu.Lock()
		full, quit := len(p.pending) >= relayMaxPending, p.quit
		p.mu.Unlock()
		if quit {
			return false
		}
		if !full {
			return true
		}
		<-p.space
	}
}

// take waits until something is pending, the stream has ended or the client left, and returns
// all that is pending and whether the stream is over after it. Nothing pending and not over
// means the client left. The bytes stay the writer's until its next take.
func (p *relayPipe) take() ([]byte, bool) {
	p.mu.Lock()
	for len(p.pending) == 0 && !p.ended && !p.gone {
		p.mu.Unlock()
		<-p.wake
		p.mu.Lock()
	}
	b := p.pending
	p.pending = p.out[:0]
	ended := p.ended
	p.mu.Unlock()
	notify(p.space)
	p.out = b
	return b, ended
}

// leave tells the writer that the client closed its connection: a take waiting for the
// upstream returns at once.
func (p *relayPipe) leave() {
	p.mu.Lock()
	p.gone = true
	p.mu.Unlock()
	notify(p.wake)
}

// stop is the writer quitting: the reader's next add or waitSpace returns false. It reports
// whether the stream had not ended yet, i.e. the reader may be blocked reading the upstream.
func (p *relayPipe) stop() (unfinished bool) {
	p.mu.Lock()
	p.quit = true
	unfinished = !p.ended
	p.ended = true
	p.mu.Unlock()
	notify(p.space)
	return unfinished
}

// drain empties a wake-up channel of capacity 1.
func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// notify posts a wake-up on a channel of capacity 1 without blocking; one already posted is
// enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
