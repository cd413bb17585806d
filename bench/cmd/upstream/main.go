// Command upstream runs the benchmark's fast fake engine (bench/engine) on loopback and prints
// its URL, one line per listener, so the harness can point proxies at it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/meshgw/meshgw/bench/engine"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "127.0.0.1", "address to listen on (loopback only)")
	port := fs.Int("port", 0, "port of the first listener (0 picks a free one)")
	listeners := fs.Int("listeners", 1, "number of listeners, each on its own port (the health benchmark uses many)")
	events := fs.Int("events", 20, "SSE events per streamed answer, before [DONE]")
	delay := fs.Duration("event-delay", 0, "pause between two SSE events")
	maxBodyMB := fs.Int("max-body-mb", 0, "read request bodies as streams, up to this many MiB (uploads); 0: fasthttp's 4 MiB, read whole")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if ip := net.ParseIP(*host); ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(stderr, "upstream: --host %q is not a loopback address\n", *host)
		return 2
	}
	if *listeners < 1 || *listeners > 16_000 || *events < 1 || *delay < 0 || *maxBodyMB < 0 || *maxBodyMB > 1<<20 {
		fmt.Fprintln(stderr, "upstream: --listeners must be 1..16000, --events ≥ 1, --event-delay ≥ 0, --max-body-mb 0..1048576")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	srv := engine.NewServer(engine.Config{Events: *events, EventDelay: *delay, MaxBody: *maxBodyMB << 20})
	errc := make(chan error, *listeners)
	for i := range *listeners {
		p := 0
		if i == 0 {
			p = *port
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(p)))
		if err != nil {
			log.Error("listen", "err", err)
			return 1
		}
		fmt.Fprintf(stdout, "upstream listening on http://%s\n", ln.Addr())
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Error("serve", "err", err)
		return 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.ShutdownWithContext(sctx)
	return 0
}
