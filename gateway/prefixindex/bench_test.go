package prefixindex

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// chatPrompt returns the raw JSON of a chat's messages holding about size bytes of text: a
// system prompt, then turns of a conversation, with a few escapes as real prompts have.
func chatPrompt(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`[{"role":"system","content":"You are a careful assistant.\nAnswer in \"plain\" words. `)
	sb.WriteString(text(11, size/4))
	sb.WriteString(`"}`)
	for turn := 0; sb.Len() < size; turn++ {
		role := "user"
		if turn%2 == 1 {
			role = "assistant"
		}
		fmt.Fprintf(&sb, `,{"role":%q,"content":"%s\n"}`, role, text(uint64(turn), 400))
	}
	sb.WriteByte(']')
	return []byte(sb.String())
}

var benchSizes = []int{1 << 10, 8 << 10, 100 << 10}

// BenchmarkRequest measures what cache_aware does per request, for prompts of 1, 8 and 100
// KiB, on a model whose index already holds 16 MiB of other text over 8 workers: the routing
// text's extraction and hashing, the lookup of 8 workers (one holds the prompt), the insert of
// the prompt (a follow-up: its blocks are known), and the three together.
func BenchmarkRequest(b *testing.B) {
	workers := []Worker{0, 1, 2, 3, 4, 5, 6, 7}
	m := New(Config{}).Model([]byte("m"))
	var fill Blocks
	for i := 0; m.Size() < 16<<20; i++ {
		fill.SetText([]byte(text(uint64(1000+i), 8<<10)))
		m.Insert(workers[i%len(workers)], &fill, t0)
	}
	out := make([]Match, len(workers))
	for _, size := range benchSizes {
		prompt := chatPrompt(size)
		var blk Blocks
		blk.SetPrompt(prompt)
		m.Insert(3, &blk, t0)
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("extract/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(prompt)))
			b.ReportAllocs()
			for b.Loop() {
				blk.SetPrompt(prompt)
			}
		})
		b.Run("lookup/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Lookup(&blk, workers, out)
			}
		})
		b.Run("insert/"+name, func(b *testing.B) {
			b.ReportAllocs()
			now := t0
			for b.Loop() {
				now = now.Add(time.Millisecond)
				m.Insert(3, &blk, now)
			}
		})
		b.Run("all/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(prompt)))
			b.ReportAllocs()
			now := t0
			for b.Loop() {
				now = now.Add(time.Millisecond)
				blk.SetPrompt(prompt)
				m.Lookup(&blk, workers, out)
				m.Insert(3, &blk, now)
			}
		})
	}
}

// BenchmarkEvict measures one eviction of a model holding twice the bound of 16 MiB.
func BenchmarkEvict(b *testing.B) {
	const bound = 16 << 20
	var blk Blocks
	for b.Loop() {
		b.StopTimer()
		x := New(Config{MaxChars: bound})
		m := x.Model(nil)
		for i := 0; m.Size() < 2*bound; i++ {
			blk.SetText([]byte(text(uint64(i), 8<<10)))
			m.Insert(Worker(i%8), &blk, t0.Add(time.Duration(i)*time.Millisecond))
		}
		b.StartTimer()
		x.Evict(t0)
	}
}

// BenchmarkMemory reports the heap an index takes per block it holds, filled with 64 MiB of
// text (1,048,576 blocks, SMG's default bound) over 8 workers.
func BenchmarkMemory(b *testing.B) {
	var blk Blocks
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := New(Config{})
		m := x.Model(nil)
		for i := 0; m.Size() < DefaultMaxChars; i++ {
			blk.SetText([]byte(text(uint64(i), 8<<10)))
			m.Insert(Worker(i%8), &blk, t0)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(m.blocks), "heap-B/block")
		runtime.KeepAlive(x)
	}
}
