package owned

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	enginev1 "github.com/meshgw/meshgw/api/engine/v1"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/worker"
)

// ModelLister asks a worker which models it serves. It must return when ctx is done; the error
// must not hold the worker's API key.
type ModelLister interface {
	ListModels(ctx context.Context, t health.Target) ([]string, error)
}

// ModelListerFunc adapts a function to ModelLister.
type ModelListerFunc func(ctx context.Context, t health.Target) ([]string, error)

// ListModels calls f.
func (f ModelListerFunc) ListModels(ctx context.Context, t health.Target) ([]string, error) {
	return f(ctx, t)
}

// listers are the model listers of the engine modes, replaced by Options.Listers where set.
// External providers have none: their catalogues are huge, and they keep "any model".
func (m *Manager) listers() map[string]ModelLister {
	l := map[string]ModelLister{
		worker.ModeHTTP: &httpLister{client: newListClient()},
		worker.ModeGRPC: grpcLister{},
		worker.ModeZMQ:  ModelListerFunc(m.announcedModels),
	}
	maps.Copy(l, m.opts.Listers)
	delete(l, worker.ModeExternal)
	return l
}

// discover asks a worker that declares no model which models it serves, in the background, so
// that readiness never waits for it. It is called at each promotion to ready (the first is
// registration reaching the worker) and when a PATCH leaves a ready worker without declared
// models. An HTTP or gRPC worker is asked until it has answered once; a ZMQ worker's models are
// read again at every promotion, since each handshake brings a new WELCOME and nothing is sent.
func (m *Manager) discover(ow *ownedWorker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	spec := ow.spec
	l := m.lists[spec.ConnectionMode]
	switch {
	case m.closed, m.owned[ow.id] != ow, ow.dead, l == nil, len(spec.Models) > 0:
		return
	case spec.ConnectionMode != worker.ModeZMQ && ow.listed.Load():
		return
	case !ow.listing.CompareAndSwap(false, true):
		return // a discovery is under way
	}
	m.discovering.Add(1) // under mu, before Close can see closed and wait
	go func() {
		defer m.discovering.Done()
		defer ow.listing.Store(false)
		m.safely("model discovery", func() { m.listModels(ow, spec, l) })
	}()
}

// listModels asks the worker once, bounded by its health-check timeout, and records the answer
// in the pool. A failure is logged at DEBUG: the next promotion asks again.
func (m *Manager) listModels(ow *ownedWorker, spec worker.Spec, l ModelLister) {
	timeout := m.opts.Health.Merge(spec.ConnectionMode, spec.Health).Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(m.life, timeout)
	defer cancel()
	t := health.Target{ID: ow.id, URL: spec.URL, Mode: spec.ConnectionMode, APIKey: spec.APIKey,
		Timeout: timeout, GatewayID: m.opts.NodeID}
	models, err := l.ListModels(ctx, t)
	if err != nil {
		m.log.Debug("model discovery failed; asking again at the next promotion", "worker", ow.label,
			"id", string(ow.id), "err", err)
		return
	}
	models = cleanModels(models)
	if m.get(ow.id) != ow {
		return // forgotten meanwhile
	}
	w := m.pool.Get(ow.id)
	if w == nil {
		return
	}
	changed := !ow.listed.Load() || !slices.Equal(w.DiscoveredModels(), models)
	if err := m.pool.SetDiscoveredModels(ow.id, models); err != nil {
		return // removed from the pool meanwhile
	}
	ow.listed.Store(true)
	if changed {
		m.log.Info("worker models discovered", "worker", ow.label, "id", string(ow.id), "models", models)
		m.changed(ow.id)
	}
}

// cleanModels trims, sorts and deduplicates model ids, dropping empty ones; never nil, so that
// an engine that answered an empty list counts as asked.
func cleanModels(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// maxModelsAnswer bounds the body of an engine's GET /v1/models.
const maxModelsAnswer = 4 << 20

// httpLister asks an HTTP engine GET {url}/v1/models (the OpenAI list), with the worker's API
// key as a bearer token and this gateway's node id as X-Mesh-Gateway.
type httpLister struct {
	client *http.Client
}

// newListClient returns the client of model discovery: no proxy (engines sit on the gateway's
// network), no redirects, and no kept connections, since each engine is asked about once.
func newListClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:            (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ListModels implements ModelLister.
func (l *httpLister) ListModels(ctx context.Context, t health.Target) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL+"/v1/models", nil)
	if err != nil {
		return nil, errors.New("bad url")
	}
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	req.Header.Set("X-Mesh-Gateway", t.GatewayID)
	req.Header.Set("Accept", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("GET /v1/models answered %d", resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsAnswer)).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /v1/models: not an OpenAI model list: %w", err)
	}
	models := make([]string, 0, len(list.Data))
	for _, d := range list.Data {
		models = append(models, d.ID)
	}
	return models, nil
}

// grpcLister asks a gRPC engine meshgw.engine.v1.Engine/Models over a connection of its own,
// closed after the call (each engine is asked about once), with the same metadata as the
// health probes.
type grpcLister struct{}

// ListModels implements ModelLister.
func (grpcLister) ListModels(ctx context.Context, t health.Target) ([]string, error) {
	addr, ok := strings.CutPrefix(t.URL, "grpc://")
	if !ok {
		return nil, errors.New("not a grpc:// url")
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	md := []string{"x-mesh-gateway", t.GatewayID}
	if t.APIKey != "" {
		md = append(md, "authorization", "Bearer "+t.APIKey)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	resp, err := enginev1.NewEngineClient(cc).Models(ctx, &enginev1.ModelsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	return resp.GetModels(), nil
}

// announcer is what a ZMQ worker's transport offers besides its local check: the models its
// engine announced in the WELCOME of the current session (an error before the handshake).
type announcer interface {
	AnnouncedModels() ([]string, error)
}

// announcedModels is the ZMQ model lister: the WELCOME the worker's link received; nothing is
// sent to the engine.
func (m *Manager) announcedModels(_ context.Context, t health.Target) ([]string, error) {
	w := m.pool.Get(t.ID)
	if w == nil {
		return nil, errors.New("not in the pool")
	}
	a, ok := w.Transport().(announcer)
	if !ok {
		return nil, errors.New("no zmq link")
	}
	return a.AnnouncedModels()
}
