package fakeengine

import (
	"container/list"
	"sync"
)

// prefixCache models an engine's prefix (KV) cache the way vLLM's and SGLang's hash-based
// caches work: a prompt's text is cut into full blocks of blockChars bytes (a trailing partial
// block is never cached), each named by a hash chained over every block before it, so a block
// matches only where the whole text up to its end was seen before. It keeps at most capacity
// blocks and evicts the least recently used. It is safe for concurrent use.
type prefixCache struct {
	blockChars int
	capacity   int

	mu        sync.Mutex
	lru       list.List // of uint64 block hashes; the front is the most recently used
	index     map[uint64]*list.Element
	evictions int64
}

func newPrefixCache(capacity, blockChars int) *prefixCache {
	return &prefixCache{blockChars: blockChars, capacity: capacity, index: make(map[uint64]*list.Element)}
}

// admit looks text up and then caches it, as an engine does when it schedules a prompt: it
// returns how many bytes of text's start were cached (whole blocks, up to the first miss), then
// makes every full block of text the most recently used, the first block most of all, so that
// eviction takes a prompt's tail before its shared head. Blocks past capacity are evicted.
func (c *prefixCache) admit(text string) (cachedChars int) {
	hashes := blockHashes(text, c.blockChars)
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := 0
	for hit < len(hashes) && c.index[hashes[hit]] != nil {
		hit++
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		if el := c.index[hashes[i]]; el != nil {
			c.lru.MoveToFront(el)
			continue
		}
		c.index[hashes[i]] = c.lru.PushFront(hashes[i])
	}
	for c.lru.Len() > c.capacity {
		last := c.lru.Back()
		delete(c.index, c.lru.Remove(last).(uint64))
		c.evictions++
	}
	return hit * c.blockChars
}

// usage returns the blocks held and the evictions so far.
func (c *prefixCache) usage() (blocks int, evictions int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.evictions
}

// FNV-1a, 64 bits.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// blockHashes returns the chained hashes of text's full blocks of size bytes: block i's hash
// covers block i-1's hash and block i's bytes.
func blockHashes(text string, size int) []uint64 {
	n := len(text) / size
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	var prev uint64
	for i := range n {
		h := uint64(fnvOffset)
		for s := 0; s < 64; s += 8 {
			h = (h ^ (prev >> s & 0xff)) * fnvPrime
		}
		for _, b := range []byte(text[i*size : (i+1)*size]) {
			h = (h ^ uint64(b)) * fnvPrime
		}
		out[i], prev = h, h
	}
	return out
}
