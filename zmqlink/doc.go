// Package zmqlink is meshgw's link to ZMQ engines: the gateway's DEALER side (Link) and the
// engine's ROUTER side (Server) of the protocol documented in docs/zmq-framing.md.
//
// The contract, as the gateway sees it:
//
//  1. Dial returns at once; the link connects in the background (tcp://HOST:PORT or
//     ipc:///PATH) and sends HELLO{protocol, gateway node id}.
//  2. The engine answers WELCOME{engine id, session nonce, models, limits, heartbeat interval}.
//     Until then the worker is pending: Check returns an error wrapping ErrNotReady and Do
//     refuses. A link that gets no WELCOME within the handshake timeout starts over.
//  3. The engine sends HEARTBEAT{session} to each gateway every interval, and the link sends
//     HEARTBEAT back at the same interval so that the engine can drop dead sessions. The
//     health probe, Check, is local: it sends nothing and passes while the last heartbeat is
//     fresher than 3 intervals.
//  4. A session is never repaired in place. When heartbeats go stale (Check), the session nonce
//     changes, the socket fails or the engine refuses, the link closes the socket, fails the
//     requests in flight with ErrLinkLost, and makes a new socket and a new HELLO, backing off
//     between failed attempts. zmq4 sockets do not recover well by themselves: its Dial gives
//     up after about 2.5 s unless told to reconnect, and a restarted ROUTER can leave receives
//     blocked. So an engine restarted on the same address is rejoined with no re-registration.
//  5. Do multiplexes requests over the session: REQUEST{id, route, body, stream} is answered by
//     CHUNK{id, status and content type on the first, data}... and END{id} or ERROR{id,
//     message}. Ending the request's context sends CANCEL{id}.
//  6. Close says GOODBYE, closes the socket and fails open streams with ErrClosed.
package zmqlink
