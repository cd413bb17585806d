// Command fakeworker runs a fake inference engine (HTTP, gRPC or ZMQ) with fault knobs, for demos
// and tests of meshgw.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/test/fakeengine"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed flags.
type options struct {
	host        string
	port        int
	mode        string
	model       string
	anyModel    bool
	nodeName    string
	controlPort int
	listen      string
	heartbeat   time.Duration
	maxRequests int
	seed        uint64
	faults      string
	logLevel    slog.Level

	cacheBlocks int
	blockChars  int
	prefillUS   float64
	decodeUS    float64
	slots       int
	lanes       int
	answers     bool
}

const usageHead = `Usage: fakeworker [flags]

fakeworker is a fake inference engine with fault knobs (POST /_fault) and counters (GET /_stats).
On start it prints one line to stdout:
  fakeworker listening on URL (mode MODE, model MODEL, node NAME, control CONTROL_URL)
and it exits 0 on SIGTERM or SIGINT.

Compute model (off unless one of --cache-blocks, --prefill-us-per-token, --decode-us-per-token,
--slots is set): a request waits for a free slot (FIFO), its prompt is looked up in an LRU prefix
cache of --cache-block-chars blocks with chained hashes, and it waits for the prefill of its
uncached tokens: its time to first token is the two waits (three with --prefill-lanes, which makes
admitted requests take turns for a prefill lane, as a GPU runs one forward pass at a time). Each
output token after the first (each streamed chunk after the first; stream_chunks of them) takes the
decode time. Tokens are bytes of text / 4, rounded up. The prompt is meshgw's routing text
(docs/routing.md): a chat's messages, of every role, in order, each its content string or the
text of its text parts, then an assistant's reasoning_content, the non-empty pieces joined by one
space; a completion's prompt, /generate's text, an embedding's input. A batch (a list of strings)
is one prompt, its strings joined by one space as the gateway routes it, answered with one choice
(an embedding: one vector per input), so that the cache holds what the gateway's index predicts.
Only the prompt is cached, not the answer, unless --cache-answers: then a finished answer is
cached after its prompt, as SGLang's radix cache and vLLM's prefix cache keep generated tokens,
and a chat's next turn, which repeats the answer, finds it cached. Every answer reports
usage.prompt_tokens and usage.prompt_tokens_details.cached_tokens, embeddings included (0 without
a cache; /generate: meta_info.cached_tokens in every event); a stream with
"stream_options":{"include_usage":true} ends with a usage chunk (no choices) before [DONE]. With the
model on, GET /_stats adds prompt_tokens, cached_tokens, queued, queue_wait_ms, prefill_queued,
prefill_wait_ms, slot_ms (the time requests held a slot, summed), running, waiting, cache_blocks and
cache_evictions.

Requests as vLLM checks them: a chat, completion or embeddings request naming another model than
--model answers 404 NotFoundError (none named is served; --any-model serves any name), and a body
that is not a request of its route answers 400 with a one-line message naming the field.

Flags:
`

// parseFlags parses args; errors are one line, and pflag.ErrHelp means the help was printed to
// stdout.
func parseFlags(args []string, stdout io.Writer) (options, error) {
	var o options
	fs := pflag.NewFlagSet("fakeworker", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&o.port, "port", 0, "port of the engine's main listener (0 picks a free one)")
	fs.StringVar(&o.mode, "mode", "http", "transport: http, grpc (gRPC with /_fault and /_stats on the same port) or zmq")
	fs.StringVar(&o.model, "model", "fake-model", "model id the engine serves")
	fs.BoolVar(&o.anyModel, "any-model", false, "serve requests naming any model, instead of answering 404 to another model than --model")
	fs.StringVar(&o.nodeName, "node-name", "", `name put in every answer (default "fake-PORT", PORT the main listener's port, or the control port for ipc://)`)
	fs.IntVar(&o.controlPort, "control-port", 0, "zmq mode: port of the HTTP /_fault and /_stats endpoints (0 picks a free one)")
	fs.StringVar(&o.listen, "listen", "", "zmq mode: endpoint to bind, tcp://HOST:PORT or ipc:///PATH (default tcp://HOST:PORT from --host and --port)")
	fs.DurationVar(&o.heartbeat, "heartbeat-interval", 500*time.Millisecond, "zmq mode: interval of the heartbeats sent to each gateway")
	fs.IntVar(&o.maxRequests, "max-concurrent-requests", 256, "zmq mode: the limit announced in WELCOME")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the error_rate draws")
	fs.StringVar(&o.faults, "faults", "", `initial faults, a JSON object as POST /_fault takes, e.g. '{"latency_ms":5}'`)
	fs.IntVar(&o.cacheBlocks, "cache-blocks", 0, "prefix cache capacity in blocks, least recently used evicted first (0: no cache)")
	fs.IntVar(&o.blockChars, "cache-block-chars", fakeengine.DefaultBlockChars, "bytes of prompt text per cache block (the default is 16 tokens)")
	fs.Float64Var(&o.prefillUS, "prefill-us-per-token", 0, "microseconds of prefill per uncached prompt token, before the first output token")
	fs.Float64Var(&o.decodeUS, "decode-us-per-token", 0, "microseconds per output token after the first")
	fs.IntVar(&o.slots, "slots", 0, "requests computed at once; the others wait in arrival order (0: no bound)")
	fs.IntVar(&o.lanes, "prefill-lanes", 0, "prefills computed at once; the other admitted requests wait their turn, as a GPU runs one forward pass at a time (0: every admitted request prefills at once)")
	fs.BoolVar(&o.answers, "cache-answers", false, "also cache each finished answer after its prompt, as SGLang and vLLM keep generated tokens")
	level := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, usageHead)
			fs.PrintDefaults()
		}
		return o, valueError(err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q; fakeworker takes only flags", fs.Arg(0))
	}
	return o, o.check(*level)
}

// valueError rewrites pflag's error for a value of the wrong type (`invalid argument "abc" for
// "--cache-blocks" flag: strconv.ParseInt: ...`) as what the flag takes, in meshgw's words;
// other errors pass unchanged.
func valueError(err error) error {
	var ie *pflag.InvalidValueError
	if !errors.As(err, &ie) {
		return err
	}
	f := ie.GetFlag()
	var what string
	switch f.Value.Type() {
	case "int", "uint64":
		what = "not a whole number"
		if errors.Is(err, strconv.ErrRange) {
			what = "out of range for a whole number"
		}
	case "float64":
		what = "not a number"
	case "bool":
		what = "not true or false"
	case "duration":
		what = "not a duration such as 500ms or 2s"
	default:
		return err
	}
	return fmt.Errorf("--%s %q is %s", f.Name, ie.GetValue(), what)
}

func (o *options) check(level string) error {
	switch {
	case o.port < 0 || o.port > 65535:
		return fmt.Errorf("invalid value %d for flag --port: want 0-65535", o.port)
	case o.controlPort < 0 || o.controlPort > 65535:
		return fmt.Errorf("invalid value %d for flag --control-port: want 0-65535", o.controlPort)
	case o.mode != "http" && o.mode != "grpc" && o.mode != "zmq":
		return fmt.Errorf("invalid value %q for flag --mode: want http, grpc or zmq", o.mode)
	case o.model == "":
		return errors.New("invalid value for flag --model: must not be empty")
	case o.heartbeat <= 0:
		return fmt.Errorf("invalid value %v for flag --heartbeat-interval: must be > 0", o.heartbeat)
	case o.maxRequests < 1:
		return fmt.Errorf("invalid value %d for flag --max-concurrent-requests: must be >= 1", o.maxRequests)
	case o.cacheBlocks < 0:
		return fmt.Errorf("invalid value %d for flag --cache-blocks: must be >= 0", o.cacheBlocks)
	case o.blockChars < 1:
		return fmt.Errorf("invalid value %d for flag --cache-block-chars: must be >= 1", o.blockChars)
	case !(o.prefillUS >= 0 && o.prefillUS <= maxPerTokenUS):
		return fmt.Errorf("invalid value %v for flag --prefill-us-per-token: want 0-%d", o.prefillUS, maxPerTokenUS)
	case !(o.decodeUS >= 0 && o.decodeUS <= maxPerTokenUS):
		return fmt.Errorf("invalid value %v for flag --decode-us-per-token: want 0-%d", o.decodeUS, maxPerTokenUS)
	case o.slots < 0:
		return fmt.Errorf("invalid value %d for flag --slots: must be >= 0", o.slots)
	case o.lanes < 0:
		return fmt.Errorf("invalid value %d for flag --prefill-lanes: must be >= 0", o.lanes)
	case o.listen != "" && o.mode != "zmq":
		return errors.New("flag --listen applies only to --mode zmq")
	case o.listen != "" && !strings.HasPrefix(o.listen, "tcp://") && !strings.HasPrefix(o.listen, "ipc://"):
		return fmt.Errorf("invalid value %q for flag --listen: want tcp://HOST:PORT or ipc:///PATH", o.listen)
	}
	if err := o.logLevel.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("invalid value %q for flag --log-level: want debug, info, warn or error", level)
	}
	if o.faults != "" {
		if _, err := fakeengine.ParseFaults(fakeengine.DefaultFaults(), []byte(o.faults)); err != nil {
			return fmt.Errorf("invalid value for flag --faults: %v", err)
		}
	}
	return nil
}

// maxPerTokenUS bounds the per-token times: one second a token.
const maxPerTokenUS = 1_000_000

// compute is the engine's compute model from the flags.
func (o *options) compute() fakeengine.Compute {
	us := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	return fakeengine.Compute{CacheBlocks: o.cacheBlocks, BlockChars: o.blockChars,
		PrefillPerToken: us(o.prefillUS), DecodePerToken: us(o.decodeUS), Slots: o.slots,
		PrefillLanes: o.lanes, CacheAnswers: o.answers}
}

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "fakeworker:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	e := fakeengine.New(fakeengine.Config{Model: o.model, CheckModel: !o.anyModel, NodeName: o.nodeName,
		Seed: o.seed, Logger: log, Compute: o.compute()})
	defer e.Close()
	if o.faults != "" {
		f, _ := fakeengine.ParseFaults(e.Faults(), []byte(o.faults))
		_ = e.SetFaults(f)
	}
	url, control, err := start(e, o)
	if err != nil {
		fmt.Fprintln(stderr, "fakeworker:", err)
		return 1
	}
	fmt.Fprintf(stdout, "fakeworker listening on %s (mode %s, model %s, node %s, control %s)\n",
		url, o.mode, o.model, e.NodeName(), control)
	log.Info("fakeworker started", "url", url, "mode", o.mode, "control", control)
	<-ctx.Done()
	log.Info("fakeworker stopping")
	if err := e.Close(); err != nil {
		log.Warn("fakeworker: closing listeners", "err", err)
	}
	return 0
}

// start opens the listeners of o.mode and returns the engine's URL and the control URL.
func start(e *fakeengine.Engine, o options) (url, control string, err error) {
	addr := net.JoinHostPort(o.host, strconv.Itoa(o.port))
	switch o.mode {
	case "grpc":
		url, err = e.StartGRPC(addr)
		return url, strings.Replace(url, "grpc://", "http://", 1), err
	case "zmq":
		endpoint := o.listen
		if endpoint == "" {
			endpoint = "tcp://" + addr
		}
		url, err = e.StartZMQ(endpoint, fakeengine.ZMQOptions{
			HeartbeatInterval: o.heartbeat, MaxConcurrentRequests: o.maxRequests,
		})
		if err != nil {
			return "", "", err
		}
		control, err = e.StartControl(net.JoinHostPort(o.host, strconv.Itoa(o.controlPort)))
		return url, control, err
	}
	url, err = e.Start(addr)
	return url, url, err
}
