package consensus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/meshgw/meshgw/mesh"
)

// The raft hello is what a gateway says on each raft connection it opens, after the TLS or
// cluster-key handshake and before raft's first byte, so that the acceptor can refuse a
// connection that was not meant for it: one from another cluster, or one meant for another
// server of the same cluster, both of which reach it when it binds the raft address of a dead
// member (Kubernetes reuses pod IPs). Its wire form:
//
//	"MGR1"                      helloMagic; raft's first byte is an RPC type, 0 to 4
//	uint16 length, cluster id   the dialer's cluster id, "" before it knows one
//	uint16 length, server id    the dialer's own raft server id
//	uint16 length, server id    the server the dialer means to reach, "" when unknown
//
// Lengths are big-endian and at most maxHelloField. An acceptor whose connection starts with
// any other byte takes it as an older gateway's raw raft stream, unchanged; a dialer sends the
// hello unless the mesh lists a member of its cluster at that address without Meta.RaftHello
// (Config.SendHello), since an older acceptor would read the magic as an unknown RPC type and
// close the connection.
var helloMagic = [4]byte{'M', 'G', 'R', '1'}

// maxHelloField bounds each field of a hello, on both sides.
const maxHelloField = 256

// hello is what a dialer says about a raft connection.
type hello struct {
	Cluster string // the dialer's cluster id, "" before it knows one
	From    string // the dialer's raft server id
	To      string // the raft server id the dialer means to reach, "" when unknown
}

// errHelloField is returned for a hello field longer than maxHelloField.
var errHelloField = fmt.Errorf("a raft hello field is longer than %d bytes", maxHelloField)

// encode returns h's wire form.
func (h hello) encode() ([]byte, error) {
	b := append(make([]byte, 0, len(helloMagic)+6+len(h.Cluster)+len(h.From)+len(h.To)), helloMagic[:]...)
	for _, f := range [...]string{h.Cluster, h.From, h.To} {
		if len(f) > maxHelloField {
			return nil, errHelloField
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return b, nil
}

// readHello reads one hello from r, exactly: not a byte past it. It is outside input: a wrong
// magic, a truncated hello or an overlong field is an error.
func readHello(r io.Reader) (hello, error) {
	var magic [len(helloMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return hello{}, fmt.Errorf("raft hello: %w", err)
	}
	if magic != helloMagic {
		return hello{}, fmt.Errorf("raft hello: magic %q, want %q", magic[:], helloMagic[:])
	}
	var fields [3]string
	for i := range fields {
		var n [2]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return hello{}, fmt.Errorf("raft hello: %w", noEOF(err))
		}
		size := binary.BigEndian.Uint16(n[:])
		if size > maxHelloField {
			return hello{}, fmt.Errorf("raft hello: a field of %d bytes: %w", size, errHelloField)
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(r, b); err != nil {
			return hello{}, fmt.Errorf("raft hello: %w", noEOF(err))
		}
		fields[i] = string(b)
	}
	return hello{Cluster: fields[0], From: fields[1], To: fields[2]}, nil
}

// noEOF turns the end of the stream inside a hello into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// refusal says why a node whose server id is self refuses a connection with hello h: "another
// cluster", "no cluster id yet" or "another server", "" when it takes it. ours is the cluster id
// the node judges by (raftHello.ours). A strict node that knows none (its raft state holds no
// id, and its mesh peers tell none) cannot tell its own cluster's leader from another's, and
// refuses every hello that carries an id; a node that is not strict (Config.JoiningCluster is
// nil) then takes any cluster.
func (h hello) refusal(self, ours string, strict bool) string {
	switch {
	case h.Cluster != "" && ours != "" && h.Cluster != ours:
		return "another cluster"
	case h.Cluster != "" && ours == "" && strict:
		return "no cluster id yet"
	case h.To != "" && h.To != self:
		return "another server"
	}
	return ""
}

// refusedHello is the error of a connection whose hello was judged and refused.
type refusedHello struct {
	why   string // hello.refusal's
	hello hello
}

func (e *refusedHello) Error() string {
	return fmt.Sprintf("refused: %s (from %q of cluster %q, meant for %q)", e.why, e.hello.From, e.hello.Cluster, e.hello.To)
}

// raftHello is both sides of the hello for one node.
type raftHello struct {
	self    string        // this node's raft server id
	cluster func() string // this node's cluster id, "" until it knows one
	// joining is the cluster id this node is joining while it knows none (Config.JoiningCluster);
	// nil means none, and a node without a cluster id then takes any.
	joining func() string
	// sendTo reports whether to send the hello to raft address addr (Config.SendHello); nil
	// means to every address.
	sendTo func(addr string) bool
	log    *slog.Logger
	// refused spaces the WARN lines of refused hellos, apart from the handshakes' lines, so that
	// a port scanner's refusals do not hide them.
	refused refusals
}

// ours is the cluster id an accepted hello is judged by: this node's, else while it has none
// the one it is joining. strict is set when the node has no id of its own and a joining hook:
// it then refuses a hello carrying any id but the one returned (hello.refusal).
func (h *raftHello) ours() (id string, strict bool) {
	if id := h.cluster(); id != "" || h.joining == nil {
		return id, false
	}
	return h.joining(), true
}

// judge says why this node refuses hello got, "" when it takes it (hello.refusal).
func (h *raftHello) judge(got hello) string {
	ours, strict := h.ours()
	return got.refusal(h.self, ours, strict)
}

// JoiningFromMesh is Config.JoiningCluster for a gateway whose server id is self and whose mesh
// lists members (nil before the mesh starts): the cluster id its live mesh peers agree on
// (mesh.PeersCluster). It is "" until the mesh's join merged with a peer that carries one, so
// that until then the node's raft takes no connection of any cluster (hello.refusal).
func JoiningFromMesh(self string, members func() []mesh.Member) func() string {
	return func() string { return mesh.PeersCluster(members(), self) }
}

// dial says the hello on c, a connection to addr meant for server to, by deadline, unless
// sendTo says the gateway at addr would not read it.
func (h *raftHello) dial(c net.Conn, addr, to string, deadline time.Time) error {
	if h.sendTo != nil && !h.sendTo(addr) {
		return nil
	}
	b, err := hello{Cluster: h.cluster(), From: h.self, To: to}.encode()
	if err != nil {
		return err
	}
	if err := c.SetWriteDeadline(deadline); err != nil {
		return err
	}
	if _, err := c.Write(b); err != nil {
		return err
	}
	return c.SetWriteDeadline(time.Time{})
}

// accept reads what an accepted connection c starts with, by deadline: a hello, which it
// judges, or raft's own first byte (an older gateway), which it hands back in front of c. It
// returns the connection raft reads, or why it refuses c: a *refusedHello, a malformed hello,
// or io.EOF when c closed before a byte.
func (h *raftHello) accept(c net.Conn, deadline time.Time) (net.Conn, error) {
	if err := c.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return nil, err
	}
	out := net.Conn(&prefixConn{Conn: c, first: first[:]})
	if first[0] == helloMagic[0] {
		got, err := readHello(io.MultiReader(bytes.NewReader(first[:]), c))
		if err != nil {
			return nil, err
		}
		if why := h.judge(got); why != "" {
			return nil, &refusedHello{why: why, hello: got}
		}
		out = c
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return out, nil
}

// warn logs why the connection from remote was refused after err, spaced; a connection that
// closed before it said a byte (a TCP health check, a dialer that gave up) is no refusal.
func (h *raftHello) warn(remote string, err error) {
	var refused *refusedHello
	switch {
	case errors.Is(err, io.EOF):
	case errors.As(err, &refused):
		ours, _ := h.ours()
		h.refused.warn(h.log, "raft listener: refused a connection not meant for this node", "remote", remote,
			"reason", refused.why, "from", refused.hello.From, "meant_for", refused.hello.To, "their_cluster", refused.hello.Cluster,
			"this_node", h.self, "our_cluster", ours)
	default:
		h.refused.warn(h.log, "raft listener: refused a connection whose raft hello did not read", "remote", remote, "err", err)
	}
}

// prefixConn is a connection whose first bytes were read already: Read returns them first.
type prefixConn struct {
	net.Conn
	first []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
