package main

import (
	"errors"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/gateway"
	"github.com/meshgw/meshgw/gateway/policy"
	"github.com/meshgw/meshgw/worker"
)

// gatewayFlags are the data plane's flags: listener, workers, routing, admission, shutdown.
type gatewayFlags struct {
	host             string
	port             int
	workerURLs       []string
	workerConfig     string
	policy           string
	prefixTokenCount int
	model            string
	maxConnections   int
	maxPayloadSize   int64
	maxBufferedMB    int
	memoryLimit      int64 // the Go runtime's memory limit in force, set after the flags apply
	requestTimeout   int
	healthCheckPort  int
	nodeID           string
	region           string
	color            string
	adminAPIKey      string // a secret: never logged, echoed or put in an error
	adminAPIKeyFile  string
	shutdownGrace    int
	shutdownSettle   int
	// readinessRequiresQuorum: /readiness answers 503 "no quorum" while raft has no leader.
	readinessRequiresQuorum bool

	specs []worker.Spec // filled by validate
}

func (f *gatewayFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.host, "host", "0.0.0.0", "address the data plane listens on")
	fs.IntVar(&f.port, "port", 30000, "port of the data plane (0 picks a free one)")
	fs.StringSliceVar(&f.workerURLs, "worker-urls", nil, "worker base URLs (scheme://host:port, no path): space-separated as SMG takes them, comma-separated, or repeated")
	fs.StringVar(&f.workerConfig, "worker-config", "", "JSON file of worker specs: a list, or the SGLang-Omni router's {\"workers\": [...]}")
	fs.StringVar(&f.policy, "policy", gateway.DefaultPolicy, "load-balancing policy: "+strings.Join(policy.Names(), ", "))
	fs.IntVar(&f.prefixTokenCount, "prefix-token-count", gateway.DefaultPrefixTokenCount, "prefix_hash: prompt units hashed (a unit is 4 bytes of the prompt's JSON)")
	fs.StringVar(&f.model, "model", "", "model name GET /v1/models lists for workers that declare none (does not narrow routing)")
	fs.IntVar(&f.maxConnections, "max-connections", 0, "in-flight model requests before 503 (0 = auto: 128 per worker, at most 4096)")
	fs.Int64Var(&f.maxPayloadSize, "max-payload-size", gateway.DefaultMaxPayload, "largest request body in bytes; larger gets 413")
	fs.IntVar(&f.maxBufferedMB, "max-buffered-body-mb", 0, "MiB of request bodies buffered at once, across all requests; a body waits up to 5 s for room, then gets 503, and one larger than this is streamed to an HTTP worker without retries (0 = auto: 1024, or half of --memory-limit-mb / $GOMEMLIMIT when that is less; docs/choices.md)")
	fs.IntVar(&f.requestTimeout, "request-timeout-secs", int(gateway.DefaultRequestTimeout/time.Second), "upstream attempt timeout in seconds; past it the client gets 504")
	fs.IntVar(&f.healthCheckPort, "health-check-port", 0, "extra port serving only the probe endpoints (0 = off)")
	fs.StringVar(&f.nodeID, "node-id", "", "this gateway's node id (default: host_port of the data plane listener)")
	fs.StringVar(&f.region, "region", "", "this gateway's region")
	fs.StringVar(&f.color, "color", "", "free label of this gateway, e.g. blue or green")
	fs.StringVar(&f.adminAPIKey, "admin-api-key", "", "bearer key of the admin routes (empty: admin routes answer loopback clients only); without TLS, peers prove a key derived from it on raft, gRPC and gossip, so every gateway of a cluster needs the same (docs/security.md); prefer --admin-api-key-file or the variable: a command line is readable by every local user")
	fs.StringVar(&f.adminAPIKeyFile, "admin-api-key-file", "", "file holding the admin routes' bearer key (a trailing newline is dropped), or, during a rotation, several one a line, the primary first: each opens the admin routes and is taken from peers, which prove the primary")
	fs.IntVar(&f.shutdownGrace, "shutdown-grace-period-secs", 180, "on SIGTERM, how long in-flight requests may take to drain")
	fs.IntVar(&f.shutdownSettle, "shutdown-settle-secs", 2, "on SIGTERM, how long the listener stays open after readiness turns draining")
	fs.BoolVar(&f.readinessRequiresQuorum, "readiness-requires-quorum", false, "answer /readiness 503 \"no quorum\" while raft has no leader (by default a gateway serves its last applied state without one, and is ready when it has routable workers)")
}

func (f *gatewayFlags) validate() error {
	if net.ParseIP(f.host) == nil && f.host != "localhost" {
		return valuef("host", "%q is not an IP address", f.host)
	}
	for _, e := range []error{
		checkPort("port", f.port, true),
		checkPort("health-check-port", f.healthCheckPort, true),
		checkOneOf("policy", f.policy, policy.Names()),
		checkMin("prefix-token-count", f.prefixTokenCount, 1),
		checkMin("max-connections", f.maxConnections, 0),
		checkMin("max-buffered-body-mb", f.maxBufferedMB, 0),
		checkMin("request-timeout-secs", f.requestTimeout, 1),
		checkMin("shutdown-grace-period-secs", f.shutdownGrace, 0),
		checkMin("shutdown-settle-secs", f.shutdownSettle, 0),
	} {
		if e != nil {
			return e
		}
	}
	if err := checkName("node-id", f.nodeID, maxNodeIDLen); err != nil {
		return err
	}
	if err := checkName("region", f.region, maxRegionLen); err != nil {
		return err
	}
	if f.maxBufferedMB > math.MaxInt64>>20 {
		return valuef("max-buffered-body-mb", "%d is above the maximum %d", f.maxBufferedMB, int64(math.MaxInt64>>20))
	}
	if f.maxPayloadSize < 1 {
		return valuef("max-payload-size", "%d is below the minimum 1", f.maxPayloadSize)
	}
	if err := keyFromFile(&f.adminAPIKey, "admin-api-key", "admin-api-key-file", f.adminAPIKeyFile); err != nil {
		return err
	}
	return f.loadSpecs()
}

// loadSpecs collects and normalizes the workers of --worker-urls and --worker-config.
func (f *gatewayFlags) loadSpecs() error {
	f.specs = nil
	for _, u := range splitURLs(f.workerURLs) {
		s := worker.Spec{URL: u}
		if err := s.Normalize(); err != nil {
			return valuef("worker-urls", "%q: %s", worker.RedactURL(u), fieldMsg(err))
		}
		f.specs = append(f.specs, s)
	}
	if f.workerConfig == "" {
		return nil
	}
	b, err := os.ReadFile(f.workerConfig)
	if err != nil {
		return valuef("worker-config", "%s: %v", f.workerConfig, err)
	}
	list, err := parseWorkerConfig(b)
	if err != nil {
		return valuef("worker-config", "%s: %v", f.workerConfig, err)
	}
	for i, s := range list {
		if err := s.Normalize(); err != nil {
			return valuef("worker-config", "%s: entry %d: %s", f.workerConfig, i, fieldMsg(err))
		}
		f.specs = append(f.specs, s)
	}
	return nil
}

func fieldMsg(err error) string {
	var fe *worker.FieldError
	if errors.As(err, &fe) && fe.Field == "url" {
		return fe.Msg
	}
	return err.Error()
}

// listenAddr is the data plane's host:port.
func (f *gatewayFlags) listenAddr() string { return net.JoinHostPort(f.host, strconv.Itoa(f.port)) }

// config builds the gateway's Config from the flags; the server sets the node id.
func (f *gatewayFlags) config(r *retryFlags) gateway.Config {
	return gateway.Config{
		Region:           f.region,
		Policy:           f.policy,
		PrefixTokenCount: f.prefixTokenCount,
		DefaultModel:     f.model,
		Retry:            r.config(),
		MaxInflight:      f.maxConnections,
		MaxPayload:       f.maxPayloadSize,
		MaxBufferedBody:  bodyBudget(f.maxBufferedMB, f.memoryLimit),
		RequestTimeout:   time.Duration(f.requestTimeout) * time.Second,
		ShutdownSettle:   settle(f.shutdownSettle),
		AdminAPIKey:      f.adminAPIKey,

		ReadinessRequiresQuorum: f.readinessRequiresQuorum,
	}
}

// bodyBudget is --max-buffered-body-mb in bytes. 0 is auto: gateway.DefaultMaxBufferedBody
// (1 GiB), or half the Go runtime's memory limit (memoryLimit; math.MaxInt64 or 0 for none)
// when that is less, but at least 16 MiB. Buffered bodies cost about their size in RSS
// (docs/choices.md), and half leaves the rest of the limit to everything else.
func bodyBudget(mb int, memoryLimit int64) int64 {
	if mb > 0 {
		return int64(mb) << 20
	}
	budget := int64(gateway.DefaultMaxBufferedBody)
	if memoryLimit > 0 && memoryLimit/2 < budget {
		budget = max(memoryLimit/2, 16<<20)
	}
	return budget
}

// settle maps --shutdown-settle-secs to the Config, where 0 means the default: a flag of 0
// means no settle window, which the Config spells as a negative duration.
func settle(secs int) time.Duration {
	if secs == 0 {
		return -1
	}
	return time.Duration(secs) * time.Second
}

// The bounds of --node-id and --region: those the admin API puts on a worker's owner and region
// (gateway/admin/limits.go), which take this gateway's.
const (
	maxNodeIDLen = 128
	maxRegionLen = 63
)

// checkName refuses a name flag's value that is longer than limit bytes, is not UTF-8, or holds
// a control character: it goes into records, bulletins, raft and log lines.
func checkName(name, v string, limit int) error {
	switch {
	case len(v) > limit:
		return valuef(name, "is longer than %d bytes", limit)
	case !utf8.ValidString(v):
		return valuef(name, "is not valid UTF-8")
	case strings.ContainsFunc(v, unicode.IsControl):
		return valuef(name, "holds a control character")
	}
	return nil
}
