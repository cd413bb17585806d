package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
	"unicode/utf8"
)

// TestRecordFormatMatchesSlog: a record formatted by hand is byte for byte what slog's
// TextHandler and JSONHandler write for the same record, whatever the strings hold (a client
// chooses its X-Request-Id and the model name), and whatever the numbers and the time.
func TestRecordFormatMatchesSlog(t *testing.T) {
	strs := []string{"", "plain", "mgw-0123456789abcdef-42", "http://127.0.0.1:30001", "with space", "a=b",
		`q"uote`, `back\slash`, "tab\there", "nl\nhere", "cr\r", "\x00\x01\x1f\x7f", "héllo", "日本語",
		"emoji 😀", "\u2028\u2029", "invalid \xff\xfe", "\u00a0nbsp", "\u200bzero width", "<html>&amp;",
		"{\"json\":1}", "trailing\\"}
	// Every ASCII byte between two plain ones, and alone: textNeedsQuoting decides by a table of
	// them, which must agree with slog's needsQuoting byte for byte.
	for c := range byte(utf8.RuneSelf) {
		strs = append(strs, "a"+string(c)+"b", string(c))
	}
	floats := []float64{0, 0.001, 0.5, 1.234, 12.5, 999.999, 1234567.891, 1e20, 1e21, 1e-7, 3.0e-6}
	ints := []int{0, 1, 200, -1, 1 << 40}
	times := []time.Time{
		time.Date(2026, 12, 4, 20, 7, 55, 875_123_456, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 6, 30, 23, 59, 59, 999_999_999, time.FixedZone("X", -7*3600-1800)),
		time.Date(2026, 6, 30, 23, 59, 59, 100_000, time.FixedZone("Y", 5*3600)),
	}
	for _, json := range []bool{false, true} {
		name := "text"
		if json {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			for i, s := range strs {
				tm := times[i%len(times)]
				f := floats[i%len(floats)]
				n := ints[i%len(ints)]
				e := &recordEncoder{json: json}
				e.begin(tm, msgRouteCompleted)
				e.bytes("request_id", []byte(s))
				e.str("worker", s)
				e.flag("stream", i%2 == 0)
				e.num("status", n)
				e.float("duration_ms", f)
				e.end()

				var want bytes.Buffer
				var h slog.Handler = slog.NewTextHandler(&want, nil)
				if json {
					h = slog.NewJSONHandler(&want, nil)
				}
				r := slog.NewRecord(tm, slog.LevelInfo, msgRouteCompleted, 0)
				r.AddAttrs(slog.String("request_id", s), slog.String("worker", s), slog.Bool("stream", i%2 == 0),
					slog.Int("status", n), slog.Float64("duration_ms", f))
				if err := h.Handle(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				if got := string(e.b); got != want.String() {
					t.Errorf("value %q:\n got %s\nwant %s", s, got, want.String())
				}
			}
		})
	}
}

// TestRecordTimeAcrossSecondsAndZones: the time of a record is RFC 3339 with milliseconds,
// truncated as slog's TextHandler does, whether it falls in the second of the record before it
// or not, and in whatever zone its time is in.
func TestRecordTimeAcrossSecondsAndZones(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("east", 5*3600+30*60), time.FixedZone("west", -7*3600)}
	base := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	steps := []time.Duration{0, 999_999, time.Millisecond, 999 * time.Millisecond, 999_999_999, time.Second, 1500 * time.Millisecond, 36 * time.Hour}
	for _, loc := range zones {
		for _, d := range steps {
			for _, off := range []time.Duration{0, 1, 123_456_789} {
				tm := base.Add(d + off).In(loc)
				want := tm.Format("2006-01-02T15:04:05.000Z07:00")
				if got := string(appendRFC3339Millis([]byte("x"), tm)); got != "x"+want {
					t.Errorf("time %v: got %q, want %q", tm, got, "x"+want)
				}
			}
		}
	}
}
