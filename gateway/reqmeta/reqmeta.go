// Package reqmeta reads what routing needs from a model request: the model, whether it streams,
// and the capabilities it requires, from a hand-written single-pass scan of at most the first
// MiB of a JSON body, or of the fields of a multipart upload, and from the X-Mesh-Route-* hint
// headers.
package reqmeta

import (
	"bytes"
	"strings"

	"github.com/meshgw/meshgw/worker"
)

// ScanLimit is how much of a body is scanned. A larger body is scanned up to here, and the hint
// headers supply what lies beyond.
const ScanLimit = 1 << 20

// Hint header names. They are for the gateway only and are not forwarded.
const (
	HeaderModel        = "X-Mesh-Route-Model"
	HeaderCapabilities = "X-Mesh-Route-Capabilities"
	HeaderStream       = "X-Mesh-Route-Stream"
)

// Route is a model route of the data plane.
type Route uint8

// The model routes.
const (
	RouteChat           Route = iota // POST /v1/chat/completions
	RouteCompletions                 // POST /v1/completions
	RouteEmbeddings                  // POST /v1/embeddings
	RouteGenerate                    // POST /generate (SGLang native)
	RouteSpeech                      // POST /v1/audio/speech
	RouteTranscriptions              // POST /v1/audio/transcriptions (multipart form)
	RouteTranslations                // POST /v1/audio/translations (multipart form)
	NumRoutes
)

var routeInfo = [NumRoutes]struct {
	path   string
	cap    worker.Capability
	prompt string // top-level field that holds the prompt
}{
	RouteChat:           {"/v1/chat/completions", worker.CapChat, "messages"},
	RouteCompletions:    {"/v1/completions", worker.CapCompletions, "prompt"},
	RouteEmbeddings:     {"/v1/embeddings", worker.CapEmbeddings, "input"},
	RouteGenerate:       {"/generate", worker.CapCompletions, "text"},
	RouteSpeech:         {"/v1/audio/speech", worker.CapSpeech, "input"},
	RouteTranscriptions: {"/v1/audio/transcriptions", worker.CapAudioInput, ""},
	RouteTranslations:   {"/v1/audio/translations", worker.CapAudioInput, ""},
}

// bodyCaps are the capabilities a JSON body can require beyond its route's.
const bodyCaps = worker.CapStreaming | worker.CapImageInput | worker.CapAudioInput |
	worker.CapVideoInput | worker.CapAudioOutput

// Path returns the route's URL path.
func (r Route) Path() string { return routeInfo[r].path }

func (r Route) String() string { return routeInfo[r].path }

// Capability returns what the route itself requires of a worker.
func (r Route) Capability() worker.Capability { return routeInfo[r].cap }

// JSON reports whether the route's body is JSON (and so is scanned); the others take a
// multipart form, whose fields are read.
func (r Route) JSON() bool { return r != RouteTranscriptions && r != RouteTranslations }

// inferable are the capabilities beyond the route's that a body on it can require: a form says
// only whether it streams.
func (r Route) inferable() worker.Capability {
	if r.JSON() {
		return bodyCaps
	}
	return worker.CapStreaming
}

// RouteOf returns the model route at path.
func RouteOf(path []byte) (Route, bool) {
	for r := Route(0); r < NumRoutes; r++ {
		if string(path) == routeInfo[r].path {
			return r, true
		}
	}
	return 0, false
}

// Meta is what routing needs from a request. Byte slices alias the body or the header values
// and are valid only as long as they are.
type Meta struct {
	Model     []byte            // empty: any model
	ModelSet  bool              // the body (or the model hint) named the model, null included
	Stream    bool              // the client asked for a streamed answer
	StreamSet bool              // the body (or the stream hint) said so explicitly
	Caps      worker.Capability // every capability a worker needs
	Prompt    []byte            // raw JSON of the prompt field, for prefix_hash
	Truncated bool              // only a prefix was read: the body exceeded ScanLimit, was streamed, or could not be read further
	// What a truncated read left unknown, and no hint supplied: the model, when the part read
	// named none (UnreadModel), and the capabilities beyond Caps that the unread rest may
	// require (UnreadCaps). Routing must not guess them where the workers differ in them.
	UnreadModel bool
	UnreadCaps  worker.Capability
}

// Hints are the raw values of the hint headers, nil when absent, and the request's multipart
// boundary (from its Content-Type) for the routes that take a form.
type Hints struct {
	Model, Capabilities, Stream []byte
	Boundary                    []byte
}

// Error is a request the gateway answers with 400 invalid_request_error. Header names the hint
// header at fault, empty when the body is.
type Error struct {
	Header string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Parse fills m from the body of a request on route and from the hint headers. It allocates
// nothing for a small, escape-free JSON body without hints.
func Parse(m *Meta, route Route, body []byte, h Hints) error {
	return parse(m, route, body, false, h)
}

// ParsePrefix is Parse for the first bytes of a body whose rest the gateway does not hold (a
// body streamed to the worker as it arrives): running out of them ends the scan, as the scan
// limit does, and the hint headers supply what lies beyond.
func ParsePrefix(m *Meta, route Route, prefix []byte, h Hints) error {
	return parse(m, route, prefix, true, h)
}

func parse(m *Meta, route Route, body []byte, prefix bool, h Hints) error {
	*m = Meta{}
	if route.JSON() {
		s := scanner{b: body, m: m, prompt: routeInfo[route].prompt, trunc: prefix}
		m.Truncated = prefix
		if len(body) > ScanLimit {
			s.b, s.trunc, m.Truncated = body[:ScanLimit], true, true
		}
		if err := s.document(); err != nil {
			if _, end := err.(errEnd); !end {
				return err
			}
		}
	} else {
		complete, err := scanForm(m, body, h.Boundary)
		if err != nil {
			return err
		}
		m.Truncated = !complete
	}
	if m.Stream {
		m.Caps |= worker.CapStreaming
	}
	inferred := m.Caps
	m.Caps |= route.Capability()
	if err := applyHints(m, route, inferred, h); err != nil {
		return err
	}
	if m.Truncated {
		m.UnreadModel = !m.ModelSet
		if h.Capabilities == nil {
			m.UnreadCaps = route.inferable() &^ m.Caps
			if m.StreamSet {
				m.UnreadCaps &^= worker.CapStreaming
			}
		}
	}
	return nil
}

// applyHints merges the hint headers into m. A hint fills what the body did not say; a hint that
// contradicts what the body said is an error naming the header. A capabilities hint adds to the
// required set, and contradicts the body only when it leaves out a capability a fully scanned
// body requires.
func applyHints(m *Meta, route Route, inferred worker.Capability, h Hints) error {
	if h.Model != nil {
		hm := bytes.TrimSpace(h.Model)
		if len(m.Model) > 0 && !bytes.Equal(m.Model, hm) {
			return &Error{Header: HeaderModel, Msg: HeaderModel + " \"" + string(hm) +
				"\" contradicts the body's model \"" + string(m.Model) + "\""}
		}
		m.Model, m.ModelSet = hm, true
	}
	if h.Stream != nil {
		v, ok := parseBool(h.Stream)
		if !ok {
			return &Error{Header: HeaderStream, Msg: HeaderStream + " \"" + string(h.Stream) + "\" is not true or false"}
		}
		if m.StreamSet && v != m.Stream {
			return &Error{Header: HeaderStream, Msg: HeaderStream + " contradicts the body's \"stream\""}
		}
		m.Stream, m.StreamSet = v, true
		if v {
			m.Caps |= worker.CapStreaming
		}
	}
	if h.Capabilities != nil {
		hc, err := worker.ParseCapabilities(strings.Split(string(h.Capabilities), ","))
		if err != nil {
			return &Error{Header: HeaderCapabilities, Msg: HeaderCapabilities + ": " + err.Error()}
		}
		if m.Stream {
			hc |= worker.CapStreaming
		}
		if route.JSON() && !m.Truncated && !(hc | route.Capability()).Has(inferred) {
			missing := inferred &^ (hc | route.Capability())
			return &Error{Header: HeaderCapabilities, Msg: HeaderCapabilities + " leaves out " +
				missing.String() + ", which the body requires"}
		}
		m.Caps |= hc
	}
	return nil
}

func parseBool(b []byte) (bool, bool) {
	switch strings.ToLower(string(bytes.TrimSpace(b))) {
	case "true", "1", "yes":
		return true, true
	case "false", "0", "no":
		return false, true
	}
	return false, false
}
