package wan

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newNet makes a WAN for one test, or skips the test with the reason it cannot be made here.
func newNet(t *testing.T, regions []string, delay time.Duration) *Net {
	t.Helper()
	if ok, why := Usable(); !ok {
		t.Skip("no simulated WAN here: " + why)
	}
	n, err := New(Config{Prefix: "mgwt" + strconv.Itoa(os.Getpid()), Regions: regions, Hosts: 4, Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// echo serves a line-echo on ln until the test ends, then closes it and every connection.
func echo(t *testing.T, ln net.Listener) {
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// roundTrip dials addr from region r and times one line's echo (the connection's handshake
// is not counted).
func roundTrip(t *testing.T, n *Net, r int, addr string) (time.Duration, error) {
	t.Helper()
	return roundTripWithin(t, n, r, addr, 2*time.Second)
}

func roundTripWithin(t *testing.T, n *Net, r int, addr string, limit time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c, err := n.DialContext(r)(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(limit))
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "ping\n" {
		t.Fatalf("echo answered %q", line)
	}
	return time.Since(start), nil
}

func TestDelayBetweenRegionsNotWithin(t *testing.T) {
	const delay = 25 * time.Millisecond
	n := newNet(t, []string{"eu", "us", "ap"}, delay)
	ln, err := n.Listen(1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	echo(t, ln)
	addr := ln.Addr().String()

	within, err := roundTrip(t, n, 1, addr)
	if err != nil {
		t.Fatal(err)
	}
	if within >= delay {
		t.Errorf("a round trip within region us took %s; want well under the %s of a link", within, delay)
	}
	for _, from := range []int{0, 2} {
		rtt, err := roundTrip(t, n, from, addr)
		if err != nil {
			t.Fatal(err)
		}
		// The relay never delivers early; the upper bound only catches a relay gone wrong.
		if rtt < 2*delay || rtt > 2*delay+500*time.Millisecond {
			t.Errorf("a round trip from %s to us took %s; want 2 × %s and a little", n.cfg.Regions[from], rtt, delay)
		}
	}

	n.SetDelay(0, 1, 60*time.Millisecond) // eu → us only
	rtt, err := roundTrip(t, n, 0, addr)
	if err != nil {
		t.Fatal(err)
	}
	if rtt < 60*time.Millisecond+delay {
		t.Errorf("after SetDelay(eu, us, 60ms) a round trip eu-us took %s; want ≥ 85ms", rtt)
	}
	if fwd, _ := n.Stats(); fwd == 0 {
		t.Error("Stats counts no packet forwarded")
	}
}

func TestCutAndHeal(t *testing.T) {
	n := newNet(t, []string{"eu", "us"}, 5*time.Millisecond)
	ln, err := n.Listen(1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	echo(t, ln)
	addr := ln.Addr().String()

	n.Cut(1)
	if _, err := roundTripWithin(t, n, 0, addr, 300*time.Millisecond); err == nil {
		t.Fatal("a cut region answered a client of another region")
	}
	if _, err := roundTrip(t, n, 1, addr); err != nil {
		t.Fatalf("a cut region's own clients lost it: %v", err)
	}
	_, dropped := n.Stats()
	if dropped == 0 {
		t.Error("Stats counts no packet dropped while the region was cut")
	}
	n.Heal(1)
	if _, err := roundTrip(t, n, 0, addr); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

func TestUDPCrossesWithTheDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	n := newNet(t, []string{"eu", "us"}, delay)
	var pc net.PacketConn
	if err := inNamespace(n.Namespace(1), func() (err error) {
		pc, err = net.ListenPacket("udp", net.JoinHostPort(n.Addr(1, 0), "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, err := n.DialContext(0)(context.Background(), "udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte("gossip")); err != nil {
		t.Fatal(err)
	}
	_ = pc.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	k, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); string(buf[:k]) != "gossip" || got < delay {
		t.Errorf("UDP datagram %q arrived after %s; want %q after ≥ %s", buf[:k], got, "gossip", delay)
	}
}

func TestConfigRefused(t *testing.T) {
	if ok, why := Usable(); !ok {
		t.Skip(why)
	}
	for _, cfg := range []Config{
		{Regions: []string{"a", "b"}},
		{Prefix: "x", Regions: []string{"a"}},
		{Prefix: "x", Regions: []string{"a", "b"}, Hosts: 201},
		{Prefix: "x", Regions: []string{"a", "b"}, Delay: -time.Second},
	} {
		if n, err := New(cfg); err == nil {
			n.Close()
			t.Errorf("New(%+v) made a WAN; want an error", cfg)
		}
	}
}

// DialByAddress dials a WAN address from its own region and leaves other addresses alone.
func TestRegionOfAddr(t *testing.T) {
	n := &Net{cfg: Config{Regions: []string{"eu", "us", "ap"}}}
	for _, c := range []struct {
		addr   string
		region int
		ok     bool
	}{
		{"10.78.1.1:80", 0, true}, {"10.78.3.7:30000", 2, true},
		{"10.78.4.1:80", 0, false}, {"10.78.0.1:80", 0, false}, // no such region
		{"127.0.0.1:80", 0, false}, {"10.77.0.11:80", 0, false}, {"[::1]:80", 0, false}, {"nohost", 0, false},
	} {
		r, ok := n.regionOfAddr(c.addr)
		if ok != c.ok || (ok && r != c.region) {
			t.Errorf("regionOfAddr(%q) = %d, %v; want %d, %v", c.addr, r, ok, c.region, c.ok)
		}
	}
}
