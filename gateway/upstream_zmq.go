package gateway

import (
	"context"
	"errors"
)

// errNoZMQ: the ZMQ transport is not built yet.
var errNoZMQ = errors.New("zmq workers are not supported yet")

// newZMQTransport is the transport of a ZMQ worker.
func (g *Gateway) newZMQTransport(string) rpcTransport { return brokenTransport{err: errNoZMQ} }

// Check is the local health check of a ZMQ worker's link (handshake done, heartbeats fresh); it
// sends nothing to the engine. Other workers have none.
func (u *upstream) Check(ctx context.Context) error {
	return errNoZMQ
}
