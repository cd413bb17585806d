package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Watcher keeps a current view of the pods one label selector names in one namespace ("" for
// every namespace the client may list), through a client-go informer: it lists, then watches
// from the list's resourceVersion, resumes a closed watch, and relists when the API server
// answers 410 Gone. A list refused (403 Forbidden: the service account may not list there) is
// reported by Err, and the reflector retries it with its backoff; nothing crashes.
type Watcher struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   listersv1.PodLister
	changed  chan struct{}
	where    string
	log      *slog.Logger

	mu      sync.Mutex
	lastErr error
	errRV   string // the resourceVersion synced when lastErr came
}

// NewWatcher makes the watcher; Start starts it. log receives one line per list or watch error
// that changes (client-go's own lines go to it too, at their levels).
func NewWatcher(client kubernetes.Interface, namespace string, selector map[string]string, log *slog.Logger) (*Watcher, error) {
	if log == nil {
		log = slog.Default()
	}
	routeKlog(log)
	sel := SelectorString(selector)
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	pods := f.Core().V1().Pods()
	w := &Watcher{factory: f, informer: pods.Informer(), lister: pods.Lister(), changed: make(chan struct{}, 1), log: log}
	w.where = "in every namespace"
	if namespace != "" {
		w.where = "in namespace " + namespace
	}
	w.where += " with selector " + sel
	if err := w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) { w.fail(err) }); err != nil {
		return nil, err
	}
	if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.signal() },
		UpdateFunc: func(any, any) { w.signal() },
		DeleteFunc: func(any) { w.signal() },
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// Start runs the informer until ctx ends or Stop.
func (w *Watcher) Start(ctx context.Context) { w.factory.Start(ctx.Done()) }

// Stop ends the informer and waits for its goroutines.
func (w *Watcher) Stop() { w.factory.Shutdown() }

// Synced reports whether the first list completed: before it, Pods is not the truth, and
// nothing may be removed because of its absence.
func (w *Watcher) Synced() bool { return w.informer.HasSynced() }

// Changed receives after pods changed (coalesced) and after an error was reported.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

// Pods returns the pods as last listed and watched.
func (w *Watcher) Pods() ([]*corev1.Pod, error) { return w.lister.List(labels.Everything()) }

// Err is the last list or watch error, until a list or watch succeeds again; nil when none.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastErr != nil && w.informer.LastSyncResourceVersion() != w.errRV {
		return nil // a list or watch went on since
	}
	return w.lastErr
}

// fail records a list or watch error and logs it when it differs from the last one.
func (w *Watcher) fail(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	msg := w.explain(err)
	w.mu.Lock()
	same := w.lastErr != nil && w.lastErr.Error() == msg.Error()
	w.lastErr, w.errRV = msg, w.informer.LastSyncResourceVersion()
	w.mu.Unlock()
	if !same {
		lvl := slog.LevelWarn
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			lvl = slog.LevelInfo
		}
		w.log.Log(context.Background(), lvl, "kubernetes discovery: listing or watching pods failed; retrying with backoff", "err", msg)
	}
	w.signal()
}

// explain turns a list or watch error into one line saying what to do.
func (w *Watcher) explain(err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("forbidden to list pods %s: give the service account get, list and watch on pods there (deploy/kubernetes/base/rbac.yaml)", w.where)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server refused the credentials listing pods %s: %s", w.where, oneLine(err.Error()))
	}
	return fmt.Errorf("pods %s: %s", w.where, oneLine(err.Error()))
}

func (w *Watcher) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

var klogOnce sync.Once

// routeKlog sends client-go's klog lines to log, once per process, instead of stderr.
func routeKlog(log *slog.Logger) {
	klogOnce.Do(func() {
		klog.SetLogger(logr.FromSlogHandler(log.With("component", "client-go").Handler()))
	})
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
