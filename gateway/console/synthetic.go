package console

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Synthetic is a made-up mesh of any size, for the benchmark and the browser scale test: peers
// in four regions, workers owned round-robin, serving six models, most of them ready. Churn
// changes some of them, as a busy fleet would.
type Synthetic struct {
	mu  sync.Mutex
	st  State
	rnd *rand.Rand
}

var (
	synthRegions = []string{"us-east", "us-west", "eu-west", "ap-south"}
	synthModels  = []string{"llama-3.1-8b", "llama-3.1-70b", "qwen2.5-32b", "mistral-7b", "deepseek-v3", "gemma-2-27b"}
	synthHealth  = []string{"ready", "ready", "ready", "ready", "ready", "ready", "ready", "not_ready", "pending", "failed"}
)

// NewSynthetic makes a mesh of peers gateways and workers workers, the same for the same seed.
func NewSynthetic(peers, workers int, seed uint64) *Synthetic {
	s := &Synthetic{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	s.st.Node = "gw-001"
	for i := range peers {
		p := Peer{ID: fmt.Sprintf("gw-%03d", i+1), Status: "alive", Region: synthRegions[i%len(synthRegions)],
			Color: []string{"blue", "green"}[i%2], Version: "v1.0.0", Applied: 100000 + uint64(s.rnd.IntN(50))}
		switch {
		case i == 0:
			p.Raft, p.Self = "leader", true
		case i < 5:
			p.Raft = "voter"
		default:
			p.Raft = "nonvoter"
		}
		s.st.Peers = append(s.st.Peers, p)
	}
	for i := range workers {
		owner := &s.st.Peers[i%max(peers, 1)]
		owner.Owned++
		w := Worker{ID: fmt.Sprintf("w-%05d", i+1), URL: fmt.Sprintf("http://10.%d.%d.%d:30000", i/65536%256, i/256%256, i%256),
			Owner: owner.ID, Region: owner.Region, Models: synthModels[i%len(synthModels)], Hit: -1}
		s.set(&w)
		s.st.Workers = append(s.st.Workers, w)
	}
	return s
}

// set gives w a random state.
func (s *Synthetic) set(w *Worker) {
	w.Health = synthHealth[s.rnd.IntN(len(synthHealth))]
	w.Breaker = "closed"
	if s.rnd.IntN(50) == 0 {
		w.Breaker = "open"
	}
	w.Disabled = s.rnd.IntN(100) == 0
	if w.Disabled {
		w.Reason = "maintenance"
	}
	w.Routable = w.Health == "ready" && w.Breaker == "closed" && !w.Disabled
	w.Hit = float64(s.rnd.IntN(1000)) / 1000
	w.Active = int64(s.rnd.IntN(8))
}

// Churn gives n random workers a new random state.
func (s *Synthetic) Churn(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.st.Workers) == 0 {
		return
	}
	for range n {
		s.set(&s.st.Workers[s.rnd.IntN(len(s.st.Workers))])
	}
}

// State returns a copy of the current mesh.
func (s *Synthetic) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Peers = append([]Peer(nil), s.st.Peers...)
	st.Workers = append([]Worker(nil), s.st.Workers...)
	return st
}
