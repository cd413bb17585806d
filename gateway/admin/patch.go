package admin

import (
	"bytes"
	"encoding/json"

	"github.com/meshgw/meshgw/worker"
)

// mergeSpec applies patch to cur as a JSON merge patch (RFC 7396): an object merges into the
// current one, null resets a field (or deletes a label), anything else replaces. Naming "model"
// or "models" replaces the served models as a whole. The result is normalized; cur is not
// modified. An empty patch (a PATCH of flags only) leaves cur as it is, unchecked: a record
// written before a limit it is over keeps taking flag changes.
func mergeSpec(cur worker.Spec, patch object) (worker.Spec, *apiError) {
	if len(patch) == 0 {
		return cur.Clone(), nil
	}
	var out worker.Spec
	target, err := toTree(cur)
	if err != nil {
		return out, errorf(500, codeInternal, "the current spec does not encode")
	}
	changes := make(map[string]any, len(patch))
	for k, raw := range patch {
		v, err := decodeTree(raw)
		if err != nil {
			return out, errorf(400, codeInvalidField, k+": not valid JSON")
		}
		changes[k] = v
	}
	if _, ok := changes["model"]; ok {
		delete(target, "models")
	}
	if _, ok := changes["models"]; ok {
		delete(target, "model")
	}
	merged, _ := json.Marshal(mergeTree(target, changes))
	if e := strictDecode(merged, &out); e != nil {
		return out, e
	}
	if e := normalize(&out); e != nil {
		return out, e
	}
	return out, nil
}

// toTree turns s, API key included, into its generic JSON form.
func toTree(s worker.Spec) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	v, err := decodeTree(b)
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// decodeTree decodes JSON keeping numbers exact.
func decodeTree(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// mergeTree is RFC 7396's MergePatch(target, patch) for an object patch.
func mergeTree(target map[string]any, patch map[string]any) map[string]any {
	if target == nil {
		target = make(map[string]any, len(patch))
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(target, k)
		case map[string]any:
			tv, _ := target[k].(map[string]any)
			target[k] = mergeTree(tv, pv)
		default:
			target[k] = v
		}
	}
	return target
}
