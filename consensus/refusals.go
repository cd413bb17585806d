package consensus

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// refusals spaces the WARN lines of refused connections and calls to one listener: a port
// scanner or a misconfigured peer retries without end, and would otherwise fill the log. The
// first refusal is logged at once, later ones at most every refusalLogEvery, each line saying
// how many were not logged since the last.
type refusals struct {
	last    atomic.Int64 // unix nanoseconds of the last line
	skipped atomic.Int64
}

func (r *refusals) warn(log *slog.Logger, msg string, args ...any) {
	now := time.Now().UnixNano()
	last := r.last.Load()
	if last != 0 && now-last < int64(refusalLogEvery) || !r.last.CompareAndSwap(last, now) {
		r.skipped.Add(1)
		return
	}
	log.Warn(msg, append(args, "refusals_not_logged", r.skipped.Swap(0))...)
}

// LogRefusedHandshakes wraps the TLS credentials of the cluster's gRPC listener so that a
// connection whose handshake fails (no certificate, another CA, plaintext) is logged at WARN
// with the peer's address, as raft's TLS listener does; gRPC itself drops it silently.
func LogRefusedHandshakes(c credentials.TransportCredentials, log *slog.Logger) credentials.TransportCredentials {
	return &loggedCreds{TransportCredentials: c, log: log.With("component", "grpc-tls"), r: &refusals{}}
}

type loggedCreds struct {
	credentials.TransportCredentials
	log *slog.Logger
	r   *refusals
}

func (c *loggedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil && !isClosing(err) {
		c.r.warn(c.log, "gRPC listener: refused a connection whose TLS handshake failed", "remote", conn.RemoteAddr().String(), "err", err)
	}
	return out, info, err
}

func (c *loggedCreds) Clone() credentials.TransportCredentials {
	return &loggedCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log, r: c.r}
}

// isClosing reports an error of a listener that is shutting down, which is no refusal.
func isClosing(err error) bool {
	return err == context.Canceled || err == net.ErrClosed
}
