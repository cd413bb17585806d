// Command minproxy serves the benchmark's reference floor for a fasthttp data plane
// (bench/minproxy) on --listen, round robin over --upstreams.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/bench/minproxy"
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
	var hcs []*fasthttp.HostClient
	for _, a := range strings.Split(*upstreams, ",") {
		hcs = append(hcs, minproxy.NewHostClient(a))
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "minproxy:", err)
		return 1
	}
	srv := minproxy.NewServer(minproxy.New(hcs).Handle)
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
