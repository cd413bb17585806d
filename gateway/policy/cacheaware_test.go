package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/gateway/prefixindex"
	"github.com/meshgw/meshgw/worker"
)

func TestCacheAwareChoose(t *testing.T) {
	type m = prefixindex.Match
	tests := []struct {
		name    string
		textLen int
		matches []m
		loads   []int64
		want    int
	}{
		// 1. The spill gate: most − least > 64 and most > 1.5 × least → the least loaded.
		{"imbalanced goes to the least loaded, not the match", 100, []m{{Len: 100}, {}, {}}, []int64{100, 10, 30}, 1},
		{"imbalanced: ties go to the earlier", 100, []m{{Len: 100}, {}, {}}, []int64{100, 5, 5}, 1},
		{"gap of exactly 64 is not imbalanced", 100, []m{{Len: 100}, {}}, []int64{74, 10}, 0},
		{"gap over 64 but ratio 1.5 exactly is not", 100, []m{{Len: 100}, {}}, []int64{195, 130}, 0},
		{"ratio over 1.5 but gap under 64 is not", 100, []m{{Len: 100}, {}}, []int64{60, 0}, 0},
		{"an idle fleet is balanced", 100, []m{{}, {Len: 100}}, []int64{0, 0}, 1},
		{"the gate looks at every candidate, not only the match", 100, []m{{Len: 100}, {}, {}}, []int64{10, 0, 100}, 1},
		// 2. A match over the threshold → the best match.
		{"match over 0.3 wins", 100, []m{{Len: 31, Held: 900}, {Held: 0}}, []int64{5, 0}, 0},
		{"the longest match wins", 100, []m{{Len: 40}, {Len: 90}, {Len: 60}}, []int64{0, 9, 0}, 1},
		{"equal matches: the lower load", 100, []m{{Len: 50}, {Len: 50}, {Len: 50}}, []int64{3, 1, 1}, 1},
		{"equal matches and loads: the earlier", 100, []m{{Len: 10}, {Len: 50}, {Len: 50}}, []int64{0, 2, 2}, 1},
		// 3. Else the least indexed text.
		{"match of exactly 0.3 is not enough", 100, []m{{Len: 30, Held: 500}, {Held: 100}}, []int64{0, 0}, 1},
		{"no match: the least indexed text", 100, []m{{Held: 500}, {Held: 100}, {Held: 300}}, []int64{0, 5, 0}, 1},
		{"least text ties: the lower load", 100, []m{{Held: 100}, {Held: 100}, {Held: 300}}, []int64{2, 1, 0}, 1},
		{"least text and load ties: the earlier", 100, []m{{Held: 300}, {Held: 100}, {Held: 100}}, []int64{0, 4, 4}, 1},
		{"no text: the least indexed text", 0, []m{{Held: 64}, {Held: 0}}, []int64{0, 3}, 1},
		{"one candidate", 100, []m{{Held: 5}}, []int64{1000}, 0},
	}
	cfg := CacheAwareConfig{}
	cfg.setDefaults()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := choose(&cfg, tt.textLen, tt.matches, tt.loads); got != tt.want {
				t.Errorf("choose = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestCacheAwareConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   CacheAwareConfig
		want CacheAwareConfig
	}{
		{"zero takes the cost rule and SMG's thresholds", CacheAwareConfig{},
			CacheAwareConfig{Rule: RuleCost, LoadCost: 256, LoadSlack: 2, CacheThreshold: 0.3, BalanceAbsThreshold: 64, BalanceRelThreshold: 1.5}},
		{"negative asks for zero", CacheAwareConfig{LoadCost: -1, LoadSlack: -1, CacheThreshold: -1, BalanceAbsThreshold: -1, BalanceRelThreshold: -1}, CacheAwareConfig{Rule: RuleCost}},
		{"given values stay", CacheAwareConfig{Rule: RuleSMG, LoadCost: 300, LoadSlack: 5, CacheThreshold: 0.5, BalanceAbsThreshold: 8, BalanceRelThreshold: 1.1},
			CacheAwareConfig{Rule: RuleSMG, LoadCost: 300, LoadSlack: 5, CacheThreshold: 0.5, BalanceAbsThreshold: 8, BalanceRelThreshold: 1.1}},
	}
	for _, tt := range tests {
		got := tt.in
		got.setDefaults()
		if got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// With thresholds of zero, any match and any load gap decide.
	zero := CacheAwareConfig{CacheThreshold: -1, BalanceAbsThreshold: -1, BalanceRelThreshold: -1}
	zero.setDefaults()
	if got := choose(&zero, 100, []prefixindex.Match{{}, {Len: 1}}, []int64{0, 0}); got != 1 {
		t.Errorf("threshold 0: a 1-byte match lost")
	}
	if got := choose(&zero, 100, []prefixindex.Match{{}, {Len: 100}}, []int64{0, 1}); got != 0 {
		t.Errorf("balance thresholds 0: a gap of one request did not spill")
	}
}

// loads is a Load a test sets.
type loads map[*pool.Worker]int64

func (l loads) Load(w *pool.Worker) int64 { return l[w] }

func chat(msgs ...string) []byte {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			sb.WriteByte(',')
		}
		role := "user"
		if i == 0 {
			role = "system"
		} else if i%2 == 0 {
			role = "assistant"
		}
		fmt.Fprintf(&sb, `{"role":%q,"content":%q}`, role, m)
	}
	sb.WriteByte(']')
	return []byte(sb.String())
}

func TestCacheAwareSessions(t *testing.T) {
	c := workers(t, 4)
	p := mustNew(t, CacheAware, Options{Load: loads{}, CacheAware: CacheAwareConfig{Rule: RuleSMG}})
	system := func(i int) string {
		return fmt.Sprintf("System prompt %d. ", i) + strings.Repeat("Follow the rules. ", 40)
	}
	// Four new system prompts: each goes to the worker with the least indexed text, so they
	// spread over the four workers.
	home := map[int]*pool.Worker{}
	for i := range 4 {
		home[i] = p.Pick(c, &Request{Prompt: chat(system(i), "hello")})
	}
	seen := map[*pool.Worker]bool{}
	for _, w := range home {
		seen[w] = true
	}
	if len(seen) != 4 {
		t.Fatalf("4 new prefixes went to %d workers, want 4", len(seen))
	}
	// Every later turn of every session goes home.
	for turn := 2; turn < 8; turn++ {
		for i := range 4 {
			msgs := []string{system(i), "hello"}
			for k := 1; k < turn; k++ {
				msgs = append(msgs, "answer "+strconv.Itoa(k), "question "+strconv.Itoa(k))
			}
			if w := p.Pick(c, &Request{Prompt: chat(msgs...)}); w != home[i] {
				t.Fatalf("turn %d of session %d went to %s, its prefix is on %s", turn, i, w.ID, home[i].ID)
			}
		}
	}
}

// Each pick counts, on the worker picked, the routing text's length and the part of it the
// index predicted that worker holds: what GET /workers shows beside the engines' own report.
func TestCacheAwarePredictionCounted(t *testing.T) {
	c := workers(t, 2)
	p := mustNew(t, CacheAware, Options{Load: loads{}, CacheAware: CacheAwareConfig{Rule: RuleSMG}})
	prompt := chat(strings.Repeat("A long shared system prompt. ", 40), "hello")
	first := p.Pick(c, &Request{Prompt: prompt})
	if text, matched := first.Prediction(); text == 0 || matched != 0 {
		t.Fatalf("a new prompt: %d text, %d matched; want some text, none matched", text, matched)
	}
	text1, _ := first.Prediction()
	if again := p.Pick(c, &Request{Prompt: prompt}); again != first {
		t.Fatalf("the same prompt went to %s, then %s", first.ID, again.ID)
	}
	text, matched := first.Prediction()
	if text != 2*text1 || matched == 0 || matched > text1 {
		t.Fatalf("the prompt again: %d text, %d matched; want %d text and a match of at most %d", text, matched, 2*text1, text1)
	}
	other := c[0]
	if other == first {
		other = c[1]
	}
	if text, _ := other.Prediction(); text != 0 {
		t.Fatalf("the worker not picked counted %d bytes", text)
	}
}

func TestCacheAwareSpillMovesTheEntry(t *testing.T) {
	c := workers(t, 2)
	l := loads{}
	p := mustNew(t, CacheAware, Options{Load: l})
	prompt := chat(strings.Repeat("shared prefix ", 50), "q")
	first := p.Pick(c, &Request{Prompt: prompt})
	other := c[0]
	if other == first {
		other = c[1]
	}
	l[first] = 100 // imbalanced: 100 − 0 > 64 and 100 > 1.5 × 0
	if w := p.Pick(c, &Request{Prompt: prompt}); w != other {
		t.Fatalf("an imbalanced pick went to %s, want the least loaded %s", w.ID, other.ID)
	}
	l[first] = 0
	l[other] = 1 // balanced again; both hold the text now, the lower load wins the tie
	if w := p.Pick(c, &Request{Prompt: prompt}); w != first {
		t.Fatalf("after the spill both hold the prefix; the pick went to %s, want the less loaded %s", w.ID, first.ID)
	}
	l[first], l[other] = 1, 0
	if w := p.Pick(c, &Request{Prompt: prompt}); w != other {
		t.Fatalf("the spill's worker does not hold the prefix: pick went to %s", w.ID)
	}
}

func TestCacheAwareIndexPerDeclaredModel(t *testing.T) {
	pl := pool.New(pool.Config{})
	for i, model := range []string{"a", "a", "b"} {
		if _, _, err := pl.Upsert(worker.Spec{URL: "http://127.0.0.1:" + strconv.Itoa(20000+i), Models: []string{model}}, pool.OriginLocal); err != nil {
			t.Fatal(err)
		}
	}
	declared := pl.Snapshot().Routable
	anyModel := workers(t, 2)
	p := mustNew(t, CacheAware, Options{}).(*cacheAware)
	prompt := chat("x")
	p.Pick(declared[:2], &Request{Prompt: prompt, Model: []byte("a")})
	p.Pick(declared[2:], &Request{Prompt: prompt, Model: []byte("b")})
	for i := range 100 { // names no worker declares
		p.Pick(anyModel, &Request{Prompt: prompt, Model: []byte("client-" + strconv.Itoa(i))})
	}
	got := p.idx.Models()
	slices.Sort(got)
	if want := []string{"", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("model indexes %q, want %q: a and b, and one for the workers that take any model", got, want)
	}
}

// TestCacheAwareBadInput routes prompts a client may send: no panic, a candidate always, and
// only text parts count.
func TestCacheAwareBadInput(t *testing.T) {
	c := workers(t, 3)
	p := mustNew(t, CacheAware, Options{Load: loads{}})
	image := `{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("QUFB", 1<<16) + `"}}`
	audio := `{"type":"input_audio","input_audio":{"data":"` + strings.Repeat("UklG", 1<<16) + `","format":"wav"}}`
	huge := chat(strings.Repeat("long prompt ", (1<<20)/12))
	prompts := map[string][]byte{
		"nil request":            nil,
		"no prompt":              {},
		"invalid UTF-8":          []byte("[{\"role\":\"user\",\"content\":\"\xff\xfe\xfd bad\"}]"),
		"images only":            []byte(`[{"role":"user","content":[` + image + `]}]`),
		"audio and text":         []byte(`[{"role":"user","content":[` + audio + `,{"type":"text","text":"transcribe this"}]}]`),
		"empty messages":         []byte(`[{"role":"user","content":""},{"role":"assistant","content":null},{"role":"user","content":[]}]`),
		"cut short":              huge[:len(huge)/2],
		"a mebibyte":             huge,
		"not JSON":               []byte(`{{{[[["\`),
		"deeply nested":          []byte(strings.Repeat("[", 100000)),
		"numbers for token ids":  []byte(`[1,2,3,4]`),
		"a lone surrogate":       []byte(`"\ud800"`),
		"content of wrong types": []byte(`[{"role":"user","content":{"text":"x"}},{"role":"user","content":7}]`),
	}
	for name, prompt := range prompts {
		t.Run(name, func(t *testing.T) {
			var r *Request
			if name != "nil request" {
				r = &Request{Prompt: prompt}
			}
			w := p.Pick(c, r)
			if w == nil {
				t.Fatal("no worker picked")
			}
		})
	}
	// The images' bytes are not routing text: two requests with different images and the same
	// text hold the same entry.
	img2 := strings.Replace(image, "QUFB", "QkJC", 1)
	a := &Request{Prompt: []byte(`[{"role":"user","content":[` + image + `,{"type":"text","text":"` + strings.Repeat("same words ", 20) + `"}]}]`)}
	b := &Request{Prompt: []byte(`[{"role":"user","content":[` + img2 + `,{"type":"text","text":"` + strings.Repeat("same words ", 20) + `"}]}]`)}
	if wa, wb := p.Pick(c, a), p.Pick(c, b); wa != wb {
		t.Errorf("same text with another image went to %s, then %s", wa.ID, wb.ID)
	}
}

// TestCacheAwareEvictsOffThePath floods the index past its bound; the picks themselves start
// the eviction, which runs beside them and brings the index back under the bound.
func TestCacheAwareEvictsOffThePath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 32 << 10
		c := workers(t, 4)
		p := mustNew(t, CacheAware, Options{CacheAware: CacheAwareConfig{MaxTreeSize: bound, EvictionInterval: time.Minute}}).(*cacheAware)
		m := p.idx.Model(nil)
		for i := 0; i < 1000; i++ {
			p.Pick(c, &Request{Prompt: chat(fmt.Sprintf("session %d ", i) + strings.Repeat("words ", 100))})
			synctest.Wait() // an eviction a pick started has ended
			if size := m.Size(); size > 2*bound+1000 {
				t.Fatalf("after %d picks the index holds %d bytes, bound %d", i+1, size, bound)
			}
		}
		time.Sleep(time.Minute) // the interval passes (the bubble's clock)
		p.Pick(c, &Request{Prompt: chat("one more")})
		synctest.Wait()
		if size := m.Size(); size > bound {
			t.Fatalf("after the interval's eviction the index holds %d bytes, bound %d", size, bound)
		}
	})
}

// BenchmarkCacheAwarePick is a whole Pick among 8 workers for chat prompts of 1, 8 and 100 KiB:
// "followup" repeats a prompt the index knows (its blocks are touched again); "newtail" ends
// each prompt with new text, as a conversation's next turn does, so the index grows and evicts.
func BenchmarkCacheAwarePick(b *testing.B) {
	c := workers(b, 8)
	for _, size := range []int{1 << 10, 8 << 10, 100 << 10} {
		msgs := []string{"You are a careful assistant. " + strings.Repeat("Answer in plain words. ", size/4/23)}
		for n := len(msgs[0]); n < size-64; n += 400 {
			msgs = append(msgs, strings.Repeat(fmt.Sprintf("turn %d ", n), 400/12))
		}
		prompt := chat(msgs...)
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("followup/"+name, func(b *testing.B) {
			p := mustNew(b, CacheAware, Options{})
			r := &Request{Prompt: prompt}
			b.SetBytes(int64(len(prompt)))
			b.ReportAllocs()
			for b.Loop() {
				p.Pick(c, r)
			}
		})
		for _, scope := range []string{"", "fleet/"} {
			o := Options{CacheAware: CacheAwareConfig{MaxTreeSize: 8 << 20}}
			if scope != "" {
				o.Routes = discard{}
			}
			b.Run(scope+"newtail/"+name, func(b *testing.B) {
				p := mustNew(b, CacheAware, o)
				head := prompt[:len(prompt)-3] // open inside the last message's content
				buf := make([]byte, 0, len(prompt)+32)
				r := &Request{}
				b.SetBytes(int64(len(prompt)))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					buf = append(strconv.AppendInt(append(append(buf[:0], head...), " new "...), int64(i), 10), `"}]`...)
					r.Prompt = buf
					p.Pick(c, r)
				}
			})
		}
	}
}

// discard is a Routes that keeps nothing: the cost of telling it, without its own.
type discard struct{}

func (discard) Routed(*pool.Worker, []byte, []prefixindex.BlockUse) {}

// heard is a Routes that keeps what it hears.
type heard struct {
	calls  int
	blocks int
	last   *pool.Worker
}

func (h *heard) Routed(w *pool.Worker, _ []byte, uses []prefixindex.BlockUse) {
	h.calls++
	h.blocks += len(uses)
	h.last = w
}

// TestCacheAwareRoutes checks that Routes hears a choice's new blocks only: a follow-up turn
// tells the new tail, the same text again within RefreshAfter tells nothing.
func TestCacheAwareRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := workers(t, 3)
		h := &heard{}
		p := mustNew(t, CacheAware, Options{Load: loads{}, Routes: h})
		sys := strings.Repeat("Follow the rules. ", 40)
		first := chat(sys, "hello")
		w := p.Pick(c, &Request{Prompt: first})
		var b prefixindex.Blocks
		b.SetPrompt(first)
		if h.calls != 1 || h.blocks != len(b.Hashes) || h.last != w {
			t.Fatalf("first turn: heard %d calls, %d blocks, worker %v; want 1, %d, %s", h.calls, h.blocks, h.last, len(b.Hashes), w.ID)
		}
		p.Pick(c, &Request{Prompt: first})
		if h.calls != 1 {
			t.Errorf("the same text again within RefreshAfter was heard")
		}
		second := chat(sys, "hello", "answer", strings.Repeat("more words ", 20))
		var b2 prefixindex.Blocks
		b2.SetPrompt(second)
		if p.Pick(c, &Request{Prompt: second}) != w || h.calls != 2 {
			t.Fatalf("second turn: not routed home or not heard (%d calls)", h.calls)
		}
		// The first turn's last, partial block is not a prefix of the second's.
		if got, want := h.blocks-len(b.Hashes), len(b2.Hashes)-(len(b.Hashes)-1); got != want {
			t.Errorf("second turn told %d blocks, want its %d new ones", got, want)
		}
		time.Sleep(2 * RefreshAfter)
		p.Pick(c, &Request{Prompt: second})
		if h.calls != 3 || h.blocks-len(b.Hashes) != len(b2.Hashes)-(len(b.Hashes)-1)+len(b2.Hashes) {
			t.Errorf("after RefreshAfter the whole text should be told again: %d calls, %d blocks", h.calls, h.blocks)
		}
	})
}

func TestCacheAwareChooseCost(t *testing.T) {
	type m = prefixindex.Match
	var text prefixindex.Blocks
	text.SetText([]byte(strings.Repeat("x", 1000)))
	ids := []prefixindex.Worker{11, 22, 33}
	// The hash order of ids for this text, to name the winner of a full tie.
	byScore := slices.Clone(ids)
	slices.SortFunc(byScore, func(a, b prefixindex.Worker) int {
		sa, sb := worker.Mix(text.Hashes[0]^uint64(a)), worker.Mix(text.Hashes[0]^uint64(b))
		if sa > sb {
			return -1
		}
		return 1
	})
	first := slices.Index(ids, byScore[0])
	type test = struct {
		name     string
		loadCost float64
		matches  []m
		loads    []int64
		want     int
		slack    int64
	}
	tests := []test{
		{"idle: the longest match", 100, []m{{Len: 200}, {Len: 900}, {Len: 500}}, []int64{0, 0, 0}, 1, 0},
		{"the match outweighs a little load", 100, []m{{Len: 900}, {}, {}}, []int64{8, 0, 0}, 0, 0},
		{"load outweighs the match", 100, []m{{Len: 900}, {}, {}}, []int64{10, 0, 1}, 1, 0},
		{"the least cost among partial matches", 100, []m{{Len: 900}, {Len: 600}, {Len: 300}}, []int64{6, 2, 0}, 1, 0},
		{"equal cost: the longer match", 100, []m{{}, {Len: 900}, {Len: 100}}, []int64{0, 9, 1}, 1, 0},
		{"equal cost and match: the lower load", 100, []m{{Len: 500}, {Len: 500}, {Len: 500}}, []int64{3, 1, 2}, 1, 0},
		{"load cost 0: load only breaks ties", 0, []m{{Len: 900}, {Len: 899}}, []int64{1000, 0}, 0, 0},
		{"load cost 0, equal matches: the lower load", 0, []m{{Len: 500}, {Len: 500}}, []int64{7, 6}, 1, 0},
		{"full tie: the text's rendezvous winner, not the first", 100, []m{{}, {}, {}}, []int64{0, 0, 0}, first, 0},
		{"full tie at a load and a match", 100, []m{{Len: 64}, {Len: 64}, {Len: 64}}, []int64{4, 4, 4}, first, 0},
	}
	// Equal cost, match and load: the entry holding the least text, though the hash favours
	// another.
	held := make([]m, 3)
	held[first].Held, held[(first+1)%3].Held, held[(first+2)%3].Held = 300, 100, 200
	tests = append(tests, test{"equal cost, match and load: the least text held", 100, held, []int64{1, 1, 1}, (first + 1) % 3, 0})
	// The slack: load up to slack requests above the least loaded candidate's costs nothing.
	tests = append(tests,
		test{"within the slack, the match stays", 100, []m{{Len: 900}, {Len: 750}, {}}, []int64{5, 3, 3}, 0, 2},
		test{"the same without the slack moves", 100, []m{{Len: 900}, {Len: 750}, {}}, []int64{5, 3, 3}, 1, 0},
		test{"without the slack, the load moves it", 100, []m{{Len: 900}, {Len: 700}, {}}, []int64{6, 3, 3}, 1, 0},
		test{"past the slack, load counts from the slack's end", 100, []m{{Len: 900}, {Len: 700}, {}}, []int64{6, 3, 3}, 0, 2},
		test{"past the slack and the match's worth, it moves", 100, []m{{Len: 900}, {Len: 700}, {}}, []int64{8, 3, 3}, 1, 2},
		test{"equal matches within the slack: still the lower load", 100, []m{{Len: 500}, {Len: 500}, {Len: 500}}, []int64{5, 4, 6}, 1, 2},
		test{"equal matches, loads past the slack: the least cost", 100, []m{{Len: 500}, {Len: 500}, {Len: 500}}, []int64{9, 4, 6}, 1, 2},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := chooseCost(tt.loadCost, tt.slack, &text, ids, tt.matches, tt.loads); got != tt.want {
				t.Errorf("chooseCost = %d, want %d", got, tt.want)
			}
		})
	}
	t.Run("one candidate", func(t *testing.T) {
		if got := chooseCost(100, 2, &text, ids[:1], []m{{}}, []int64{99}); got != 0 {
			t.Errorf("chooseCost = %d, want 0", got)
		}
	})
	t.Run("empty text", func(t *testing.T) {
		var empty prefixindex.Blocks
		empty.SetText(nil)
		if got := chooseCost(100, 2, &empty, ids, []m{{}, {}, {}}, []int64{2, 1, 3}); got != 1 {
			t.Errorf("chooseCost = %d, want the least loaded, 1", got)
		}
	})
}

// TestCacheAwareCostTiesAgreeAndSpread: on an idle fleet, a new text goes to the same worker
// whatever the order of the candidates (gateways that see it at once agree), and new texts
// spread over the workers rather than all going to the first.
func TestCacheAwareCostTiesAgreeAndSpread(t *testing.T) {
	c := workers(t, 8)
	reversed := slices.Clone(c)
	slices.Reverse(reversed)
	count := map[*pool.Worker]int{}
	for i := range 64 {
		prompt := chat(fmt.Sprintf("System prompt %d. ", i)+strings.Repeat("Follow the rules. ", 20), "hello")
		a := mustNew(t, CacheAware, Options{Load: loads{}}).Pick(c, &Request{Prompt: prompt})
		b := mustNew(t, CacheAware, Options{Load: loads{}}).Pick(reversed, &Request{Prompt: prompt})
		if a != b {
			t.Fatalf("text %d: %s in one order, %s in the other", i, a.ID, b.ID)
		}
		count[a]++
	}
	if len(count) < 6 {
		t.Errorf("64 new texts went to %d of 8 workers, want them spread", len(count))
	}
}

// TestCacheAwareCostSpillsAPopularPrefix: the sessions of one system prompt stay on its worker
// while its load, beyond the slack, costs less than the text the others lack, then spill to
// the least loaded.
func TestCacheAwareCostSpillsAPopularPrefix(t *testing.T) {
	for _, tt := range []struct {
		slack        int64
		atLeast, max int64
	}{{-1, 6, 8}, {0, 8, 10}, {5, 11, 13}} { // 0: the default slack, 2
		t.Run(fmt.Sprint("slack ", tt.slack), func(t *testing.T) {
			c := workers(t, 4)
			l := loads{}
			p := mustNew(t, CacheAware, Options{Load: l, CacheAware: CacheAwareConfig{LoadCost: 512, LoadSlack: tt.slack}})
			sys := strings.Repeat("Follow the rules. ", 200) // 3,600 bytes: about 7 requests' worth
			home := p.Pick(c, &Request{Prompt: chat(sys, "session 0")})
			l[home]++
			for i := 1; ; i++ {
				w := p.Pick(c, &Request{Prompt: chat(sys, fmt.Sprintf("session %d", i))})
				if w != home {
					if n := l[home]; n < tt.atLeast || n > tt.max {
						t.Fatalf("spilled with %d in flight at home, want %d-%d", n, tt.atLeast, tt.max)
					}
					return
				}
				l[home]++
			}
		})
	}
}

// TestCacheAwareShortTextsSpread: texts shorter than one block are indexed too (their partial
// block), so on an idle fleet distinct short texts spread over the workers under both rules,
// rather than all going to the one worker a fixed tie-break names.
func TestCacheAwareShortTextsSpread(t *testing.T) {
	for _, rule := range CacheRules() {
		t.Run(rule, func(t *testing.T) {
			c := workers(t, 4)
			p := mustNew(t, CacheAware, Options{Load: loads{}, CacheAware: CacheAwareConfig{Rule: rule}})
			count := map[*pool.Worker]int{}
			for i := range 64 {
				count[p.Pick(c, &Request{Prompt: chat(fmt.Sprintf("hi %d", i))})]++
			}
			for _, w := range c {
				if count[w] < 4 {
					t.Errorf("64 short texts on an idle fleet: %v; want each of 4 workers to take some", count)
					break
				}
			}
		})
	}
}
