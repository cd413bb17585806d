//go:build !race

package policy

// raceEnabled says the race detector is on: sync.Pool then drops items on purpose, so Picks
// that reuse pooled scratch allocate.
const raceEnabled = false
