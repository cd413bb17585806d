package testkit

import (
	"slices"
	"strings"
	"testing"
)

type member struct{ id, status string }

// TestMembers: Set replaces a peer of the same id and signals a watcher without blocking, even
// when it has not read the last signal; a stopped watch no longer receives.
func TestMembers(t *testing.T) {
	m := NewMembers(func(p member) string { return p.id }, member{"a", "alive"})
	ch, stop := m.Watch()
	m.Set(member{"b", "alive"})
	m.Set(member{"a", "dead"}) // the signal of the first Set is still unread
	<-ch
	got := m.Peers()
	slices.SortFunc(got, func(x, y member) int { return strings.Compare(x.id, y.id) })
	if want := []member{{"a", "dead"}, {"b", "alive"}}; !slices.Equal(got, want) {
		t.Fatalf("peers %v, want %v", got, want)
	}
	stop()
	m.Set(member{"c", "alive"})
	select {
	case <-ch:
		t.Fatal("a stopped watch received")
	default:
	}
}
