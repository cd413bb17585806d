// Package fakekube is a scripted Kubernetes API server for tests: an HTTP server on 127.0.0.1
// speaking enough of the API's list and watch protocol for pods (JSON) that client-go's real
// transport, reflector and informers run against it, reached through a kubeconfig file it
// writes. No real kube-apiserver can be had on the machines that run meshgw's tests.
//
// It serves GET /api/v1/pods and /api/v1/namespaces/{ns}/pods: a list (PodList with the
// current resourceVersion) or, with watch=true, a stream of ADDED, MODIFIED and DELETED events
// from the requested resourceVersion, BOOKMARK events, and the streaming list client-go asks for
// first (sendInitialEvents=true: the current pods as ADDED, then the initial-events-end
// bookmark). The test script changes pods (Apply, Delete), ends every open watch (CloseWatches),
// expires the history so that a watch from an older resourceVersion gets 410 Gone and the
// reflector lists again (Expire), and forbids a namespace (403, as RBAC answers).
package fakekube

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Server is the scripted API server. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu        sync.Mutex
	rv        uint64
	pods      map[string]*corev1.Pod // namespace/name
	history   []event                // every change, oldest first
	compacted uint64                 // a watch from a resourceVersion below this gets 410 Gone
	forbidden map[string]bool        // namespaces; "" forbids the cluster-wide list
	watches   map[*watchStream]struct{}
	noStream  bool // refuse sendInitialEvents (an API server without streaming lists)

	lists, watchCount, gone, refused atomic.Int64
}

type event struct {
	Type string
	Pod  *corev1.Pod
	RV   uint64
}

type watchStream struct {
	ns  string
	sel labels.Selector
	ch  chan event
	end chan struct{}
}

// New starts a server on 127.0.0.1; Close stops it.
func New() *Server {
	s := &Server{rv: 1, pods: map[string]*corev1.Pod{}, forbidden: map[string]bool{}, watches: map[*watchStream]struct{}{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the server's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Close ends every watch and stops the server. It takes no new connection first and then
// closes those open: a client still running (an informer that reconnects at once) would
// otherwise open a new watch after CloseWatches, and httptest's Close would wait for it forever.
func (s *Server) Close() {
	_ = s.srv.Listener.Close()
	s.CloseWatches()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// WriteKubeconfig writes a kubeconfig naming this server as the current context's cluster to
// dir/kubeconfig and returns its path.
func (s *Server) WriteKubeconfig(dir string) (string, error) {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: %s
users:
- name: tester
  user:
    token: test-token
contexts:
- name: fake
  context:
    cluster: fake
    user: tester
current-context: fake
`, s.srv.URL)
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// Apply adds p, or replaces the pod of its namespace and name, and sends ADDED or MODIFIED to
// the watches. It stamps a copy with the next resourceVersion.
func (s *Server) Apply(p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p = p.DeepCopy()
	key := p.Namespace + "/" + p.Name
	typ := "ADDED"
	if _, ok := s.pods[key]; ok {
		typ = "MODIFIED"
	}
	s.rv++
	p.ResourceVersion = strconv.FormatUint(s.rv, 10)
	s.pods[key] = p
	s.publish(event{Type: typ, Pod: p, RV: s.rv})
}

// Delete removes a pod and sends DELETED; it reports whether the pod existed.
func (s *Server) Delete(namespace, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	p, ok := s.pods[key]
	if !ok {
		return false
	}
	delete(s.pods, key)
	s.rv++
	p = p.DeepCopy()
	p.ResourceVersion = strconv.FormatUint(s.rv, 10)
	s.publish(event{Type: "DELETED", Pod: p, RV: s.rv})
	return true
}

// Pod returns a copy of a pod; nil when there is none.
func (s *Server) Pod(namespace, name string) *corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pods[namespace+"/"+name]; p != nil {
		return p.DeepCopy()
	}
	return nil
}

// CloseWatches ends every open watch stream, as an API server does at its timeout or a restart;
// the reflector watches again from the last resourceVersion it saw.
func (s *Server) CloseWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watches {
		close(w.end)
		delete(s.watches, w)
	}
}

// Expire forgets the history up to now: a watch from any resourceVersion served so far gets
// 410 Gone, and the reflector lists again. Open watches are ended.
func (s *Server) Expire() {
	s.mu.Lock()
	s.compacted = s.rv + 1
	s.history = nil
	s.mu.Unlock()
	s.CloseWatches()
}

// Forbid makes the API server refuse lists and watches of pods in namespace with 403, as RBAC
// does for a service account without the Role there; "" forbids the cluster-wide list.
func (s *Server) Forbid(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forbidden[namespace] = true
}

// RefuseStreamingLists makes the server answer a watch with sendInitialEvents=true 400 Bad
// Request, as an API server without streaming lists does, so that client-go's reflector falls
// back to a plain list and a watch from its resourceVersion.
func (s *Server) RefuseStreamingLists() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noStream = true
}

// Stats are the requests served: full lists (a list, or a watch with sendInitialEvents, which
// client-go's reflector tries first), watches, watches answered 410 Gone, and requests refused
// 403.
func (s *Server) Stats() (lists, watches, gone, refused int64) {
	return s.lists.Load(), s.watchCount.Load(), s.gone.Load(), s.refused.Load()
}

// publish records e and hands it to the watches it matches. Called with mu held; a watch whose
// buffer is full is ended (the client watches again), as an API server drops a slow watcher.
func (s *Server) publish(e event) {
	s.history = append(s.history, e)
	for w := range s.watches {
		if !w.matches(e.Pod) {
			continue
		}
		select {
		case w.ch <- e:
		default:
			close(w.end)
			delete(s.watches, w)
		}
	}
}

func (w *watchStream) matches(p *corev1.Pod) bool {
	return (w.ns == "" || p.Namespace == w.ns) && w.sel.Matches(labels.Set(p.Labels))
}

// serve routes the pod paths; anything else is 404.
func (s *Server) serve(rw http.ResponseWriter, r *http.Request) {
	ns, ok := podsPath(r.URL.Path)
	if !ok || r.Method != http.MethodGet {
		writeStatus(rw, http.StatusNotFound, "NotFound", "the fake API server serves only pods")
		return
	}
	q := r.URL.Query()
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		writeStatus(rw, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	s.mu.Lock()
	forbidden := s.forbidden[ns]
	s.mu.Unlock()
	if forbidden {
		s.refused.Add(1)
		where := "at the cluster scope"
		if ns != "" {
			where = fmt.Sprintf("in the namespace %q", ns)
		}
		writeStatus(rw, http.StatusForbidden, "Forbidden", fmt.Sprintf(`pods is forbidden: User "system:serviceaccount:meshgw:meshgw" cannot list resource "pods" in API group "" %s`, where))
		return
	}
	if w := q.Get("watch"); w == "true" || w == "1" {
		s.watch(rw, r, ns, sel)
		return
	}
	s.list(rw, ns, sel)
}

// podsPath returns the namespace of /api/v1/namespaces/{ns}/pods ("" for /api/v1/pods).
func podsPath(p string) (string, bool) {
	if p == "/api/v1/pods" {
		return "", true
	}
	rest, ok := strings.CutPrefix(p, "/api/v1/namespaces/")
	if !ok {
		return "", false
	}
	ns, tail, _ := strings.Cut(rest, "/")
	return ns, tail == "pods" && ns != ""
}

func (s *Server) list(rw http.ResponseWriter, ns string, sel labels.Selector) {
	s.lists.Add(1)
	s.mu.Lock()
	out := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(s.rv, 10)}}
	w := &watchStream{ns: ns, sel: sel}
	for _, p := range s.pods {
		if w.matches(p) {
			out.Items = append(out.Items, *withKind(p))
		}
	}
	s.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(out)
}

// watch streams events: from resourceVersion (history after it), or with
// sendInitialEvents=true the current pods and the initial-events-end bookmark first.
func (s *Server) watch(rw http.ResponseWriter, r *http.Request, ns string, sel labels.Selector) {
	s.watchCount.Add(1)
	q := r.URL.Query()
	from, _ := strconv.ParseUint(q.Get("resourceVersion"), 10, 64)
	initial := q.Get("sendInitialEvents") == "true"
	w := &watchStream{ns: ns, sel: sel, ch: make(chan event, 1024), end: make(chan struct{})}
	var backlog []event
	s.mu.Lock()
	switch {
	case initial && s.noStream:
		s.mu.Unlock()
		writeStatus(rw, http.StatusBadRequest, "BadRequest", "sendInitialEvents is not supported")
		return
	case initial:
		s.lists.Add(1)
		for _, p := range s.pods {
			if w.matches(p) {
				backlog = append(backlog, event{Type: "ADDED", Pod: p})
			}
		}
		backlog = append(backlog, event{Type: "BOOKMARK", RV: s.rv})
	case from != 0 && from < s.compacted:
		s.mu.Unlock()
		s.gone.Add(1)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusOK)
		writeEvent(rw, "ERROR", status(http.StatusGone, "Expired", fmt.Sprintf("too old resource version: %d (%d)", from, s.compacted)))
		return
	default:
		for _, e := range s.history {
			if e.RV > from && w.matches(e.Pod) {
				backlog = append(backlog, e)
			}
		}
	}
	s.watches[w] = struct{}{}
	s.mu.Unlock()
	defer s.drop(w)
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("Transfer-Encoding", "chunked")
	rw.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := rw.(http.Flusher); ok {
			f.Flush()
		}
	}
	send := func(e event) {
		if e.Type == "BOOKMARK" {
			bm := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{
				ResourceVersion: strconv.FormatUint(e.RV, 10), Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
			writeEvent(rw, "BOOKMARK", bm)
			return
		}
		writeEvent(rw, e.Type, withKind(e.Pod))
	}
	for _, e := range backlog {
		send(e)
	}
	flush()
	for {
		select {
		case e := <-w.ch:
			send(e)
			flush()
		case <-w.end:
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) drop(w *watchStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.watches[w]; ok {
		delete(s.watches, w)
		close(w.end)
	}
}

func withKind(p *corev1.Pod) *corev1.Pod {
	c := p.DeepCopy()
	c.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	return c
}

func writeEvent(rw http.ResponseWriter, typ string, obj any) {
	_ = json.NewEncoder(rw).Encode(map[string]any{"type": typ, "object": obj})
}

func status(code int, reason, msg string) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: int32(code), Reason: metav1.StatusReason(reason), Message: msg}
}

func writeStatus(rw http.ResponseWriter, code int, reason, msg string) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_ = json.NewEncoder(rw).Encode(status(code, reason, msg))
}
