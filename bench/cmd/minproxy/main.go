// Command minproxy is the benchmark's reference floor for a fasthttp data plane: a
// fasthttp.Server with one HostClient per upstream, round robin, no routing logic, and SSE
// relayed read-by-read from the connection goroutine. meshgw's distance from it is the cost of
// meshgw's own code; its distance from HAProxy is the cost of Go and fasthttp.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("minproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback)")
	upstreams := fs.String("upstreams", "", "comma-separated host:port of the engines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *upstreams == "" {
		fmt.Fprintln(stderr, "minproxy: --upstreams is required")
		return 2
	}
	p := &proxy{}
	for _, a := range strings.Split(*upstreams, ",") {
		p.hcs = append(p.hcs, &fasthttp.HostClient{Addr: a, MaxConns: 2048, MaxIdleConnDuration: 4 * time.Second,
			ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10, NoDefaultUserAgentHeader: true, DisablePathNormalizing: true})
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "minproxy:", err)
		return 1
	}
	srv := &fasthttp.Server{Handler: p.handle, NoDefaultServerHeader: true, NoDefaultContentType: true,
		ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10, IdleTimeout: 90 * time.Second}
	fmt.Fprintf(stdout, "minproxy listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		fmt.Fprintln(stderr, "minproxy:", err)
		return 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.ShutdownWithContext(sctx)
	return 0
}

type proxy struct {
	hcs []*fasthttp.HostClient
	rr  atomic.Uint64
}

var (
	streamTrue = []byte(`"stream":true`)
	bufPool    = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}
)

func (p *proxy) handle(ctx *fasthttp.RequestCtx) {
	hc := p.hcs[p.rr.Add(1)%uint64(len(p.hcs))]
	ctx.Request.SetHost(hc.Addr)
	if !bytes.Contains(ctx.PostBody(), streamTrue) {
		if err := hc.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error("upstream request failed", fasthttp.StatusBadGateway)
		}
		return
	}
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	if err := hc.Do(&ctx.Request, resp); err != nil {
		fasthttp.ReleaseResponse(resp)
		ctx.Error("upstream request failed", fasthttp.StatusBadGateway)
		return
	}
	resp.Header.CopyTo(&ctx.Response.Header)
	ctx.Response.ImmediateHeaderFlush = true
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer fasthttp.ReleaseResponse(resp)
		defer resp.CloseBodyStream()
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		body := resp.BodyStream()
		for {
			n, err := body.Read(*bp)
			if n > 0 {
				if _, werr := w.Write((*bp)[:n]); werr != nil {
					return
				}
				if werr := w.Flush(); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}
