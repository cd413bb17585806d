package breaker

// Tally keeps one request's promise to its workers' breakers: at most one recorded outcome per
// worker per request, however many attempts went to that worker. A retried request that failed
// twice on the same worker is one failed request, not two.
//
// Use one Tally per client request, as a local variable (the zero value is ready), and record
// every attempt through it. It allocates nothing until a request has touched more than two
// workers. A Tally is not safe for concurrent use; a request's attempts are sequential.
type Tally struct {
	inline [2]*Breaker
	more   []*Breaker
	n      int
}

// Record records o on b unless b already has an outcome from this request, and reports whether
// it recorded. Ignored is never recorded and does not use up the worker's one outcome, so a
// 429 followed by a 503 from the same worker counts one failure.
func (t *Tally) Record(b *Breaker, o Outcome) bool {
	if o == Ignored || b == nil || t.seen(b) {
		return false
	}
	if t.n < len(t.inline) {
		t.inline[t.n] = b
	} else {
		t.more = append(t.more, b)
	}
	t.n++
	b.Record(o)
	return true
}

func (t *Tally) seen(b *Breaker) bool {
	for i := 0; i < t.n && i < len(t.inline); i++ {
		if t.inline[i] == b {
			return true
		}
	}
	for _, x := range t.more {
		if x == b {
			return true
		}
	}
	return false
}
