package forward

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/consensustest"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// stall is what the leader does with a forwarded write while it stops answering.
type stall int

const (
	// heldUnread: the leader is paused before it reads the request (SIGSTOP): the entry never
	// reaches its log.
	heldUnread stall = iota
	// heldCommitted: the leader commits the entry, then is paused before it answers.
	heldCommitted
	// lostLeadership: the leader is cut off, appends the entry, cannot commit it, and answers
	// OUTCOME_UNKNOWN when it steps down.
	lostLeadership
)

func (s stall) String() string {
	return [...]string{"held unread", "held after committing", "lost leadership"}[s]
}

// stallLeader makes node lead's Forward service treat the next request as s says, and cuts lead
// off from the other voters in raft once the request is held (or, for lostLeadership, before it
// is proposed). held is closed when that is done. Later requests are held unread too, or, once
// leadership is lost, answered.
func (c *fwdCluster) stallLeader(lead int, s stall) (held <-chan struct{}) {
	ch := make(chan struct{})
	var first atomic.Bool
	var hook grpc.UnaryServerInterceptor = func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !first.CompareAndSwap(false, true) {
			if s == lostLeadership {
				return h(ctx, req)
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		switch s {
		case heldUnread:
		case heldCommitted:
			if _, err := h(ctx, req); err != nil {
				return nil, err
			}
		case lostLeadership:
			c.Isolate(lead)
			close(ch)
			return h(ctx, req)
		}
		c.Isolate(lead)
		close(ch)
		<-ctx.Done() // a paused process never answers; the caller gives up
		return nil, ctx.Err()
	}
	c.hooks[lead].Store(&hook)
	return ch
}

// TestForwardResendsToNewLeader sends a write through a follower to a leader that stops
// answering (paused before or after committing the entry, or deposed with it in its log). The
// write is re-sent to the leader the others elect, and answers what the per-command rule of
// resend.go says: the re-send's answer, or consensus.ErrOutcomeUnknown wrapping a rejection the
// first copy may have caused. Without re-sending, every case ends consensus.ErrOutcomeUnknown at
// the write's deadline.
func TestForwardResendsToNewLeader(t *testing.T) {
	yes := ptr(true)
	disable := fsm.FlagChange{Disabled: yes, Reason: "maintenance", By: "ops"}
	tests := []struct {
		name    string
		stall   stall
		cmd     func(rec fsm.Record) fsm.Command // rec: a worker registered beforehand
		outcome fsm.Outcome                      // when the write succeeds
		errIs   error                            // when it fails: consensus.ErrOutcomeUnknown and errIs
		state   func(rec fsm.Record, ok bool) bool
	}{
		{
			name: "register, first copy unread", stall: heldUnread,
			cmd:     func(fsm.Record) fsm.Command { return fsm.Register{Spec: consensustest.Spec(t, 8102), Owner: "n1"} },
			outcome: fsm.Created,
		},
		{
			name: "register, first copy committed", stall: heldCommitted,
			cmd:     func(fsm.Record) fsm.Command { return fsm.Register{Spec: consensustest.Spec(t, 8102), Owner: "n1"} },
			outcome: fsm.Unchanged,
		},
		{
			name: "register, first copy in the deposed leader's log", stall: lostLeadership,
			cmd:     func(fsm.Record) fsm.Command { return fsm.Register{Spec: consensustest.Spec(t, 8102), Owner: "n1"} },
			outcome: fsm.Created,
		},
		{
			name: "disable, first copy committed", stall: heldCommitted,
			cmd:     func(rec fsm.Record) fsm.Command { return fsm.SetFlags{ID: rec.ID, Flags: disable} },
			outcome: fsm.Unchanged,
			state:   func(rec fsm.Record, ok bool) bool { return ok && rec.Disabled },
		},
		{
			name: "compare-and-set disable, first copy unread", stall: heldUnread,
			cmd: func(rec fsm.Record) fsm.Command {
				return fsm.SetFlags{ID: rec.ID, Flags: disable, ExpectedRevision: rec.Revision}
			},
			outcome: fsm.Updated,
			state:   func(rec fsm.Record, ok bool) bool { return ok && rec.Disabled },
		},
		{
			name: "compare-and-set disable, first copy committed", stall: heldCommitted,
			cmd: func(rec fsm.Record) fsm.Command {
				return fsm.SetFlags{ID: rec.ID, Flags: disable, ExpectedRevision: rec.Revision}
			},
			errIs: fsm.ErrConflict,
			state: func(rec fsm.Record, ok bool) bool { return ok && rec.Disabled },
		},
		{
			name: "remove, first copy unread", stall: heldUnread,
			cmd:     func(rec fsm.Record) fsm.Command { return fsm.Remove{ID: rec.ID} },
			outcome: fsm.Removed,
			state:   func(_ fsm.Record, ok bool) bool { return !ok },
		},
		{
			name: "fenced remove, first copy committed", stall: heldCommitted,
			cmd: func(rec fsm.Record) fsm.Command {
				return fsm.Remove{ID: rec.ID, Fence: &fsm.Fence{Owner: rec.Owner, Epoch: rec.Epoch}}
			},
			errIs: fsm.ErrNotFound,
			state: func(_ fsm.Record, ok bool) bool { return !ok },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startForwardCluster(t, 3, Options{AttemptTimeout: 300 * time.Millisecond})
			lead := c.ready(t)
			rest := consensustest.Others(3, lead)
			from := rest[0]
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			pre, err := c.fwd[from].Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8101), Owner: "n1"})
			if err != nil {
				t.Fatal(err)
			}
			consensustest.WaitApplied(t, c.Nodes, pre.Index)
			cmd := tt.cmd(*pre.Record)

			held := c.stallLeader(lead, tt.stall)
			type answer struct {
				res fsm.Result
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := c.fwd[from].Apply(ctx, cmd)
				done <- answer{res, err}
			}()
			select {
			case <-held:
			case a := <-done:
				t.Fatalf("answered before the leader stalled: %+v, %v", a.res, a.err)
			}
			var a answer
			select {
			case a = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the write never ended")
			}
			if ctx.Err() != nil {
				t.Fatalf("the write ended only at its deadline: %+v, %v", a.res, a.err)
			}
			switch {
			case tt.errIs == nil && (a.err != nil || a.res.Outcome != tt.outcome):
				t.Fatalf("%+v, %v; want outcome %s", a.res, a.err, tt.outcome)
			case tt.errIs != nil && (!errors.Is(a.err, consensus.ErrOutcomeUnknown) || !errors.Is(a.err, tt.errIs)):
				t.Fatalf("%+v, %v; want consensus.ErrOutcomeUnknown wrapping %v", a.res, a.err, tt.errIs)
			case tt.errIs == nil && !a.res.Resent:
				t.Fatalf("%+v: the answer of a re-sent write is not marked Resent", a.res)
			}
			t.Logf("%s: %v, %v", tt.stall, a.res.Outcome, a.err)

			newLead := c.WaitLeader(t, rest...)
			if got := c.calls[lead].Load(); got < 2 { // the registration, then the stalled write
				t.Fatalf("the old leader received %d forwarded writes; want at least 2", got)
			}
			if newLead != from && c.calls[newLead].Load() == 0 {
				t.Fatal("the write was not re-sent to the new leader")
			}
			// Once healed, the old leader drops what it did not commit: every node holds the
			// same records, with the write applied once.
			c.Heal()
			c.WaitLeader(t, 0, 1, 2)
			barrier, err := c.fwd[from].Apply(ctx, fsm.Register{Spec: consensustest.Spec(t, 8199), Owner: "n1"})
			if err != nil {
				t.Fatal(err)
			}
			consensustest.WaitApplied(t, c.Nodes, barrier.Index)
			want := c.Nodes[newLead].Workers()
			for _, n := range c.Nodes {
				if diff := cmp.Diff(want, n.Workers()); diff != "" {
					t.Fatalf("%s differs from the new leader (-leader +node):\n%s", n.ID(), diff)
				}
			}
			if tt.state != nil {
				rec, ok := c.Nodes[newLead].Worker(pre.Record.ID)
				if !tt.state(rec, ok) {
					t.Fatalf("the record after the write: %+v (present %v)", rec, ok)
				}
			}
		})
	}
}

// TestResendSettle covers the answer of a re-sent write, given what the re-send came to.
func TestResendSettle(t *testing.T) {
	first := &unanswered{leader: "n1", err: fmt.Errorf("%w: no answer", consensus.ErrOutcomeUnknown)}
	rec := &fsm.Record{ID: "w-1"}
	conflict := &fsm.ConflictError{ID: "w-1", Reason: "revision is 9, not 7"}
	notFound := &fsm.NotFoundError{ID: "w-1"}
	invalid := &fsm.InvalidError{Field: "owner", Msg: "empty"}
	tests := []struct {
		name    string
		pending *unanswered
		res     fsm.Result
		err     error
		wantRes fsm.Result
		is      []error // errors.Is of the answer
		isNot   []error
	}{
		{"nothing pending: answered as it is", nil, fsm.Result{Index: 5, Outcome: fsm.Rejected, Err: conflict}, conflict,
			fsm.Result{Index: 5, Outcome: fsm.Rejected, Err: conflict}, []error{fsm.ErrConflict}, []error{consensus.ErrOutcomeUnknown}},
		{"applied", first, fsm.Result{Index: 5, Outcome: fsm.Created, Record: rec}, nil,
			fsm.Result{Index: 5, Outcome: fsm.Created, Record: rec}, nil, []error{consensus.ErrOutcomeUnknown}},
		{"conflict the first copy may have caused", first, fsm.Result{Index: 5, Outcome: fsm.Rejected, Err: conflict}, conflict,
			fsm.Result{}, []error{consensus.ErrOutcomeUnknown, fsm.ErrConflict}, nil},
		{"not found the first copy may have caused", first, fsm.Result{Index: 5, Outcome: fsm.Rejected, Err: notFound}, notFound,
			fsm.Result{}, []error{consensus.ErrOutcomeUnknown, fsm.ErrNotFound}, nil},
		{"invalid stands", first, fsm.Result{Index: 5, Outcome: fsm.Rejected, Err: invalid}, invalid,
			fsm.Result{Index: 5, Outcome: fsm.Rejected, Err: invalid}, []error{fsm.ErrInvalid}, []error{consensus.ErrOutcomeUnknown}},
		{"re-send wrote nothing", first, fsm.Result{}, consensus.ErrNoLeader,
			fsm.Result{}, []error{consensus.ErrOutcomeUnknown}, []error{consensus.ErrNoLeader}},
		{"re-send's deadline", first, fsm.Result{}, context.DeadlineExceeded,
			fsm.Result{}, []error{consensus.ErrOutcomeUnknown}, nil},
		{"re-send unanswered too", first, fsm.Result{}, &unanswered{leader: "n2", err: fmt.Errorf("%w: again", consensus.ErrOutcomeUnknown)},
			fsm.Result{}, []error{consensus.ErrOutcomeUnknown}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.pending.settle(tt.res, tt.err)
			if diff := cmp.Diff(tt.wantRes, res); diff != "" {
				t.Fatalf("result (-want +got):\n%s", diff)
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("%v: not errors.Is %v", err, target)
				}
			}
			for _, target := range tt.isNot {
				if errors.Is(err, target) {
					t.Errorf("%v: errors.Is %v", err, target)
				}
			}
			var un *unanswered
			if errors.As(err, &un) {
				t.Errorf("%v: the internal type leaks", err)
			}
		})
	}
}
