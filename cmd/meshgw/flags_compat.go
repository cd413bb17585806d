package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/worker"
)

// This file takes what SMG and SGLang-Omni router users type: SMG's space-separated
// --worker-urls, the Omni router's --worker-config file, Python's log level names, and it says
// what a flag takes when a value has the wrong type.

// multiValueFlags take several values after one flag, as SMG's argparse nargs="+" does:
// `--worker-urls http://a:1 http://b:2`, `--selector app=sglang tier=gpu`.
var multiValueFlags = map[string]bool{"worker-urls": true, "selector": true, "router-selector": true}

// spreadValues rewrites the words that follow a multi-value flag's value, up to the next flag,
// into repetitions of that flag, which pflag takes. meshgw has no positional arguments, so such
// words can mean nothing else. Everything after "--" is left alone.
func spreadValues(args []string) []string {
	out := make([]string, 0, len(args))
	multi := "" // the multi-value flag whose values are being read
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case strings.HasPrefix(a, "-"):
			multi = ""
			name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			out = append(out, a)
			if strings.HasPrefix(a, "--") && multiValueFlags[name] {
				multi = name
				if !hasValue && i+1 < len(args) {
					i++
					out = append(out, args[i])
				}
			}
		case multi != "":
			out = append(out, "--"+multi+"="+a)
		default:
			out = append(out, a)
		}
	}
	return out
}

// splitURLs flattens --worker-urls: each value may hold several URLs separated by commas
// (pflag splits those) or spaces ($MESHGW_WORKER_URLS="http://a:1 http://b:2").
func splitURLs(values []string) []string {
	var out []string
	for _, v := range values {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// parseWorkerConfig reads a --worker-config file: a JSON list of worker specs, or the
// SGLang-Omni router's object {"workers": [...]} (its other keys are ignored).
func parseWorkerConfig(b []byte) ([]worker.Spec, error) {
	const want = `want a JSON list of worker specs or {"workers": [...]}`
	b = bytes.TrimSpace(b)
	var list []worker.Spec
	switch {
	case len(b) > 0 && b[0] == '[':
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("%s: %v", want, jsonMsg(err))
		}
	case len(b) > 0 && b[0] == '{':
		var obj struct {
			Workers *[]worker.Spec `json:"workers"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return nil, fmt.Errorf("%s: %v", want, jsonMsg(err))
		}
		if obj.Workers == nil {
			return nil, fmt.Errorf(`the object has no "workers" key; %s`, want)
		}
		list = *obj.Workers
	default:
		return nil, errors.New(want)
	}
	return list, nil
}

// jsonMsg says where a JSON document went wrong, without Go's type names.
func jsonMsg(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %s: a JSON %s is not allowed there", te.Field, te.Value)
		}
		return fmt.Sprintf("a JSON %s is not allowed there", te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, se)
	}
	return err.Error()
}

// logLevels maps every --log-level name meshgw takes, lower-cased, to slog's: its own, and
// Python's (warning, critical) as SMG and the Omni router users type them.
var logLevels = map[string]string{
	"debug": "debug", "info": "info", "warn": "warn", "warning": "warn", "error": "error", "critical": "error",
}

// logLevelNames lists the --log-level values for help and errors.
const logLevelNames = "debug, info, warn (or warning), error (or critical), in any case"

// valueError rewrites pflag's error for a value of the wrong type (`invalid argument "abc" for
// "--port" flag: strconv.ParseInt: ...`) as what the flag takes; other errors pass unchanged.
func valueError(err error) error {
	var ie *pflag.InvalidValueError
	if !errors.As(err, &ie) {
		return err
	}
	f := ie.GetFlag()
	for _, e := range []error{errNotDecimalInt, errNotDecimalFloat, errNotFinite} {
		if errors.Is(err, e) {
			return usagef("--%s %q %v", f.Name, ie.GetValue(), e)
		}
	}
	what := "not allowed"
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		what = "not a whole number"
		if errors.Is(err, strconv.ErrRange) {
			what = "out of range for a whole number"
		}
	case "float64", "float32":
		what = "not a number"
	case "bool":
		what = "not true or false"
	case "duration":
		what = "not a duration such as 30s or 5m"
	default:
		return usagef("--%s %q: %v", f.Name, ie.GetValue(), errors.Unwrap(err))
	}
	return usagef("--%s %q is %s", f.Name, ie.GetValue(), what)
}
