package fsm

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/worker"
)

// snapshotFormat is the first byte of a persisted snapshot; the protobuf encoding of
// consensusv1.Snapshot follows. A new layout (say, a stream of records) gets a new byte.
const snapshotFormat = 1

// snapshot is a point-in-time copy of the state. It shares the immutable records with the FSM.
type snapshot struct {
	clusterID string
	applied   uint64
	workers   []*Record
	journal   []*JournalRecord
	draining  map[string]DrainingPeer
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// Persist implements raft.FSMSnapshot. Records are written sorted by id with deterministic map
// order, so equal states give equal bytes.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) write(w io.Writer) error {
	slices.SortFunc(s.workers, func(a, b *Record) int { return cmp.Compare(a.ID, b.ID) })
	msg := &consensusv1.Snapshot{
		ClusterId:    s.clusterID,
		AppliedIndex: s.applied,
		Workers:      make([]*consensusv1.WorkerRecord, len(s.workers)),
	}
	for i, r := range s.workers {
		msg.Workers[i] = recordToProto(r)
	}
	for _, j := range s.journal {
		msg.Journal = append(msg.Journal, journalToProto(j))
	}
	msg.Draining = drainingToProto(s.draining)
	buf := make([]byte, 1, 1+proto.Size(msg))
	buf[0] = snapshotFormat
	buf, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(buf, msg)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}

// readSnapshot decodes what write wrote.
func readSnapshot(r io.Reader) (state, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return state{}, fmt.Errorf("read snapshot: %w", err)
	}
	if len(data) == 0 || data[0] != snapshotFormat {
		return state{}, fmt.Errorf("read snapshot: unknown format (%d bytes)", len(data))
	}
	var msg consensusv1.Snapshot
	if err := proto.Unmarshal(data[1:], &msg); err != nil {
		return state{}, fmt.Errorf("decode snapshot: %w", err)
	}
	st := state{
		clusterID: msg.ClusterId,
		applied:   msg.AppliedIndex,
		workers:   make(map[worker.ID]*Record, len(msg.Workers)),
		draining:  drainingFromProto(msg.Draining),
	}
	for _, p := range msg.Workers {
		r := recordFromProto(p)
		if _, dup := st.workers[r.ID]; dup || r.ID == "" {
			return state{}, fmt.Errorf("decode snapshot: worker id %q is empty or repeated", r.ID)
		}
		st.workers[r.ID] = r
	}
	for _, p := range msg.Journal {
		st.journal = append(st.journal, journalFromProto(p))
	}
	return st, nil
}
