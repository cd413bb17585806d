package gateway

import (
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/reqmeta"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// azureAPIVersion is the api-version of every request to Azure OpenAI: the data plane
// inference API's latest GA release with deployment paths (chat completions, completions,
// embeddings, audio), as the health probes send it.
const azureAPIVersion = health.AzureAPIVersion

// providerUserAgent is the User-Agent an external provider gets when the client sent none.
const providerUserAgent = "meshgw"

// provider is how an external provider's worker is reached (DESIGN.md section 2): the
// OpenAI-compatible endpoint of each route, and the provider's own auth header, as the health
// probes send it (health/external.go). Made with the worker's transport at its first request.
type provider struct {
	host  []byte // Host: the URL's host, without a default port, as a direct client sends it
	paths [reqmeta.NumRoutes][]byte
	// azure is set for azure_openai, whose path names the deployment (the request's model, else
	// the worker's only model) and whose query carries api-version; paths then hold what
	// follows the deployment.
	azure       bool
	azureBase   string // path up to and including /openai/deployments/
	deployment  string // the worker's only declared model, "" when it declares none or several
	authName    string // the auth header, "" when the worker has no key
	authValue   []byte
	versionName string // anthropic-version for Anthropic, sent unless the client sent one
}

// newProvider returns how to reach the external worker at rawURL, of kind provider.
func newProvider(rawURL, kind, key string, models []string) *provider {
	u, _ := url.Parse(rawURL)
	p := &provider{host: []byte(u.Hostname())}
	if port := u.Port(); port != "" && !(u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80") {
		p.host = []byte(u.Host)
	}
	base := strings.TrimRight(u.EscapedPath(), "/")
	var prefix string
	switch kind {
	case "gemini":
		// https://generativelanguage.googleapis.com/v1beta/openai/ is the OpenAI-compatible API.
		for _, s := range []string{"/openai", "/v1beta", "/v1"} {
			base = strings.TrimSuffix(base, s)
		}
		prefix = base + "/v1beta/openai"
	case "azure_openai":
		// {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...
		base = strings.TrimSuffix(strings.TrimSuffix(base, "/v1"), "/openai")
		p.azure, p.azureBase = true, base+"/openai/deployments/"
		if len(models) == 1 {
			p.deployment = models[0]
		}
	default:
		// openai, openai_compatible, and Anthropic's OpenAI SDK compatibility endpoint
		// (https://api.anthropic.com/v1/): the base, which may end in /v1, then /v1/....
		prefix = strings.TrimSuffix(base, "/v1") + "/v1"
	}
	for r := reqmeta.Route(0); r < reqmeta.NumRoutes; r++ {
		p.paths[r] = []byte(prefix + strings.TrimPrefix(r.Path(), "/v1"))
	}
	if key != "" {
		switch kind {
		case "anthropic":
			p.authName, p.authValue = "x-api-key", []byte(key)
		case "azure_openai":
			p.authName, p.authValue = "api-key", []byte(key)
		case "gemini":
			p.authName, p.authValue = "x-goog-api-key", []byte(key)
		default:
			p.authName, p.authValue = fasthttp.HeaderAuthorization, []byte("Bearer "+key)
		}
	}
	if kind == "anthropic" {
		p.versionName = "anthropic-version"
	}
	return p
}

// providerRequest is the request an external provider gets for this attempt: the client's,
// at the provider's endpoint with the provider's auth, and without what only the mesh uses
// (X-Mesh-* and X-SMG-* headers, a request id the gateway made up). The client's request
// stays as it is, for an engine that a retry may pick. Give it back with release.
func (c *call) providerRequest(up *upstream) *fasthttp.Request {
	src, p := &c.ctx.Request, up.provider
	req := fasthttp.AcquireRequest()
	src.Header.CopyTo(&req.Header)
	c.dropInternal(&req.Header)
	if p.authName != "" {
		req.Header.Del(fasthttp.HeaderAuthorization)
		req.Header.SetBytesV(p.authName, p.authValue)
	}
	if len(req.Header.UserAgent()) == 0 { // a provider's front may turn away a request without one
		req.Header.SetUserAgent(providerUserAgent)
	}
	if p.versionName != "" && len(req.Header.Peek(p.versionName)) == 0 {
		req.Header.Set(p.versionName, health.AnthropicVersion)
	}
	if c.streamed {
		req.SetBodyStream(src.BodyStream(), src.Header.ContentLength())
	} else {
		req.SetBodyRaw(src.Body())
	}
	uri := req.URI()
	uri.SetScheme(up.scheme)
	uri.SetHostBytes(p.host)
	if !p.azure {
		uri.SetPathBytes(p.paths[c.route])
		return req
	}
	deployment := string(c.meta.Model)
	if deployment == "" {
		deployment = p.deployment
	}
	uri.SetPath(p.azureBase + url.PathEscape(deployment) + string(p.paths[c.route]))
	if args := uri.QueryArgs(); !args.Has("api-version") {
		args.Set("api-version", azureAPIVersion)
	}
	return req
}

// dropInternal deletes the headers a direct client would not send: X-Mesh-* and X-SMG-*
// (X-Mesh-Gateway, the routing keys, whatever else the mesh adds), and X-Request-Id when the
// gateway made it up.
func (c *call) dropInternal(h *fasthttp.RequestHeader) {
	var buf [512]byte
	names := buf[:0]
	for k := range h.All() {
		if hasPrefixFold(k, "X-Mesh-") || hasPrefixFold(k, "X-Smg-") {
			names = append(append(names, k...), '\n')
		}
	}
	for len(names) > 0 {
		i := strings.IndexByte(string(names), '\n')
		h.DelBytes(names[:i])
		names = names[i+1:]
	}
	if c.madeID {
		h.DelBytes(keyClientID)
	}
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}

// release gives back a request providerRequest made; the client's own request is kept.
func (c *call) release(req *fasthttp.Request) {
	if req != &c.ctx.Request {
		fasthttp.ReleaseRequest(req)
	}
}

// eachAttempt reports whether every attempt on w is an outcome of its own for its breaker, as
// SMG counts external providers' (one failed request of three attempts is three failures);
// an engine's retries count once, its last outcome.
func eachAttempt(w *pool.Worker) bool { return w.ConnectionMode() == worker.ModeExternal }

// candidates reads the workers an attempt may pick into c.cands: the routable ones (with
// locality routing on, those of the region it chooses: localCandidates), else, when
// the request's route has external providers, those an operator did not close, whatever their
// health and breaker (Rolter's fail-open, DESIGN.md section 2). It returns the gates that make
// a picked worker be selected again: every gate for a routable pick, only the operator's for a
// fail-open one (its health gate is closed by definition).
func (c *call) candidates(snap *pool.Snapshot, last *pool.Worker) pool.Gate {
	if l := c.g.loc; l != nil {
		c.localCandidates(snap, last, l)
	} else {
		c.cands = snap.Candidates(c.cands, c.meta.Caps, c.meta.Model, last)
	}
	if len(c.cands) > 0 || len(snap.External) == 0 {
		return ^pool.Gate(0)
	}
	c.cands = snap.FailOpen(c.cands, c.meta.Caps, c.meta.Model, last)
	return pool.OperatorGates
}

// noWorkers answers 503 for a request with no worker to try, as SMG does: "code":
// "no_available_workers" for an engine pool, "code": "service_unavailable" for a route of
// external providers (all of them disabled, quarantined or draining, since it fails open
// otherwise).
func (c *call) noWorkers(snap *pool.Snapshot) {
	code := codeNoWorkers
	if snap.ExternalRoute(c.meta.Caps, c.meta.Model) {
		code = codeUnavailable
	}
	c.fail(fasthttp.StatusServiceUnavailable, envelopeCode(typeUnavailable, code,
		"no available workers: "+snap.Why(c.meta.Caps, c.meta.Model)))
}
