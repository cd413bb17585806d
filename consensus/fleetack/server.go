package fleetack

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
)

// Register serves the FleetAck service of api/consensus/v1 on s: WaitApplied for writers'
// acknowledgements, and ReadIndex when this node leads.
func (a *FleetAck) Register(s grpc.ServiceRegistrar) {
	consensusv1.RegisterFleetAckServer(s, &fleetAckServer{a: a})
}

// fleetAckServer is the peer's side of FleetAck.
type fleetAckServer struct {
	consensusv1.UnimplementedFleetAckServer
	a *FleetAck
}

// WaitApplied implements consensusv1.FleetAckServer. It answers a little before the caller's
// deadline when the index was not reached, so that the caller reads the applied index.
func (s *fleetAckServer) WaitApplied(ctx context.Context, req *consensusv1.WaitAppliedRequest) (*consensusv1.WaitAppliedResponse, error) {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := waitCtx.Done()
	go func() {
		select {
		case <-s.a.stop: // Close ends the waits it serves
			cancel()
		case <-done:
		}
	}()
	if d, ok := waitCtx.Deadline(); ok {
		margin := min(50*time.Millisecond, time.Until(d)/10)
		var cancelEarly context.CancelFunc
		waitCtx, cancelEarly = context.WithDeadline(waitCtx, d.Add(-margin))
		defer cancelEarly()
	}
	got := s.a.waitLocal(waitCtx, req.Index)
	return &consensusv1.WaitAppliedResponse{Applied: got, Reached: got >= req.Index}, nil
}

// WatchApplied implements consensusv1.FleetAckServer: it sends this node's applied index at
// once, then each time it grows, until the caller ends the stream or Close. A node whose data
// plane is not built yet (start-up) sends once it is. While this node leads, the stream also
// sends its commit notices (sendNotices). A watcher that asks for its own writes only is sent
// the applied index only when it covers one (ownWrites).
func (s *fleetAckServer) WatchApplied(req *consensusv1.WatchAppliedRequest, st grpc.ServerStreamingServer[consensusv1.AppliedIndex]) error {
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	go func() {
		select {
		case <-s.a.stop: // Close ends the streams it serves
			cancel()
		case <-ctx.Done():
		}
	}()
	var sendMu sync.Mutex // a stream's Send is not safe for concurrent use
	send := func(m *consensusv1.AppliedIndex) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return st.Send(m)
	}
	notices := make(chan error, 1)
	go func() {
		err := s.sendNotices(ctx, send)
		if err != nil {
			cancel() // the stream broke: end the other sender too
		}
		notices <- err
	}()
	next := everyIndex
	if req.OwnWrites && req.From != "" {
		next = s.ownWrites(req.From)
	}
	err := s.sendApplied(ctx, send, next)
	cancel()
	if nerr := <-notices; err == nil {
		err = nerr
	}
	return err
}

// sendApplied sends the data plane's applied index at once, then each time it reaches the index
// next names after the one sent, until ctx ends. next returns that index, or a channel to wait
// on before asking again.
func (s *fleetAckServer) sendApplied(ctx context.Context, send func(*consensusv1.AppliedIndex) error,
	next func(sent uint64) (want uint64, wait <-chan struct{})) error {
	retry := time.NewTimer(feedRetryMin)
	retry.Stop()
	defer retry.Stop()
	for want := uint64(0); ; {
		got := s.a.waitLocal(ctx, want)
		if ctx.Err() != nil {
			return nil // the caller left, or this node closes: the caller reads EOF and follows again
		}
		if got < want { // no data plane yet: look again shortly
			retry.Reset(feedRetryMin)
			select {
			case <-ctx.Done():
				return nil
			case <-retry.C:
			}
			continue
		}
		if err := send(&consensusv1.AppliedIndex{Applied: got}); err != nil {
			return err
		}
		var wait <-chan struct{}
		for want, wait = next(got); wait != nil; want, wait = next(got) {
			select {
			case <-ctx.Done():
				return nil
			case <-wait:
			}
		}
	}
}

// everyIndex is sendApplied's next for a watcher of every index: the one after the last sent.
func everyIndex(sent uint64) (uint64, <-chan struct{}) { return sent + 1, nil }

// ownWrites is sendApplied's next for a watcher of its own writes: the last entry node from
// proposed that the FSM applied (consensus.Node.AppliedFor), once it is past the index sent; until
// then, the FSM's next apply.
func (s *fleetAckServer) ownWrites(from string) func(sent uint64) (uint64, <-chan struct{}) {
	n := s.a.node
	return func(sent uint64) (uint64, <-chan struct{}) {
		applied := n.AppliedSignal() // before the index: no entry slips between
		if want := n.AppliedFor(from); want > sent {
			return want, nil
		}
		return 0, applied
	}
}

// sendNotices sends each commit notice this node publishes while it leads (noticeLoop), the
// last one at once, until ctx ends.
func (s *fleetAckServer) sendNotices(ctx context.Context, send func(*consensusv1.AppliedIndex) error) error {
	var sent consensus.CommitNotice
	for {
		changed := *s.a.noticeSig.Load() // before the notice: none slips between
		if c := s.a.notice.Load(); c != nil && *c != sent {
			sent = *c
			err := send(&consensusv1.AppliedIndex{Commit: &consensusv1.CommitNotice{
				Index: c.Index, EntryTerm: c.EntryTerm, LeaderTerm: c.LeaderTerm}})
			if err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// ReadIndex implements consensusv1.FleetAckServer with the node's read index
// (consensus.Node.ReadIndex). Every outcome is answered with status OK.
func (s *fleetAckServer) ReadIndex(ctx context.Context, req *consensusv1.ReadIndexRequest) (*consensusv1.ReadIndexResponse, error) {
	idx, err := s.a.node.ReadIndex(ctx)
	var nl *consensus.NotLeaderError
	switch {
	case err == nil:
		// The asker learned that idx committed from this node's commit notice, sent when this
		// node applied it.
		return &consensusv1.ReadIndexResponse{Status: consensusv1.ReadIndexStatus_READ_INDEX_STATUS_OK, Index: idx}, nil
	case errors.As(err, &nl):
		return &consensusv1.ReadIndexResponse{Status: consensusv1.ReadIndexStatus_READ_INDEX_STATUS_NOT_LEADER, LeaderId: nl.Leader}, nil
	}
	return &consensusv1.ReadIndexResponse{Status: consensusv1.ReadIndexStatus_READ_INDEX_STATUS_NO_LEADER}, nil
}
