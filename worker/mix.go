package worker

// Mix is MurmurHash3's 64-bit finalizer: it spreads a hash whose inputs differ in a few bits
// (ids that differ in a character) over all 64 bits. Every gateway computes it alike, so the
// hashes built on it (the pool's, rendezvous scores, bulletin digests) agree across the mesh.
func Mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
