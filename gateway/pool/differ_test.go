package pool

import (
	"testing"

	"github.com/meshgw/meshgw/worker"
)

// Differ tells whether the workers of a route serve different models and which capabilities
// they do not all have, counting every worker whatever its state.
func TestDiffer(t *testing.T) {
	type w struct {
		models []string
		caps   []string
		down   bool
	}
	const (
		chat   = worker.CapChat
		stream = worker.CapStreaming
		img    = worker.CapImageInput
		aud    = worker.CapAudioInput
	)
	tests := []struct {
		name       string
		workers    []w
		need       worker.Capability
		model      string
		unsure     worker.Capability
		wantModels bool
		wantCaps   worker.Capability
	}{
		{"one model", []w{{models: []string{"a"}}, {models: []string{"a"}}}, chat, "", img | stream, false, 0},
		{"same models in another order", []w{{models: []string{"a", "b"}}, {models: []string{"b", "a"}}}, chat, "", 0, false, 0},
		{"two models", []w{{models: []string{"a"}}, {models: []string{"b"}}}, chat, "", 0, true, 0},
		{"any model beside one", []w{{}, {models: []string{"a"}}}, chat, "", 0, true, 0},
		{"a worker that is down counts", []w{{models: []string{"a"}}, {models: []string{"b"}, down: true}}, chat, "", 0, true, 0},
		{"another route's worker does not", []w{{models: []string{"a"}}, {models: []string{"e"}, caps: []string{"embeddings"}}}, chat, "", 0, false, 0},
		{"capabilities differ", []w{{caps: []string{"chat", "image_input"}}, {caps: []string{"chat"}}}, chat, "", img | aud | stream, false, img},
		{"only among the model's workers", []w{{models: []string{"a"}, caps: []string{"chat", "image_input"}}, {models: []string{"b"}, caps: []string{"chat"}}}, chat, "a", img, true, 0},
		{"only the unsure ones", []w{{caps: []string{"chat", "image_input", "streaming"}}, {caps: []string{"chat", "streaming"}}}, chat, "", stream, false, 0},
		{"workers without what is known are left out", []w{{caps: []string{"chat", "image_input", "audio_input"}}, {caps: []string{"chat", "audio_input"}}, {caps: []string{"chat"}}}, chat | aud, "", img, false, img},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Config{})
			ws := addN(t, p, len(tt.workers), func(i int, s *worker.Spec) {
				s.Models, s.Capabilities = tt.workers[i].models, tt.workers[i].caps
			})
			for i, spec := range tt.workers {
				if spec.down {
					if _, err := p.SetFlags(ws[i].ID, true, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			models, caps := p.Snapshot().Differ(tt.need, []byte(tt.model), true, tt.unsure)
			if models != tt.wantModels || caps != tt.wantCaps {
				t.Errorf("Differ = %v, %v; want %v, %v", models, caps, tt.wantModels, tt.wantCaps)
			}
		})
	}
}

// BenchmarkDiffer is what a request whose model the gateway could not read pays in a pool of
// 10,000 workers that all serve one model: one read of every worker.
func BenchmarkDiffer(b *testing.B) {
	p := New(Config{})
	addN(b, p, 10000, func(i int, s *worker.Spec) { s.Models = []string{"m"} })
	snap := p.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		if models, _ := snap.Differ(worker.CapChat, nil, true, worker.CapImageInput|worker.CapStreaming); models {
			b.Fatal("one model reported as several")
		}
	}
}
