// Package prefixindex knows, per model, which prefixes of routing text each worker was sent. A
// text is cut into blocks of BlockSize bytes whose hashes are chained, so one hash stands for
// the whole prefix up to its block's end; each worker's entry is a set of such hashes with the
// time each was last used, bounded per model and evicted least recently used first. Entries
// are made to travel: Snapshot and Apply move a worker's entry, or a part of it, between
// indexes, and merging keeps the latest use of each block.
package prefixindex

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// BlockSize is how many bytes of routing text one block covers. 64 bytes is about 16 tokens of
// English text (about 4 bytes a token), the size of a vLLM KV block and within the range of
// SGLang's page sizes, so a block stands for roughly what an engine caches as one unit. Smaller
// blocks would cost more hashes and index entries per request for a finer match that the
// engine's own block granularity does not reward; larger ones would drop more of each match.
const BlockSize = 64

// lenBits are the low bits of a block's hash that hold its length: 0 for a whole block, 1 to
// BlockSize-1 for the partial block that ends a text. The remaining 58 bits are the hash.
const lenBits = BlockSize - 1

// chainSeed is the chain's value before the first block. Changing it, the block size or the hash
// makes every index entry unmatchable, as a new format should.
const chainSeed = 0x6d65736867773031 // "meshgw01"

// Blocks is a routing text cut into blocks with chained hashes. The zero value is an empty
// text; a Blocks is reused across texts (Reset, SetPrompt, SetText) without allocating once its
// Hashes slice has grown to the longest text seen.
type Blocks struct {
	// Hashes holds one hash per block in order: one per whole block, then one for the partial
	// last block when the text's length is not a multiple of BlockSize. Block i's hash covers
	// the text's bytes 0 to the end of block i, so two texts share the hash of block i exactly
	// when their first bytes up to there are equal. The low 6 bits hold the block's length
	// (0 meaning BlockSize).
	Hashes []uint64
	// Len is the text's length in bytes.
	Len int

	buf [8 + BlockSize]byte // the previous block's hash, then the block being filled
	n   int                 // bytes in the block being filled
}

// Reset makes b the empty text, keeping its storage.
func (b *Blocks) Reset() {
	b.Hashes = b.Hashes[:0]
	b.Len, b.n = 0, 0
	binary.LittleEndian.PutUint64(b.buf[:8], chainSeed)
}

// SetText makes b the blocks of text.
func (b *Blocks) SetText(text []byte) {
	b.Reset()
	b.add(text)
	b.finish()
}

// SetPrompt makes b the blocks of the routing text of prompt, the raw JSON of a request's
// prompt field (see AppendText).
func (b *Blocks) SetPrompt(prompt []byte) {
	b.Reset()
	extract(prompt, b)
	b.finish()
}

// MatchedLen is the length of the text's prefix that its first k blocks cover.
func (b *Blocks) MatchedLen(k int) int {
	return min(k*BlockSize, b.Len)
}

// BlockLen is the number of text bytes the block with hash h covers.
func BlockLen(h uint64) int {
	if n := int(h & lenBits); n != 0 {
		return n
	}
	return BlockSize
}

func (b *Blocks) add(p []byte) {
	b.Len += len(p)
	for len(p) > 0 {
		c := copy(b.buf[8+b.n:], p)
		b.n += c
		p = p[c:]
		if b.n == BlockSize {
			b.seal()
		}
	}
}

func (b *Blocks) addByte(c byte) {
	b.Len++
	b.buf[8+b.n] = c
	b.n++
	if b.n == BlockSize {
		b.seal()
	}
}

// seal hashes the block being filled, chained to the previous one, and starts the next.
func (b *Blocks) seal() {
	h := xxhash.Sum64(b.buf[:8+b.n])&^lenBits | uint64(b.n&lenBits)
	b.Hashes = append(b.Hashes, h)
	binary.LittleEndian.PutUint64(b.buf[:8], h)
	b.n = 0
}

// finish hashes the partial last block, if any.
func (b *Blocks) finish() {
	if b.n > 0 {
		b.seal()
	}
}
