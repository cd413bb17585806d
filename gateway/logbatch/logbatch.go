// Package logbatch batches a log's writes: records written through Batched are kept in memory
// and written together every few milliseconds, so that a record per request costs a copy, not
// a system call; lines written directly go out at once, after what is batched.
package logbatch

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultInterval = 5 * time.Millisecond
	DefaultLimit    = 4 << 20
)

// Options tune a Writer.
type Options struct {
	// Interval is the longest a batched record waits before it is written. Default
	// DefaultInterval (5 ms).
	Interval time.Duration
	// Limit is the most bytes batched and not yet being written; a batched record that would
	// pass it is dropped (and counted) rather than wait. Default DefaultLimit (4 MiB).
	Limit int
}

// Writer is a log's output with a batch in front of it. Its Write goes out at once, with the
// batched records before it in the same write, so lines keep the order they were logged in;
// Batched's Write only copies the record into the batch. One goroutine writes a batch once
// Interval has passed since its first record; it sleeps while nothing is batched.
//
// What is batched and not yet written is lost if the process dies without Close: at most the
// records of the last Interval.
type Writer struct {
	out      io.Writer
	interval time.Duration
	limit    int
	kick     chan struct{} // a record went into an empty batch
	half     chan struct{} // the batch passed half its limit: write it now
	done     chan struct{} // closed by Close
	flusher  sync.WaitGroup
	dropped  atomic.Uint64

	// mu guards the batch; it is never held while writing to out, so that a record is never
	// kept waiting by a slow output.
	mu     sync.Mutex
	batch  []byte
	closed bool

	// wmu orders the writes to out and guards spare, the buffer a batch is written from.
	wmu   sync.Mutex
	spare []byte
}

// New returns a Writer to out and starts its flushing goroutine; Close stops it.
func New(out io.Writer, o Options) *Writer {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	w := &Writer{out: out, interval: o.Interval, limit: o.Limit, kick: make(chan struct{}, 1), half: make(chan struct{}, 1), done: make(chan struct{})}
	w.flusher.Add(1)
	go w.flushLoop()
	return w
}

// Write writes the batch, then p, now, in one write to the output. It is for the log's rare
// lines (state changes, warnings, errors), which must be neither dropped nor delayed.
func (w *Writer) Write(p []byte) (int, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	b := append(w.take(), p...)
	_, err := w.out.Write(b)
	w.spare = b[:0]
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Batched returns the writer of the batched records: its Write copies one record into the
// batch and returns without waiting for the output; when the batch is at its limit the record
// is dropped and counted (Dropped). After Close, it writes at once.
func (w *Writer) Batched() io.Writer { return batched{w} }

type batched struct{ w *Writer }

func (b batched) Write(p []byte) (int, error) { return b.w.add(p) }

// add copies p into the batch, or drops it when the batch is full.
func (w *Writer) add(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.Write(p)
	}
	if len(w.batch)+len(p) > w.limit {
		w.mu.Unlock()
		w.dropped.Add(1)
		return len(p), nil
	}
	n := len(w.batch)
	w.batch = append(w.batch, p...)
	w.mu.Unlock()
	if n == 0 {
		signal(w.kick)
	}
	if n < w.limit/2 && n+len(p) >= w.limit/2 {
		signal(w.half)
	}
	return len(p), nil
}

// signal sends on c, a channel of one, unless a signal is already waiting.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// take returns the batch and starts an empty one in spare's buffer. wmu is held.
func (w *Writer) take() []byte {
	w.mu.Lock()
	b := w.batch
	w.batch = w.spare[:0]
	w.mu.Unlock()
	w.spare = nil
	return b
}

// Flush writes the batch now.
func (w *Writer) Flush() error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	b := w.take()
	var err error
	if len(b) > 0 {
		_, err = w.out.Write(b)
	}
	w.spare = b[:0]
	return err
}

// Dropped returns how many batched records were dropped because the batch was full.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Close writes the batch and stops the flushing goroutine; records batched later are written
// at once. It may be called more than once.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.done)
	w.flusher.Wait()
	return w.Flush()
}

// flushLoop writes each batch once Interval has passed since its first record, or as soon as
// it passes half its limit, which a burst reaches first.
func (w *Writer) flushLoop() {
	defer w.flusher.Done()
	t := time.NewTimer(w.interval)
	t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-w.kick:
			t.Reset(w.interval)
			select {
			case <-w.done:
				return
			case <-t.C:
			case <-w.half:
				t.Stop()
			}
		case <-w.half:
		}
		_ = w.Flush() // a log whose output fails has nowhere to report it
	}
}
