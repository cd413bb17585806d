package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestNumbersAreFiniteAndDecimal: every number flag takes what SMG's (Rust's) parsers take:
// a float flag refuses NaN and the infinities, and a whole-number flag refuses Go's 0x, 0o, 0b,
// leading-zero octal and _ forms, on the command line and through its variable, each with one
// line naming the flag.
func TestNumbersAreFiniteAndDecimal(t *testing.T) {
	var o options
	var floats, ints []string
	newFlagSet(o.groups()).VisitAll(func(f *pflag.Flag) {
		switch f.Value.Type() {
		case "float64", "float32":
			floats = append(floats, f.Name)
		case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
			ints = append(ints, f.Name)
		}
	})
	if len(floats) < 6 || len(ints) < 30 {
		t.Fatalf("found %d float and %d whole-number flags", len(floats), len(ints))
	}
	refuse := func(t *testing.T, name, value, want string) {
		t.Helper()
		wantErr := "--" + name + " " + `"` + value + `" ` + want
		if _, err := parse([]string{"--" + name, value}, nil); err == nil || err.Error() != wantErr {
			t.Errorf("error %v, want %s", err, wantErr)
		}
		if _, err := parse(nil, map[string]string{envName(name): value}); err == nil || err.Error() != "$"+envName(name)+": "+wantErr {
			t.Errorf("from its variable: error %v, want $%s: %s", err, envName(name), wantErr)
		}
	}
	for _, name := range floats {
		t.Run(name, func(t *testing.T) {
			for _, v := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "infinity", "-infinity"} {
				refuse(t, name, v, "is not a finite number")
			}
			for _, v := range []string{"0x1p-2", "1_0.5"} {
				refuse(t, name, v, "is not a number in decimal (0x and _ are not taken)")
			}
		})
	}
	for _, name := range ints {
		t.Run(name, func(t *testing.T) {
			for _, v := range []string{"0x10", "0X10", "0o17", "0b1", "1_000"} {
				refuse(t, name, v, "is not a whole number in decimal (0x, 0o, 0b and _ are not taken)")
			}
		})
	}
	// Leading zeros are decimal, as SMG reads them: 010 is ten, not eight.
	tests := []struct {
		args []string
		got  func(o *options) int64
		want int64
	}{
		{[]string{"--max-tree-size", "010"}, func(o *options) int64 { return o.cache.maxTreeSize }, 10},
		{[]string{"--balance-abs-threshold", "010"}, func(o *options) int64 { return int64(o.cache.absThreshold) }, 10},
		{[]string{"--eviction-interval-secs", "010"}, func(o *options) int64 { return int64(o.cache.evictionSecs) }, 10},
		{[]string{"--port", "+08080"}, func(o *options) int64 { return int64(o.gw.port) }, 8080},
	}
	for _, tt := range tests {
		o, err := parse(tt.args, nil)
		if err != nil {
			t.Errorf("%s: %v", strings.Join(tt.args, " "), err)
		} else if got := tt.got(o); got != tt.want {
			t.Errorf("%s gives %d, want %d", strings.Join(tt.args, " "), got, tt.want)
		}
	}
}
