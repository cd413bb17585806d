package gateway

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/certs"
	"github.com/meshgw/meshgw/test/testkit"
)

// pausedUpstream sends one event, then waits for next (or the gateway closing the request),
// then ends the stream. gone is closed when the gateway closed the request first.
func pausedUpstream(next, gone chan struct{}) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(rw, "data: 1\n\n")
		rw.(http.Flusher).Flush()
		select {
		case <-next:
			_, _ = io.WriteString(rw, "data: [DONE]\n\n")
		case <-r.Context().Done():
			close(gone)
		}
	}
}

func streamRequest(body string) string {
	return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// readUntil reads from br until the text read contains want.
func readUntil(t *testing.T, br *bufio.Reader, want string) string {
	t.Helper()
	var b strings.Builder
	for !strings.Contains(b.String(), want) {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			t.Fatalf("reading until %q: %v (got %q)", want, err, b.String())
		}
	}
	return b.String()
}

// watching reports whether a client watch is parked on a connection.
func watching() bool {
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("gateway.peerClosed"))
}

func TestClientGoneWhileUpstreamSilentReleasesEverything(t *testing.T) {
	e := newEnv(t, Config{clientWatchAfter: 10 * time.Millisecond})
	next, gone := make(chan struct{}), make(chan struct{})
	defer close(next)
	_, w := e.upstream(pausedUpstream(next, gone))
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, streamRequest(`{"stream":true}`))
	readUntil(t, bufio.NewReader(conn), "data: 1")
	conn.Close() // the client leaves; the upstream sends nothing more
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway kept the upstream request of a client that left")
	}
	testkit.For(t, "the call to finish", func() bool {
		return e.gw.adm.inflight.Load() == 0 && w.Inflight() == 0 && len(e.outcomesCopy()) == 1
	})
}

// TestClientWatchLeavesTheConnectionUsable: a watch that saw a pipelined request, or that was
// stopped at the end of a stream, leaves the connection as it was: the stream completes and the
// next request on the connection is answered.
func TestClientWatchLeavesTheConnectionUsable(t *testing.T) {
	tests := []struct {
		name      string
		pipelined bool // the next request arrives while the stream waits on the upstream
	}{
		{"watch stopped at the end of the stream", false},
		{"watch sees a pipelined request", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{clientWatchAfter: time.Nanosecond})
			next, gone := make(chan struct{}), make(chan struct{})
			e.upstream(pausedUpstream(next, gone))
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			_, _ = io.WriteString(conn, streamRequest(`{"stream":true}`))
			readUntil(t, br, "data: 1")
			testkit.For(t, "the client watch to start", watching)
			second := streamRequest(`{"model":"m"}`)
			if tt.pipelined {
				_, _ = io.WriteString(conn, second)
				testkit.For(t, "the watch to see the request and end", func() bool { return !watching() })
			}
			close(next)
			readUntil(t, br, "0\r\n\r\n") // the end of the stream
			select {
			case <-gone:
				t.Fatal("the gateway dropped the upstream of a client that stayed")
			default:
			}
			if !tt.pipelined {
				_, _ = io.WriteString(conn, second)
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if head := readUntil(t, br, "\r\n"); !strings.HasPrefix(head, "HTTP/1.1 200") {
				t.Fatalf("the next request on the connection got %q", head)
			}
		})
	}
}

// TestClientGoneOverTLS: with --tls-http a request that came over HTTPS is proxied to an
// http:// worker, and the watch peeks at the TCP connection under TLS, so a client that drops
// its connection mid-stream is noticed there too.
func TestClientGoneOverTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := certs.CreateCA(certs.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateNode(certs.Options{Dir: dir}, "gw", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	cert, key := certs.NodeFiles(dir, "gw")
	store, err := certs.Load(certs.Files{Cert: cert, Key: key, CA: filepath.Join(dir, certs.CACertFile)})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Config{clientWatchAfter: 10 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.gw.Serve(tls.NewListener(e.gw.ClientListener(ln), store.HTTPConfig())) }()
	next, gone := make(chan struct{}), make(chan struct{})
	defer close(next)
	e.upstream(pausedUpstream(next, gone))
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, streamRequest(`{"stream":true}`))
	readUntil(t, bufio.NewReader(conn), "data: 1")
	_ = conn.NetConn().Close() // gone without a close_notify, as a dropped client is
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway kept the upstream request of a client that left")
	}
}
