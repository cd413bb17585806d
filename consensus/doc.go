// Package consensus runs this gateway's member of the raft group that holds the fleet's durable
// state (worker records, owners and epochs, operator flags, the weight-update journal), and
// offers the rest of meshgw a typed way to change it and to read what is applied.
//
// A write's way is shared by a few packages: consensus (the node: raft, its stores, applying,
// commit notices, the read barrier), consensus/fsm (the commands and the state they change),
// consensus/forward (a write taken to the leader), consensus/fleetack (the fleet's
// acknowledgement), and on the gateway's side gateway/admin (the proposer and the answer) and
// gateway/fleet (the pool that follows the state). docs/architecture.md draws it. Which
// servers of the raft configuration vote is consensus/voters's: the leader's duty there plans
// the changes and hands them to the node (Node.Configuration, Node.ChangeMembership).
//
// # Command lifecycle
//
//  1. Propose. A caller (the admin API, a health auto-removal, the leader's own duties) builds
//     an fsm.Command. Everything that must be the same on every node and is not in the state
//     (the time, a new id, the merged spec of a PATCH, the compare-and-set revision or fence)
//     is decided here, by the proposer, and carried inside the command. A gateway's writes go
//     through gateway/fleet.Writer, which bounds them in time.
//  2. Forward. Only the leader appends. A follower's Apply returns *NotLeaderError naming the
//     leader (ErrNoLeader when there is none); a forward.Forwarder sends the entry over gRPC to
//     the leader's Forward service (forward.Register), following NotLeader a bounded number of
//     times; the leader proposes it on behalf of the sender (Node.ApplyEntry). Nothing has been
//     written at this point. A leader that gives no answer within forward.Options.AttemptTimeout
//     is given up as soon as this node knows another leader, and the write is re-sent there
//     (see "Unknown outcomes"). The leader takes a forwarded
//     entry only from a peer (PeerAuth: a node certificate of the cluster's CA, or under
//     --insecure a member's host) and only of a type gateways forward (not InitCluster or
//     Reassign, which a leader proposes on itself; OperatorReassign, an operator's fenced moves, is
//     forwarded); a refusal writes nothing.
//  3. Append. The leader encodes the command (one type byte, then protobuf) and appends it to
//     its log. raft's Apply timeout bounds only this hand-over (ErrTimeout: nothing written).
//  4. Commit. The entry commits once a quorum of voters has stored it (bbolt fsyncs each append,
//     and stores the commit index raft stages with it). The leader tells its followers at once:
//     each time its FSM applies an entry it publishes a commit notice (Node.LeaderNotice), which
//     consensus/fleetack pushes to every follower, and a follower's relay hands it to raft as
//     the leader's next AppendEntries would (Node.OfferNotice, commitnotice.go), instead of
//     waiting for raft's next append or CommitTimeout.
//  5. Apply. Every node applies committed entries in log order to its FSM. Applying reads no
//     clock and no randomness, so every node reaches the same state and the same Result. An
//     entry that does not decode panics: skipping it would silently diverge. A business error
//     (not found, conflict, a lost compare-and-set, an invalid command) is not a failure of the
//     entry but its Result, the same everywhere. Each node stores the commit index once its FSM
//     applied an entry (keepCommit), so that a restart serves the entry before any leader exists
//     (replay.go); the applied state itself is saved later, coalesced (persist.go).
//  6. Answer and signal. On the leader, Apply returns the Result (and its business error) once
//     the entry is applied there; a forwarded write's answer travels back to the sender. On
//     every node the applied state changes and Watch signals, coalesced.
//  7. Reach the data plane. On every gateway, gateway/fleet.Reconciler reads the changed
//     records and brings the worker pool in step with them, then publishes the pool with the
//     raft index it reflects (Reconciler.WaitApplied): from then on that gateway routes by the
//     write.
//  8. Acknowledge. The writer's gateway waits until every live gateway's data plane applied the
//     write's index and a restart there would serve it, bounded by --fleet-ack-timeout-secs
//     (fleetack.FleetAck.Acknowledge: each gateway pushes its index to the writer on a stream
//     the writer keeps open). The admin API answers then, with the write's Result and a report
//     naming the gateways that acknowledged and those that lagged; a lagging gateway still
//     routes by the state before the write until it applies it.
//
// # Reading what was acknowledged
//
// A read that must include every write acknowledged before it (?consistent=true, a drain's
// last check, catching up after a restart) runs the read barrier, Node.ReadBarrier: it asks the
// leader for its read index (Node.ReadIndex: leadership confirmed by a quorum, an entry of its
// term committed) over the FleetAck service, and waits until this node's FSM applied it.
// Nothing is written.
//
// # Unknown outcomes
//
// If the leader loses leadership, shuts down, or the caller's deadline passes after step 3, the
// entry may still commit under the next leader, or it may be dropped. Apply then returns
// ErrOutcomeUnknown: the admin API must say so rather than report a failure, and a checker must
// treat the write as maybe-applied. Register and SetFlags are idempotent and the CAS commands
// fail cleanly on a second attempt, so a retry after reading the state is safe.
//
// A forward.Forwarder makes that retry itself when the outcome is unknown for want of an
// answer: the leader lost leadership, the connection broke, or the leader stayed silent past
// AttemptTimeout (paused, cut off) while this node learnt of a newer one. It re-sends the same
// entry to the leader it knows next, bounded by the write's deadline and MaxResends, and the
// re-send's answer is the write's, by command:
//
//  1. Register, SetFlags and ReplaceSpec without a revision, Transfer without an epoch, Drain:
//     idempotent. A second copy is Unchanged; the answer stands. OperatorReassign too: its marks
//     are idempotent, and a second copy of a move is skipped as "already owned by" its target.
//  2. SetFlags and ReplaceSpec with a revision, Transfer with an epoch, Remove (fenced or
//     not): compare-and-sets. A second copy is rejected when the first applied, so a conflict
//     or not-found answer is returned as ErrOutcomeUnknown wrapping the rejection; a success
//     stands (a first copy left in a deposed leader's log can no longer commit, and one that
//     committed earlier would have made the re-send fail).
//  3. An invalid rejection depends on the entry alone, and stands for every command.
//
// Only a write whose earlier copy may be in a log and that no re-send settles answers
// ErrOutcomeUnknown; a write sent to a paused leader succeeds on the next one.
//
// # Leadership
//
// Leadership is followed through raft's NotifyCh. On gaining it the node waits on a Barrier (so
// the FSM holds every entry of earlier terms), sets the cluster id if the state has none (a
// fresh bootstrap), refreshes its own address in the raft configuration, and then runs
// Config.LeaderLoop until leadership is lost.
//
// # Bootstrap
//
// A node without local raft state and without --join or --bootstrap-expect bootstraps a
// single-voter cluster at once: one gateway is a mesh of one. With --join it starts raft with
// no configuration and waits: the leader's voter reconciler (package consensus/voters, over
// Node.Configuration and Node.ChangeMembership) adds it as a non-voter once the mesh shows it
// alive, then promotes it while voters are wanted. With --bootstrap-expect N it waits too, and
// ExpectBootstrap calls BootstrapWith on the peer of lowest id once N peers without state see
// each other; the others grant it their votes and receive the configuration from it.
// A follower's state is current once CatchUp says it applied what its leader had. A node
// with state just starts (both flags are ignored, with an INFO line); raft restores the latest
// snapshot and replays the log.
//
// # Raft connections
//
// raft's TCP transport runs over our stream layer (config.go, stream.go): a TLS or cluster-key
// handshake when configured, then the hello (hello.go). Each connection a node opens says its
// cluster id and the server it means to reach (targetTransport carries raft's server id to the
// dial), and an acceptor refuses one of another cluster or meant for another server, so that a
// gateway on a dead member's raft address is neither taken over by that member's cluster nor
// counted for that member. A connection without the hello (an older gateway) is taken as it
// is, and none is sent to an address whose mesh member lacks the capability
// (Config.SendHello). A node without a cluster id of its own (a fresh joiner) takes only the
// cluster its live mesh peers agree on (Config.JoiningCluster), and none before its mesh join.
package consensus
