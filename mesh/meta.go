package mesh

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
	"google.golang.org/protobuf/proto"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
)

// MetaMaxSize is the most bytes of encoded metadata memberlist carries for a node
// (memberlist.MetaMaxSize).
const MetaMaxSize = memberlist.MetaMaxSize

// metaVersion is the first byte of encoded metadata: 1 is a protobuf meshv1.NodeMeta.
const metaVersion byte = 1

// leavingSize is what Leaving=true adds to the encoding (a one-byte tag and a one-byte value).
// EncodeMeta keeps room for it, so that Leave never fails on the size limit. RaftHello's two
// bytes need no such room: it is set from Start on and never changes, so Start's own encoding
// counts them.
const leavingSize = 2

// maxMetaString bounds every text field of decoded metadata, whatever the total size allows.
const maxMetaString = 255

// ErrMetaTooLarge is returned by EncodeMeta when the encoding exceeds MetaMaxSize.
var ErrMetaTooLarge = errors.New("node metadata exceeds memberlist's limit")

// Meta is what a gateway publishes about itself to its peers (DESIGN.md section 4). It travels
// in every memberlist alive message, so it holds only small, slowly changing facts.
type Meta struct {
	NodeID   string // --node-id; always the memberlist node name
	Version  string // meshgw build version
	Region   string // --region
	Color    string // --color, a free label (blue/green)
	HTTPAddr string // host:port of the gateway's HTTP listener
	RPCAddr  string // host:port of its gRPC listener (forwarding, outcome reports)
	RaftAddr string // host:port of raft's transport
	// ClusterID is the raft cluster id, empty until the node knows it. Peers with different
	// non-empty ids are foreign to each other and never merged.
	ClusterID string
	// AppliedIndex is the raft index of the last entry applied to the node's state.
	AppliedIndex uint64
	// OwnedWorkers is the number of workers the node owns.
	OwnedWorkers uint32
	// Incarnation is the random id made with the node's state directory: the same NodeID with a
	// new Incarnation has forgotten its raft state.
	Incarnation string
	// Rejoining is set while the node's raft state is new and no leader has confirmed that it
	// caught up (consensus.Node.Rejoining).
	Rejoining bool
	// Started is when this gateway process started: every start publishes a new one, on the same
	// state directory or not. Zero when unknown (an older build). A drain mark names the process
	// it drains by it.
	Started time.Time
	// Leaving is set by Leave just before the node's leave message, so that peers report it as
	// left rather than dead. SetMeta cannot change it.
	Leaving bool
	// RaftHello says the gateway reads the raft hello (consensus/hello.go) on the raft
	// connections it accepts. False for an older build, to which peers dial without it
	// (SpeaksRaftHello).
	RaftHello bool
}

// EncodeMeta encodes m as memberlist node metadata: a version byte, then protobuf. It fails when
// a field is too long or not UTF-8, or when the result (plus the two bytes Leaving needs, when
// it is not set yet) exceeds MetaMaxSize (ErrMetaTooLarge).
func EncodeMeta(m Meta) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	body, err := proto.Marshal(&meshv1.NodeMeta{
		NodeId:          m.NodeID,
		Version:         m.Version,
		Region:          m.Region,
		Color:           m.Color,
		HttpAddr:        m.HTTPAddr,
		RpcAddr:         m.RPCAddr,
		RaftAddr:        m.RaftAddr,
		ClusterId:       m.ClusterID,
		AppliedIndex:    m.AppliedIndex,
		OwnedWorkers:    m.OwnedWorkers,
		Leaving:         m.Leaving,
		Incarnation:     m.Incarnation,
		Rejoining:       m.Rejoining,
		StartedUnixNano: unixNano(m.Started),
		RaftHello:       m.RaftHello,
	})
	if err != nil {
		return nil, fmt.Errorf("mesh: encode node metadata: %w", err)
	}
	n := 1 + len(body)
	if !m.Leaving {
		n += leavingSize // Leave must be able to set it later
	}
	if n > MetaMaxSize {
		return nil, fmt.Errorf("mesh: %w: %d bytes, the limit is %d (shorten the node id, region, color or advertised addresses)",
			ErrMetaTooLarge, n, MetaMaxSize)
	}
	return append([]byte{metaVersion}, body...), nil
}

// DecodeMeta decodes metadata a peer sent. It is outside input: every length is bounded and a
// malformed encoding is an error, never a panic.
func DecodeMeta(b []byte) (Meta, error) {
	switch {
	case len(b) == 0:
		return Meta{}, errors.New("mesh: no node metadata")
	case len(b) > MetaMaxSize:
		return Meta{}, fmt.Errorf("mesh: node metadata is %d bytes, more than %d", len(b), MetaMaxSize)
	case b[0] != metaVersion:
		return Meta{}, fmt.Errorf("mesh: node metadata version %d, this build reads %d", b[0], metaVersion)
	}
	var pb meshv1.NodeMeta
	if err := proto.Unmarshal(b[1:], &pb); err != nil {
		return Meta{}, fmt.Errorf("mesh: decode node metadata: %w", err)
	}
	m := Meta{
		NodeID:       pb.GetNodeId(),
		Version:      pb.GetVersion(),
		Region:       pb.GetRegion(),
		Color:        pb.GetColor(),
		HTTPAddr:     pb.GetHttpAddr(),
		RPCAddr:      pb.GetRpcAddr(),
		RaftAddr:     pb.GetRaftAddr(),
		ClusterID:    pb.GetClusterId(),
		AppliedIndex: pb.GetAppliedIndex(),
		OwnedWorkers: pb.GetOwnedWorkers(),
		Leaving:      pb.GetLeaving(),
		Incarnation:  pb.GetIncarnation(),
		Rejoining:    pb.GetRejoining(),
		Started:      fromUnixNano(pb.GetStartedUnixNano()),
		RaftHello:    pb.GetRaftHello(),
	}
	if err := m.validate(); err != nil {
		return Meta{}, err
	}
	return m, nil
}

// validate checks what both sides require: a node id, and text fields that are UTF-8 and at
// most maxMetaString bytes each.
func (m Meta) validate() error {
	if m.NodeID == "" {
		return errors.New("mesh: node metadata has no node id")
	}
	for _, f := range [...]struct{ name, v string }{
		{"node id", m.NodeID}, {"version", m.Version}, {"region", m.Region}, {"color", m.Color},
		{"HTTP address", m.HTTPAddr}, {"rpc address", m.RPCAddr}, {"raft address", m.RaftAddr},
		{"cluster id", m.ClusterID}, {"incarnation", m.Incarnation},
	} {
		if len(f.v) > maxMetaString {
			return fmt.Errorf("mesh: node metadata %s is %d bytes, more than %d", f.name, len(f.v), maxMetaString)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("mesh: node metadata %s is not UTF-8", f.name)
		}
	}
	return nil
}

// unixNano and fromUnixNano are the wire form of a time: Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// SpeaksRaftHello reports whether a raft connection to raftAddr may carry the raft hello, from
// what members (Mesh.Members) say: not when the member of this cluster the mesh lists at that
// address lacks Meta.RaftHello, an older build that would close the connection on it. A live
// (or suspect) member there speaks for the address, else the dead and left ones do, since the
// process behind it is then unknown; several that disagree hold the hello back. A foreign member
// is no reason to hold it back: it is no member of this cluster, and refusing the connection is
// what the hello is for. An address no member lists gets the hello.
func SpeaksRaftHello(members []Member, raftAddr string) bool {
	live, gone, anyLive := true, true, false
	for _, m := range members {
		if m.Meta.RaftAddr != raftAddr {
			continue
		}
		switch m.Status {
		case StatusForeign:
		case StatusDead, StatusLeft:
			gone = gone && m.Meta.RaftHello
		default:
			anyLive, live = true, live && m.Meta.RaftHello
		}
	}
	if anyLive {
		return live
	}
	return gone
}

// PeersCluster returns the cluster id that the live members of members other than self carry,
// "" when none carries one or they carry different ones: the cluster a node that knows no id of
// its own is joining (consensus.Config.JoiningCluster).
func PeersCluster(members []Member, self string) string {
	id := ""
	for _, m := range members {
		if m.ID == self || m.Meta.ClusterID == "" || (m.Status != StatusAlive && m.Status != StatusSuspect) {
			continue
		}
		if id != "" && id != m.Meta.ClusterID {
			return ""
		}
		id = m.Meta.ClusterID
	}
	return id
}
