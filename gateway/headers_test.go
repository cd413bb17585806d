package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/reqmeta"
	"github.com/meshgw/meshgw/worker"
)

// TestCanonicalHeaderNames: the names the gateway compares as bytes or sets with SetCanonical
// are the form fasthttp stores a parsed or set header under.
func TestCanonicalHeaderNames(t *testing.T) {
	tests := []struct {
		name  string // as a client might send it
		canon string // what the gateway compares with or sets
	}{
		{hdrWorker, string(keyWorker)},
		{hdrRequestID, string(keyRequestID)},
		{hdrAttempt, string(keyAttempt)},
		{hdrGateway, string(keyGateway)},
		{hdrOwner, string(keyOwner)},
		{hdrWorkerRegion, string(keyWorkerRegion)},
		{"x-mesh-worker-region", canonWorkerRegion},
		{hdrClientID, string(keyClientID)},
		{"authorization", string(keyAuthorization)},
		{earlyHeader, string(keyEarly)},
		{hdrRoutingKey, canonRoutingKey},
		{hdrSMGKey, canonSMGKey},
		{"x-request-id", canonClientID},
		{reqmeta.HeaderModel, canonModel},
		{reqmeta.HeaderCapabilities, canonCapabilities},
		{reqmeta.HeaderStream, canonStream},
		{"connection", stripNames[0]},
		{"KEEP-ALIVE", stripNames[1]},
		{"proxy-connection", stripNames[2]},
		{"Proxy-Authenticate", stripNames[3]},
		{"proxy-authorization", stripNames[4]},
		{"TE", stripNames[5]},
		{"trailer", stripNames[6]},
		{"upgrade", stripNames[7]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := "GET / HTTP/1.1\r\nHost: x\r\n" + tt.name + ": v\r\n\r\n"
			var h fasthttp.RequestHeader
			if err := h.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
				t.Fatal(err)
			}
			found := false
			for k := range h.All() {
				found = found || string(k) == tt.canon
			}
			if !found {
				t.Errorf("fasthttp stores %q under another name than %q", tt.name, tt.canon)
			}
		})
	}
}

// rawUpstream answers every request on a plain TCP listener with answer, and hands the request
// head it read to heads.
func rawUpstream(t *testing.T, answer string, heads chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				tp := textproto.NewReader(bufio.NewReader(conn))
				for {
					lines, n := []string{}, 0
					for {
						line, err := tp.ReadLine()
						if err != nil {
							return
						}
						if line == "" {
							break
						}
						lines = append(lines, line)
						if v, ok := strings.CutPrefix(strings.ToLower(line), "content-length: "); ok {
							n, _ = strconv.Atoi(v)
						}
					}
					if _, err := io.CopyN(io.Discard, tp.R, int64(n)); err != nil {
						return
					}
					heads <- strings.Join(lines, "\n")
					if _, err := io.WriteString(conn, answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestHopByHopHeadersNeverCross(t *testing.T) {
	const body = `{"model":"m"}`
	tests := []struct {
		name        string
		reqHeaders  string // sent by the client
		respHeaders string // sent by the upstream
		dropped     []string
		kept        []string
	}{
		{"none", "X-Keep: 1\r\n", "X-Resp-Keep: 1\r\n", nil, []string{"X-Keep", "X-Resp-Keep"}},
		{"every hop-by-hop header",
			"Connection: keep-alive, X-Hop-A, x-hop-b\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\n" +
				"Proxy-Authorization: Basic secret\r\nTE: trailers\r\nUpgrade: h2c\r\nX-Hop-A: 1\r\nX-Hop-B: 2\r\nX-Keep: 1\r\n",
			"Connection: X-Resp-Hop\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\nUpgrade: h2c\r\nX-Resp-Hop: 1\r\nX-Resp-Keep: 1\r\n",
			[]string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Upgrade", "X-Hop-A", "X-Hop-B", "X-Resp-Hop"},
			[]string{"X-Keep", "X-Resp-Keep"}},
		{"routing hints", "X-Mesh-Route-Model: m\r\nx-mesh-route-stream: false\r\nX-Mesh-Route-Capabilities: chat\r\nX-Keep: 1\r\n", "",
			[]string{"X-Mesh-Route-Model", "X-Mesh-Route-Stream", "X-Mesh-Route-Capabilities"}, []string{"X-Keep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			heads := make(chan string, 1)
			answer := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + tt.respHeaders + "Content-Length: 2\r\n\r\n{}"
			e.add(worker.Spec{URL: rawUpstream(t, answer, heads)})
			status, head := rawRequest(t, strings.TrimPrefix(e.base, "http://"), "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"+
				tt.reqHeaders+"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body, 5e9)
			if !strings.HasPrefix(status, "HTTP/1.1 200") {
				t.Fatalf("status %q", status)
			}
			seen := strings.ToLower(<-heads + "\n" + head)
			for _, h := range tt.dropped {
				if strings.Contains(seen, "\n"+strings.ToLower(h)+":") {
					t.Errorf("%s crossed the proxy:\n%s", h, seen)
				}
			}
			for _, h := range tt.kept {
				if !strings.Contains(seen, "\n"+strings.ToLower(h)+":") {
					t.Errorf("%s did not cross the proxy:\n%s", h, seen)
				}
			}
		})
	}
}

// TestAuthorizationAcrossRetries: a worker without a key gets the client's Authorization, or
// none, even when an earlier attempt of the same request carried another worker's key.
func TestAuthorizationAcrossRetries(t *testing.T) {
	tests := []struct {
		name, clientAuth string
	}{
		{"client sends a key", "Bearer client-key"},
		{"client sends none", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{Policy: "round_robin"})
			var keyed atomic.Int32
			e.upstream(func(rw http.ResponseWriter, r *http.Request) {
				keyed.Add(1)
				if got := r.Header.Get("Authorization"); got != "Bearer sk-keyed" {
					t.Errorf("the keyed worker got Authorization %q", got)
				}
				rw.WriteHeader(503)
			}, func(s *worker.Spec) { s.APIKey = "sk-keyed" })
			got := make(chan []string, 8)
			e.upstream(func(rw http.ResponseWriter, r *http.Request) {
				got <- r.Header.Values("Authorization")
				okHandler("open")(rw, r)
			})
			for i := range 4 {
				var hdr []string
				if tt.clientAuth != "" {
					hdr = []string{"Authorization", tt.clientAuth}
				}
				if status, _, _ := e.post("/v1/completions", `{}`, hdr...); status != 200 {
					t.Fatalf("request %d: status %d", i, status)
				}
				auth := <-got
				if want := tt.clientAuth; (want == "" && len(auth) != 0) || (want != "" && (len(auth) != 1 || auth[0] != want)) {
					t.Errorf("request %d: the open worker got Authorization %q, want %q", i, auth, want)
				}
			}
			if keyed.Load() == 0 {
				t.Error("no request tried the keyed worker first")
			}
		})
	}
}

// TestUserAgentIsTheClients: an engine gets the client's User-Agent and Content-Type as they
// came, and none when the client sent none (as HAProxy passes requests on); the gateway is
// named by X-Mesh-Gateway. An external provider, whose front may turn away a request without a
// User-Agent, gets "meshgw" when the client sent none.
func TestUserAgentIsTheClients(t *testing.T) {
	const body = `{"model":"m","messages":[]}`
	for _, tt := range []struct{ name, sent, ua, ct string }{
		{"none", "", "", ""},
		{"the client's", "User-Agent: OpenAI/Python 1.50\r\nContent-Type: application/json\r\n", "OpenAI/Python 1.50", "application/json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{NodeID: "gw-ua"})
			heads := make(chan string, 1)
			e.add(worker.Spec{URL: rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", heads)})
			status, _ := rawRequest(t, strings.TrimPrefix(e.base, "http://"), "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"+
				tt.sent+"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body, 5e9)
			if !strings.HasPrefix(status, "HTTP/1.1 200") {
				t.Fatalf("status %q", status)
			}
			head := <-heads
			if !strings.Contains(head, "\nX-Mesh-Gateway: gw-ua") {
				t.Fatalf("the engine's request does not name the gateway:\n%s", head)
			}
			for name, want := range map[string]string{"user-agent:": tt.ua, "content-type:": tt.ct} {
				var got []string
				for line := range strings.SplitSeq(head, "\n") {
					if strings.HasPrefix(strings.ToLower(line), name) {
						got = append(got, strings.TrimSpace(line[len(name):]))
					}
				}
				if strings.Join(got, ", ") != want {
					t.Errorf("engine got %s %q, want %q:\n%s", name, got, want, head)
				}
			}
		})
	}
	t.Run("provider", func(t *testing.T) {
		e := newEnv(t, Config{})
		var prov capture
		psrv := httptest.NewServer(http.HandlerFunc(prov.handler))
		t.Cleanup(psrv.Close)
		e.add(worker.Spec{URL: psrv.URL + "/v1", ConnectionMode: worker.ModeExternal, Provider: "openai", APIKey: "sk-test", Model: "m"})
		status, _ := rawRequest(t, strings.TrimPrefix(e.base, "http://"), "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"+
			"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body, 5e9)
		if !strings.HasPrefix(status, "HTTP/1.1 200") {
			t.Fatalf("status %q", status)
		}
		prov.mu.Lock()
		defer prov.mu.Unlock()
		if len(prov.reqs) != 1 {
			t.Fatalf("%d requests reached the provider, want 1", len(prov.reqs))
		}
		if ua := prov.reqs[0].Header.Get("User-Agent"); ua != "meshgw" {
			t.Errorf("provider got User-Agent %q, want meshgw", ua)
		}
	})
}
