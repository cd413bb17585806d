package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// locate finds in data, a JSON body that does not decode into a value of type t, the first value
// (in the body's order, as encoding/json reports it) whose type does not fit, or the first key t
// has no field for, and refuses it naming its JSON path: "priority", "health.timeout_secs",
// "labels.a", "models[1]". encoding/json names neither a map's key nor a list's index, and puts
// an embedded struct's Go name in front ("Spec.url"), so this walks the body with the type
// itself. It returns nil when it finds nothing, the body not being JSON, or the whole body being
// of the wrong type; the caller then keeps the decoder's error.
func locate(data []byte, t reflect.Type) *apiError {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	w := pathWalker{d: d}
	tok, err := d.Token()
	if err != nil {
		return nil
	}
	return w.value(tok, t, "")
}

// pathWalker reads a JSON body token by token alongside the type it should decode into.
type pathWalker struct{ d *json.Decoder }

// value checks the value that starts with tok, at path, against t.
func (w pathWalker) value(tok json.Token, t reflect.Type, path string) *apiError {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface || tok == nil { // anything fits any; null fits everything
		return w.skip(tok)
	}
	got := ""
	switch v := tok.(type) {
	case json.Delim:
		switch {
		case v == '{' && t.Kind() == reflect.Struct:
			return w.object(t, path)
		case v == '{' && t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
			return w.object(t, path)
		case v == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			return w.list(t, path)
		case v == '{':
			got = "object"
		default:
			got = "array"
		}
	case string:
		if t.Kind() == reflect.String {
			return nil
		}
		got = "string"
	case bool:
		if t.Kind() == reflect.Bool {
			return nil
		}
		got = "bool"
	case json.Number:
		if fitsNumber(v, t) {
			return nil
		}
		got = "number"
		if isNumber(t) { // a number, but not one t holds: a fraction, or out of its range
			got += " " + string(v)
		}
	}
	if path == "" {
		return nil
	}
	return errorf(400, codeInvalidField, fmt.Sprintf("%s: must be %s, not %s", path, jsonType(t), got))
}

// object checks the members of an object, its '{' read, against struct or map type t.
func (w pathWalker) object(t reflect.Type, path string) *apiError {
	for w.d.More() {
		tok, err := w.d.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		at := key
		if path != "" {
			at = path + "." + key
		}
		ft := t
		if t.Kind() == reflect.Struct {
			var ok bool
			if ft, ok = fieldType(t, key); !ok {
				return errorf(400, codeUnknownField, fmt.Sprintf("unknown field %q", at))
			}
		} else {
			ft = t.Elem()
		}
		if tok, err = w.d.Token(); err != nil {
			return nil
		}
		if e := w.value(tok, ft, at); e != nil {
			return e
		}
	}
	_, _ = w.d.Token() // '}'
	return nil
}

// list checks the items of a list, its '[' read, against slice or array type t.
func (w pathWalker) list(t reflect.Type, path string) *apiError {
	for i := 0; w.d.More(); i++ {
		tok, err := w.d.Token()
		if err != nil {
			return nil
		}
		if e := w.value(tok, t.Elem(), path+"["+strconv.Itoa(i)+"]"); e != nil {
			return e
		}
	}
	_, _ = w.d.Token() // ']'
	return nil
}

// skip reads past the value that starts with tok.
func (w pathWalker) skip(tok json.Token) *apiError {
	if d, ok := tok.(json.Delim); !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := w.d.Token()
		if err != nil {
			return nil
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// fieldType returns the type of struct t's field that decodes the JSON key, as encoding/json
// matches it: its JSON name exactly, else without regard to case; an embedded struct's fields
// count as t's own.
func fieldType(t reflect.Type, key string) (reflect.Type, bool) {
	var folded reflect.Type
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			if ft, ok := fieldType(f.Type, key); ok {
				return ft, true
			}
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		if name == key {
			return f.Type, true
		}
		if folded == nil && strings.EqualFold(name, key) {
			folded = f.Type
		}
	}
	return folded, folded != nil
}

// isNumber reports whether t holds a JSON number.
func isNumber(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// fitsNumber reports whether n decodes into t, as encoding/json decides it: an integer type
// takes an integer literal within its range, a float type any number within its range.
func fitsNumber(n json.Number, t reflect.Type) bool {
	var err error
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		_, err = strconv.ParseInt(string(n), 10, t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		_, err = strconv.ParseUint(string(n), 10, t.Bits())
	case reflect.Float32, reflect.Float64:
		_, err = strconv.ParseFloat(string(n), t.Bits())
	default:
		return false
	}
	return err == nil
}
