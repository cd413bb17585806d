package health

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// ExternalProber probes external providers the Rolter way (DESIGN.md section 6). The free probe
// GETs {api_base}/v1/models with the provider's own auth header: any answer below 500 is
// healthy (401 and 404 too), a 429 is healthy but backs probing off, and a timeout, a connection
// error or a 5xx is a failure. With an LLM probe model set and an API key, a one-token completion
// replaces it and is judged strictly; without a key it stays the free probe (the Checker warns
// once). X-Mesh-Gateway is not sent to third parties. The zero value is ready to use.
type ExternalProber struct {
	// Client sends the probes. Default: a shared client that honours the proxy environment.
	Client *http.Client
}

// AnthropicVersion is the anthropic-version header sent to Anthropic.
const AnthropicVersion = "2023-06-01"

// AzureAPIVersion is the api-version of requests to Azure OpenAI's deployment paths: the data
// plane inference API's latest GA release (the gateway sends the same).
const AzureAPIVersion = "2024-10-21"

// Probe implements Prober.
func (p *ExternalProber) Probe(ctx context.Context, t Target) error {
	base := providerBase(t.URL)
	if t.LLMProbeModel != "" && t.APIKey != "" { // never an unauthenticated completion (Rolter)
		return p.completion(ctx, t, base)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return &ProbeError{Reason: "bad url"}
	}
	setProviderAuth(req, t)
	code, err := send(ctx, p.client(), req)
	switch {
	case err != nil:
		return err
	case code == http.StatusTooManyRequests:
		return Throttled(code)
	case code >= 500:
		return statusError(code)
	}
	return nil
}

// completion sends a max_tokens 1 completion and judges it strictly, where the data plane
// sends chat completions (Anthropic aside: its native Messages API).
func (p *ExternalProber) completion(ctx context.Context, t Target, base string) error {
	path := "/v1/chat/completions"
	switch t.Provider {
	case "anthropic":
		path = "/v1/messages"
	case "gemini":
		base = strings.TrimSuffix(strings.TrimSuffix(strings.TrimRight(base, "/"), "/openai"), "/v1beta")
		path = "/v1beta/openai/chat/completions"
	case "azure_openai":
		base = strings.TrimSuffix(base, "/openai")
		path = "/openai/deployments/" + url.PathEscape(t.LLMProbeModel) + "/chat/completions?api-version=" + AzureAPIVersion
	}
	body, _ := json.Marshal(map[string]any{
		"model":      t.LLMProbeModel,
		"max_tokens": 1,
		"messages":   []map[string]string{{"role": "user", "content": "ping"}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return &ProbeError{Reason: "bad url"}
	}
	req.Header.Set("Content-Type", "application/json")
	setProviderAuth(req, t)
	code, err := send(ctx, p.client(), req)
	switch {
	case err != nil:
		return err
	case code == http.StatusNotFound || code == http.StatusMethodNotAllowed:
		return &ProbeError{StatusCode: code, Reason: "wrong_endpoint"}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &ProbeError{StatusCode: code, Reason: "key_refused"}
	case code == http.StatusTooManyRequests:
		return Throttled(code)
	case code >= 500:
		return statusError(code)
	}
	return nil
}

func (p *ExternalProber) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	return providerClient()
}

var providerClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: newTransport(http.ProxyFromEnvironment), CheckRedirect: noRedirect}
})

// providerBase is the API base without a trailing slash or "/v1", so that adding "/v1/..."
// never doubles it.
func providerBase(u string) string {
	return strings.TrimSuffix(strings.TrimRight(u, "/"), "/v1")
}

// setProviderAuth sets the provider's own auth header.
func setProviderAuth(req *http.Request, t Target) {
	switch t.Provider {
	case "anthropic":
		req.Header.Set("anthropic-version", AnthropicVersion)
		if t.APIKey != "" {
			req.Header.Set("x-api-key", t.APIKey)
		}
		return
	case "azure_openai":
		if t.APIKey != "" {
			req.Header.Set("api-key", t.APIKey)
		}
		return
	case "gemini":
		if t.APIKey != "" {
			req.Header.Set("x-goog-api-key", t.APIKey)
		}
		return
	}
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
}
