package mesh

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	meshv1 "github.com/meshgw/meshgw/api/mesh/v1"
)

// fullMeta is metadata with every field set to a realistic value.
func fullMeta() Meta {
	return Meta{NodeID: "gw-eu-1", Version: "v0.6.0", Region: "eu-west-1", Color: "green",
		HTTPAddr: "10.0.12.34:30000", RPCAddr: "10.0.12.34:39529", RaftAddr: "10.0.12.34:39528",
		ClusterID: "5f0c6c1e-3f3b-4b8e-9d2a-8f1f2e3d4c5b", AppliedIndex: 123456789, OwnedWorkers: 250,
		Incarnation: "9f86d081884c7d65", Rejoining: true, Started: time.Date(2026, 5, 4, 3, 2, 1, 123456789, time.UTC),
		RaftHello: true}
}

func TestMetaRoundTrip(t *testing.T) {
	for name, m := range map[string]Meta{
		"minimal": {NodeID: "n1"},
		"full":    fullMeta(),
		"leaving": func() Meta { m := fullMeta(); m.Leaving = true; return m }(),
	} {
		t.Run(name, func(t *testing.T) {
			b, err := EncodeMeta(m)
			if err != nil {
				t.Fatal(err)
			}
			if b[0] != metaVersion {
				t.Errorf("version byte %d", b[0])
			}
			got, err := DecodeMeta(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(m, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	b, _ := EncodeMeta(fullMeta())
	t.Logf("full metadata: %d bytes of %d", len(b), MetaMaxSize)
	if len(b) > 200 {
		t.Errorf("full metadata takes %d bytes; expected well under 200", len(b))
	}
}

func TestEncodeMetaSizeLimit(t *testing.T) {
	m := fullMeta()
	m.Region, m.Color = strings.Repeat("r", 200), strings.Repeat("c", 200)
	_, err := EncodeMeta(m)
	if !errors.Is(err, ErrMetaTooLarge) || !strings.Contains(err.Error(), "512") {
		t.Fatalf("oversized metadata: %v, want ErrMetaTooLarge naming the limit", err)
	}
	// Exactly at the limit with room kept for Leaving: accepted, and Leaving still fits.
	m = Meta{NodeID: "n"}
	base, _ := EncodeMeta(m)
	m.Version = strings.Repeat("v", 200)
	m.Region = strings.Repeat("r", 200)
	one, _ := EncodeMeta(Meta{NodeID: "n", Version: m.Version, Region: m.Region})
	m.Color = strings.Repeat("c", MetaMaxSize-leavingSize-len(one)-2) // a tag and a one-byte length
	b, err := EncodeMeta(m)
	if err != nil {
		t.Fatalf("metadata at the limit: %v (base %d bytes)", err, len(base))
	}
	if len(b) != MetaMaxSize-leavingSize {
		t.Fatalf("at the limit: %d bytes, want %d", len(b), MetaMaxSize-leavingSize)
	}
	m.Leaving = true
	if b, err = EncodeMeta(m); err != nil || len(b) != MetaMaxSize {
		t.Fatalf("leaving at the limit: %d bytes, %v", len(b), err)
	}
	m.Leaving = false
	m.Color += "c"
	if _, err := EncodeMeta(m); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("one byte over: %v", err)
	}
}

func TestEncodeMetaRefuses(t *testing.T) {
	for name, m := range map[string]Meta{
		"no node id":   {},
		"long field":   {NodeID: "n", RaftAddr: strings.Repeat("a", maxMetaString+1)},
		"invalid utf8": {NodeID: "n", Color: "\xff"},
	} {
		if _, err := EncodeMeta(m); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestDecodeMetaRejects(t *testing.T) {
	valid, _ := EncodeMeta(fullMeta())
	raw := func(pb *meshv1.NodeMeta) []byte {
		b, err := proto.Marshal(pb)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte{metaVersion}, b...)
	}
	for name, b := range map[string][]byte{
		"empty":           nil,
		"too long":        append(append([]byte{}, valid...), make([]byte, MetaMaxSize)...),
		"version 0":       append([]byte{0}, valid[1:]...),
		"version 2":       append([]byte{2}, valid[1:]...),
		"truncated":       valid[:len(valid)-5], // inside the incarnation string
		"garbage":         {metaVersion, 0xff, 0xff, 0xff},
		"no node id":      raw(&meshv1.NodeMeta{Region: "eu"}),
		"long string":     raw(&meshv1.NodeMeta{NodeId: "n", Region: strings.Repeat("r", maxMetaString+1)}),
		"length past end": {metaVersion, 0x0a, 0x7f, 'n'},
	} {
		if _, err := DecodeMeta(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	// Fields a later version adds are skipped.
	withUnknown := append(append([]byte{}, valid...), 0xf8, 0x01, 0x05) // field 31, varint 5
	if got, err := DecodeMeta(withUnknown); err != nil || got != fullMeta() {
		t.Errorf("unknown field: %+v, %v", got, err)
	}
}

// FuzzDecodeMeta: decoding never panics, and what decodes encodes back to the same metadata.
func FuzzDecodeMeta(f *testing.F) {
	valid, _ := EncodeMeta(fullMeta())
	f.Add(valid)
	f.Add([]byte{})
	f.Add([]byte{metaVersion})
	f.Add([]byte{metaVersion, 0x0a, 0x01, 'n'})
	f.Add([]byte{2, 0x0a, 0x01, 'n'})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			return
		}
		if len(b) > MetaMaxSize {
			t.Fatalf("decoded %d bytes", len(b))
		}
		again, err := EncodeMeta(m)
		if err != nil {
			// A peer's metadata may use the last two bytes Leaving needs; it still decodes.
			if m.Leaving || !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("decoded %+v does not encode: %v", m, err)
			}
			return
		}
		back, err := DecodeMeta(again)
		if err != nil || back != m {
			t.Fatalf("round trip: %+v -> %+v, %v", m, back, err)
		}
	})
}

// TestSpeaksRaftHello: a raft connection carries the hello unless the member of this cluster
// listed at its address is of a build without it; a live member speaks for the address before
// dead ones, and a foreign one never holds the hello back.
func TestSpeaksRaftHello(t *testing.T) {
	const addr = "10.0.0.7:39528"
	member := func(id string, st Status, raftAddr string, hello bool) Member {
		return Member{ID: id, Status: st, Meta: Meta{NodeID: id, RaftAddr: raftAddr, RaftHello: hello}}
	}
	tests := []struct {
		name    string
		members []Member
		want    bool
	}{
		{"no member listed", nil, true},
		{"members elsewhere only", []Member{member("a", StatusAlive, "10.0.0.8:39528", false)}, true},
		{"live member with it", []Member{member("a", StatusAlive, addr, true)}, true},
		{"live member without it", []Member{member("a", StatusAlive, addr, false)}, false},
		{"suspect member without it", []Member{member("a", StatusSuspect, addr, false)}, false},
		{"dead member with it", []Member{member("a", StatusDead, addr, true)}, true},
		{"dead member without it", []Member{member("a", StatusDead, addr, false)}, false},
		{"left member without it", []Member{member("a", StatusLeft, addr, false)}, false},
		{"live member with it over a dead one without", []Member{member("a", StatusDead, addr, false), member("b", StatusAlive, addr, true)}, true},
		{"live member without it over a dead one with", []Member{member("a", StatusDead, addr, true), member("b", StatusAlive, addr, false)}, false},
		{"two live members that disagree", []Member{member("a", StatusAlive, addr, true), member("b", StatusAlive, addr, false)}, false},
		{"foreign member without it", []Member{member("a", StatusForeign, addr, false)}, true},
		{"foreign member without it over a dead one with", []Member{member("a", StatusDead, addr, true), member("b", StatusForeign, addr, false)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SpeaksRaftHello(tt.members, addr); got != tt.want {
				t.Errorf("SpeaksRaftHello = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPeersCluster: a node that knows no cluster id of its own is joining the one its live
// peers agree on.
func TestPeersCluster(t *testing.T) {
	member := func(id string, st Status, cluster string) Member {
		return Member{ID: id, Status: st, Meta: Meta{NodeID: id, ClusterID: cluster}}
	}
	tests := []struct {
		name    string
		members []Member
		want    string
	}{
		{"alone", []Member{member("me", StatusAlive, "")}, ""},
		{"peers without one", []Member{member("me", StatusAlive, ""), member("a", StatusAlive, "")}, ""},
		{"live peers agree", []Member{member("a", StatusAlive, "B"), member("b", StatusSuspect, "B"), member("c", StatusAlive, "")}, "B"},
		{"live peers disagree", []Member{member("a", StatusAlive, "A"), member("b", StatusAlive, "B")}, ""},
		{"dead and foreign peers do not count", []Member{member("a", StatusDead, "A"), member("b", StatusForeign, "C"), member("c", StatusAlive, "B")}, "B"},
		{"its own entry does not count", []Member{member("me", StatusAlive, "A")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PeersCluster(tt.members, "me"); got != tt.want {
				t.Errorf("PeersCluster = %q, want %q", got, tt.want)
			}
		})
	}
}
