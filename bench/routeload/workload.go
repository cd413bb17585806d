// Package routeload is the load of the routing-quality benchmark: multi-turn chat sessions that
// share a few long system prompts, each turn sent to a gateway picked at random (as an L4 load
// balancer sprays them, with no session key), and what the engines' answers say about how much
// of the prompts their prefix caches held.
package routeload

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Workload describes the scripted conversations. Zero fields take the defaults in their
// comments (the benchmark's standard workload).
type Workload struct {
	// SystemPrompts is how many distinct system prompts the sessions share (8), each
	// SystemMin to SystemMax bytes long (2,048 to 4,096).
	SystemPrompts        int `json:"system_prompts"`
	SystemMin, SystemMax int `json:"-"`
	// Sessions is the number of conversations (300), each of Turns turns (6).
	Sessions int `json:"sessions"`
	Turns    int `json:"turns"`
	// UserMin and UserMax bound a user message's length in bytes (200 to 600).
	UserMin, UserMax int `json:"-"`
	// Seed makes the texts reproducible (0 is a seed too).
	Seed uint64 `json:"seed"`
}

func (w *Workload) setDefaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&w.SystemPrompts, 8)
	def(&w.SystemMin, 2048)
	def(&w.SystemMax, 4096)
	def(&w.Sessions, 300)
	def(&w.Turns, 6)
	def(&w.UserMin, 200)
	def(&w.UserMax, 600)
	w.SystemMax = max(w.SystemMax, w.SystemMin)
	w.UserMax = max(w.UserMax, w.UserMin)
}

// Describe says what the workload is, in one line.
func (w Workload) Describe() string {
	w.setDefaults()
	return fmt.Sprintf("%d sessions of %d turns sharing %d system prompts of %d-%d bytes; each turn appends the "+
		"previous answer and a new user message of %d-%d bytes", w.Sessions, w.Turns, w.SystemPrompts,
		w.SystemMin, w.SystemMax, w.UserMin, w.UserMax)
}

// Script is the text of every conversation, fixed before the load starts.
type Script struct {
	Systems  []string
	Sessions []Session
}

// Session is one conversation: the index of its system prompt and its user messages, one a
// turn.
type Session struct {
	System int
	Users  []string
}

// Script builds the conversations: every text is random words, so that no two texts share a
// prefix by accident; each session draws its system prompt uniformly.
func (w Workload) Script() Script {
	w.setDefaults()
	rng := rand.New(rand.NewPCG(w.Seed, 0x5eed))
	s := Script{Systems: make([]string, w.SystemPrompts), Sessions: make([]Session, w.Sessions)}
	for i := range s.Systems {
		s.Systems[i] = fmt.Sprintf("System prompt %d. ", i) + words(rng, between(rng, w.SystemMin, w.SystemMax))
	}
	for i := range s.Sessions {
		ss := Session{System: rng.IntN(w.SystemPrompts), Users: make([]string, w.Turns)}
		for t := range ss.Users {
			ss.Users[t] = words(rng, between(rng, w.UserMin, w.UserMax))
		}
		s.Sessions[i] = ss
	}
	return s
}

func between(rng *rand.Rand, lo, hi int) int { return lo + rng.IntN(hi-lo+1) }

// vocabulary is what the texts are made of.
var vocabulary = strings.Fields(`the a of to and in is it that for on with as was at by an be this
from or are have not but what all were when we there can more if no out so said up time about
model engine cache prompt token request answer router gateway worker prefix session turn queue
slot block latency throughput memory batch decode prefill system user assistant please explain
why how which where summary detail example list table code review plan step test result`)

// words returns n bytes of space-separated words drawn from the vocabulary.
func words(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()[:n]
}
