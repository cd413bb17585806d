package mesh

import (
	"fmt"

	"github.com/hashicorp/memberlist"
)

// maxQueuedBroadcasts bounds the gossip queue of bulletins, beats and relays. Beyond it the
// oldest, most retransmitted messages go: a gateway that learns of many changes at once (an
// owner of 10,000 workers starting) does not hold them all, and beats and resyncs repair what
// was dropped.
const maxQueuedBroadcasts = 4096

// mlTransport is the bulletin engine's transport over memberlist: gossip through a
// TransmitLimitedQueue that GetBroadcasts drains, direct sends through SendReliable.
type mlTransport struct{ m *Mesh }

func (t mlTransport) broadcast(name string, msg []byte) {
	q := t.m.queue
	q.QueueBroadcast(namedBroadcast{name: name, msg: msg})
	if q.NumQueued() > maxQueuedBroadcasts {
		q.Prune(maxQueuedBroadcasts)
	}
}

func (t mlTransport) sendTo(node string, msg []byte) error {
	if t.m.closed.Load() {
		return ErrShutdown
	}
	for _, n := range t.m.ml.Members() {
		if n.Name == node {
			if err := t.m.ml.SendReliable(n, msg); err != nil {
				return fmt.Errorf("mesh: send to %s: %s", node, oneLine(err))
			}
			t.m.metrics.bulletins.sentBytes(len(msg))
			return nil
		}
	}
	return fmt.Errorf("mesh: send to %s: not a member", node)
}

// namedBroadcast is one queued message; a newer one of the same name (a worker's next
// bulletin, an owner's next beat) replaces it in the queue.
type namedBroadcast struct {
	name string
	msg  []byte
}

var _ memberlist.NamedBroadcast = namedBroadcast{}

func (b namedBroadcast) Name() string                                { return b.name }
func (b namedBroadcast) Message() []byte                             { return b.msg }
func (b namedBroadcast) Finished()                                   {}
func (b namedBroadcast) Invalidates(other memberlist.Broadcast) bool { return false } // Name does it
