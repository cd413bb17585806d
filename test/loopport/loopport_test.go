package loopport

import (
	"net"
	"strconv"
	"testing"
)

// Free hands out runs of ports that can be bound, never the same port twice.
func TestFree(t *testing.T) {
	seen := map[int]bool{}
	for _, n := range []int{1, 1, 5, 3} {
		base, err := Free(n)
		if err != nil {
			t.Fatal(err)
		}
		if base < Low || base+n > High {
			t.Fatalf("Free(%d) = %d, outside [%d, %d)", n, base, Low, High)
		}
		for p := base; p < base+n; p++ {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d: %v", p, err)
			}
			l.Close()
		}
	}
}
