package main

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// Number flags take what SMG's users type to SMG, whose flags Rust parses: whole numbers in
// decimal digits only, and finite numbers. pflag's own parsers take Go's literal forms (0x10,
// 0o17, 0b1, 1_000, and 010 as eight) and, for floats, NaN and the infinities, which pass or
// defeat the range checks after them. strictNumber puts a stricter parser in front of every
// number flag, so that a flag added later gets it too.

var (
	errNotDecimalInt   = errors.New("is not a whole number in decimal (0x, 0o, 0b and _ are not taken)")
	errNotDecimalFloat = errors.New("is not a number in decimal (0x and _ are not taken)")
	errNotFinite       = errors.New("is not a finite number")
)

// intBits are the sizes of pflag's whole-number types; unsigned ones start with u.
var intBits = map[string]int{
	"int": strconv.IntSize, "int8": 8, "int16": 16, "int32": 32, "int64": 64,
	"uint": strconv.IntSize, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64,
}

// strictNumber wraps a value of pflag's number types in decimalInt or finiteFloat, and returns
// any other value as it is (an alias's value is strict already: float64Value, intValue).
func strictNumber(v pflag.Value) pflag.Value {
	switch v.(type) {
	case *aliasFlag, decimalInt, finiteFloat:
		return v
	}
	if _, ok := intBits[v.Type()]; ok {
		return decimalInt{v}
	}
	if t := v.Type(); t == "float64" || t == "float32" {
		return finiteFloat{v}
	}
	return v
}

// decimalInt is a whole-number value that takes decimal digits only (a sign and leading zeros
// allowed: 010 is ten), then hands the number to pflag's value in its plain form.
type decimalInt struct{ pflag.Value }

func (d decimalInt) Set(s string) error {
	plain, err := d.parse(s, 10)
	if errors.Is(err, strconv.ErrSyntax) {
		if _, err0 := d.parse(s, 0); err0 == nil || errors.Is(err0, strconv.ErrRange) {
			return errNotDecimalInt // a form Go takes and Rust does not
		}
	}
	if err != nil {
		return err
	}
	return d.Value.Set(plain)
}

// parse reads s in base as d's type, and returns it in decimal without sign or leading zeros.
func (d decimalInt) parse(s string, base int) (string, error) {
	bits := intBits[d.Type()]
	if strings.HasPrefix(d.Type(), "u") {
		n, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), base, bits)
		return strconv.FormatUint(n, 10), err
	}
	n, err := strconv.ParseInt(s, base, bits)
	return strconv.FormatInt(n, 10), err
}

// finiteFloat is a float value that refuses NaN, the infinities, and Go's hexadecimal and
// underscored forms.
type finiteFloat struct{ pflag.Value }

func (f finiteFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return errNotFinite // beyond the largest float: ParseFloat gives an infinity
	case err != nil:
		return err
	case strings.ContainsAny(s, "xX_"):
		return errNotDecimalFloat
	case math.IsNaN(v) || math.IsInf(v, 0):
		return errNotFinite
	}
	return f.Value.Set(s)
}
