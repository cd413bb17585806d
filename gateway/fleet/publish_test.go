package fleet

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The last error a bulletin carries is cut to maxLastError bytes without splitting a character:
// a worker's error message in any language stays valid text.
func TestTruncateKeepsCharactersWhole(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int // bytes kept
	}{
		{"short", 5},
		{strings.Repeat("a", 300), maxLastError},
		{strings.Repeat("é", 150), maxLastError},           // 2-byte runes: 100 fit exactly
		{"a" + strings.Repeat("é", 150), maxLastError - 1}, // the 100th é would straddle the cut
		{"ab" + strings.Repeat("日", 100), maxLastError},    // 3-byte runes: 66 fit after "ab"
		{"a" + strings.Repeat("日", 100), maxLastError - 1}, // the 67th would straddle the cut
		{strings.Repeat("\xff", 300), maxLastError},        // invalid already: cut as bytes
	} {
		got := truncate(tt.in, maxLastError)
		if len(got) != tt.want || !strings.HasPrefix(tt.in, got) || (utf8.ValidString(tt.in) && !utf8.ValidString(got)) {
			t.Errorf("truncate(%q...) = %d bytes, valid %v; want %d", tt.in[:min(len(tt.in), 8)], len(got), utf8.ValidString(got), tt.want)
		}
	}
}
