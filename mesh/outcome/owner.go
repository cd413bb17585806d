package outcome

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"google.golang.org/grpc"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
)

// run is count consecutive identical outcomes of one worker.
type run struct {
	worker string
	epoch  uint64
	o      Outcome
	count  uint32
}

// addResult is what ownerQueue.add did.
type addResult uint8

const (
	added     addResult = iota
	queueFull           // MaxPending runs wait already: dropped
	retired             // the queue's loop has ended: look the owner up again
)

// ownerQueue is one owner's pending runs and the loop that sends them. Report touches only
// the fields under mu; the stream, connection and backoff belong to the loop alone.
type ownerQueue struct {
	r     *Reporter
	owner string
	full  chan struct{} // cap 1: the pending runs reached MaxBatch

	mu      sync.Mutex
	pending []run
	active  bool // a report arrived since the loop last looked
	retired bool // the loop has ended; add refuses

	// Loop-only state.
	spare      []run // the slice pending had before the last take, reused
	lastActive time.Time
	send       context.Context // parent of the streams; canceled at the end of Close's last flush
	endSend    context.CancelFunc
	addr       string
	conn       *grpc.ClientConn
	stream     meshv1.Outcomes_ReportClient
	endStream  context.CancelFunc
	retryAt    time.Time
	backoff    time.Duration
	down       bool // the owner is unreachable and a line said so
}

func newOwnerQueue(r *Reporter, owner string) *ownerQueue {
	q := &ownerQueue{r: r, owner: owner, full: make(chan struct{}, 1)}
	q.send, q.endSend = context.WithCancel(context.Background())
	return q
}

// add appends one outcome, merged into the last run when worker, epoch and outcome match.
func (q *ownerQueue) add(worker string, epoch uint64, o Outcome) addResult {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.retired {
		return retired
	}
	q.active = true
	if n := len(q.pending); n > 0 {
		if l := &q.pending[n-1]; l.worker == worker && l.epoch == epoch && l.o == o && l.count < MaxRunCount {
			l.count++
			return added
		}
	}
	if len(q.pending) >= q.r.cfg.MaxPending {
		return queueFull
	}
	q.pending = append(q.pending, run{worker: worker, epoch: epoch, o: o, count: 1})
	if len(q.pending) == q.r.cfg.MaxBatch {
		select {
		case q.full <- struct{}{}:
		default:
		}
	}
	return added
}

// take returns the pending runs and leaves an empty slice in their place.
func (q *ownerQueue) take() []run {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.pending
	q.pending, q.spare = q.spare[:0], nil
	return b
}

// run is the owner's loop: a flush every FlushInterval or when a batch is full, until Close or
// IdleTimeout without a report. It recovers and logs a panic; the owner's next report then
// starts a new loop.
func (q *ownerQueue) run(life context.Context) {
	defer q.r.wg.Done()
	defer q.finish()
	defer func() {
		if p := recover(); p != nil {
			q.r.log.Error("panic in an outcome report loop", "owner", q.owner, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	t := time.NewTicker(q.r.cfg.FlushInterval)
	defer t.Stop()
	q.lastActive = time.Now()
	for {
		select {
		case <-life.Done():
			stop := time.AfterFunc(q.r.cfg.CloseTimeout, q.endSend)
			defer stop.Stop()
			q.flush()
			return
		case <-q.full:
			q.flush()
		case now := <-t.C:
			q.flush()
			if q.idle(now) {
				return
			}
		}
	}
}

// idle reports whether no report came for IdleTimeout and none waits; the queue is then retired.
func (q *ownerQueue) idle(now time.Time) bool {
	q.mu.Lock()
	if q.active {
		q.active, q.lastActive = false, now
	}
	quiet := now.Sub(q.lastActive) >= q.r.cfg.IdleTimeout && len(q.pending) == 0
	q.mu.Unlock()
	if !quiet {
		return false
	}
	q.r.mu.Lock()
	defer q.r.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.active || len(q.pending) > 0 { // a report came in between
		return false
	}
	q.retired = true
	q.r.retire(q)
	return true
}

// finish retires the queue, counts what it still holds as dropped, and closes its stream and
// connection.
func (q *ownerQueue) finish() {
	q.r.mu.Lock()
	q.mu.Lock()
	q.retired = true
	q.r.retire(q)
	left := q.pending
	q.pending = nil
	q.mu.Unlock()
	q.r.mu.Unlock()
	q.r.met.dropped.Add(float64(reports(left)))
	q.closeStream()
	q.closeConn()
	q.endSend()
}

// flush sends the pending runs in messages of at most MaxBatch runs. What cannot be sent (no
// address, no stream, a failed send) is dropped and counted.
func (q *ownerQueue) flush() {
	batch := q.take()
	defer func() { q.spare = batch[:0] }()
	b := batch
	if len(b) == 0 {
		return
	}
	if !q.open() {
		q.r.met.dropped.Add(float64(reports(b)))
		return
	}
	stop := time.AfterFunc(q.r.cfg.SendTimeout, q.endStream)
	defer stop.Stop()
	for len(b) > 0 {
		chunk := b[:min(len(b), q.r.cfg.MaxBatch)]
		b = b[len(chunk):]
		if err := q.stream.Send(q.message(chunk)); err != nil {
			q.r.met.dropped.Add(float64(reports(chunk) + reports(b)))
			q.fail(q.streamError(err))
			return
		}
		q.r.met.sent.Add(float64(reports(chunk)))
	}
}

func (q *ownerQueue) message(runs []run) *meshv1.OutcomeBatch {
	m := &meshv1.OutcomeBatch{From: q.r.cfg.From, Runs: make([]*meshv1.OutcomeRun, len(runs))}
	for i, r := range runs {
		o, timedOut := r.o.proto()
		m.Runs[i] = &meshv1.OutcomeRun{WorkerId: r.worker, Epoch: r.epoch, Outcome: o, TimedOut: timedOut, Count: r.count}
	}
	return m
}

// open makes sure a stream to the owner is open: it resolves the owner's address, dials it
// when it changed, and opens the stream bounded by OpenTimeout. It reports false while a
// failure's backoff runs.
func (q *ownerQueue) open() bool {
	if q.stream != nil {
		return true
	}
	if time.Now().Before(q.retryAt) {
		return false
	}
	addr, ok := q.r.cfg.Resolve(q.owner)
	if !ok {
		q.fail(errors.New("the owner's gRPC address is not known"))
		return false
	}
	if q.conn == nil || addr != q.addr {
		q.closeConn()
		conn, err := grpc.NewClient(addr, q.r.cfg.DialOptions...)
		if err != nil {
			q.fail(fmt.Errorf("dial %s: %w", addr, err))
			return false
		}
		q.conn, q.addr = conn, addr
	}
	ctx, cancel := context.WithCancel(q.send)
	timeout := time.AfterFunc(q.r.cfg.OpenTimeout, cancel)
	s, err := meshv1.NewOutcomesClient(q.conn).Report(ctx)
	if !timeout.Stop() && err == nil {
		err = context.DeadlineExceeded
	}
	if err != nil {
		cancel()
		q.closeConn() // the next attempt dials afresh, without grpc's own reconnect backoff
		q.fail(fmt.Errorf("open a stream to %s: %w", addr, err))
		return false
	}
	q.stream, q.endStream = s, cancel
	q.backoff, q.retryAt = 0, time.Time{}
	if q.down {
		q.down = false
		q.r.log.Info("outcome reports reach their owner again", "owner", q.owner, "addr", addr)
	}
	return true
}

// streamError returns why a stream failed: the status the owner ended it with, when a Send
// only said io.EOF.
func (q *ownerQueue) streamError(sendErr error) error {
	if _, err := q.stream.CloseAndRecv(); err != nil {
		return err
	}
	return sendErr
}

// fail drops the stream and waits a backoff before the next open; the first failure after a
// success is logged.
func (q *ownerQueue) fail(err error) {
	q.closeStream()
	q.backoff = min(max(2*q.backoff, q.r.cfg.FlushInterval), q.r.cfg.MaxBackoff)
	q.retryAt = time.Now().Add(q.backoff)
	if !q.down {
		q.down = true
		q.r.log.Warn("cannot send outcome reports to their owner: dropping them until it answers",
			"owner", q.owner, "err", err, "retry_in", q.backoff)
		return
	}
	q.r.log.Debug("cannot send outcome reports to their owner", "owner", q.owner, "err", err, "retry_in", q.backoff)
}

// closeStream ends the stream, asking the owner's totals (bounded by CloseTimeout) for the log.
func (q *ownerQueue) closeStream() {
	if q.stream == nil {
		return
	}
	stop := time.AfterFunc(q.r.cfg.CloseTimeout, q.endStream)
	defer stop.Stop()
	if ack, err := q.stream.CloseAndRecv(); err == nil {
		q.r.log.Debug("outcome report stream closed", "owner", q.owner,
			"accepted", ack.GetAccepted(), "rejected", ack.GetRejected())
	}
	q.endStream()
	q.stream, q.endStream = nil, nil
}

func (q *ownerQueue) closeConn() {
	if q.conn != nil {
		_ = q.conn.Close()
		q.conn, q.addr = nil, ""
	}
}

// reports is the number of reports in runs: the sum of their counts.
func reports(runs []run) int {
	n := 0
	for _, r := range runs {
		n += int(r.count)
	}
	return n
}
