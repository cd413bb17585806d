package admin

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/meshgw/meshgw/worker"
)

// The limits of a worker spec's fields (docs/admin-api.md, "Limits"). A record lives in raft,
// in every gateway's memory and state file, in bulletins and in every GET /workers, and its
// fields go into log lines: each is bounded by what its users (SMG, Kubernetes) already take.
const (
	// maxURLLen bounds url: a worker URL is scheme://host:port (a host is at most 253 bytes),
	// an external provider's may add a path such as /v1.
	maxURLLen = 2048
	// maxEnumLen bounds connection_mode and provider, whose values are a few short words.
	maxEnumLen = 32
	// maxModelLen bounds a model name (model, each of models, health.llm_probe_model), with
	// room for a Hugging Face org/name.
	maxModelLen = 256
	// maxModels bounds models (with model): the base model and its LoRA adapters.
	maxModels = 128
	// maxCapabilityLen and maxCapabilities bound capabilities, a set of a few short names.
	maxCapabilityLen = 32
	maxCapabilities  = 64
	// maxLabels, maxLabelKeyLen and maxLabelValueLen bound labels. A key has a Kubernetes label
	// key's limit (a 253-byte DNS prefix, '/' and a 63-byte name), and a value room for the
	// namespace/name (63 + 1 + 253 bytes) the Kubernetes discovery writes; the discovery adds
	// two labels to a pod's own.
	maxLabels        = 64
	maxLabelKeyLen   = 317
	maxLabelValueLen = 317
	// maxRegionLen bounds region: a DNS label, as a Kubernetes topology region or zone is.
	maxRegionLen = 63
	// maxAPIKeyLen bounds api_key, sent as a header to the worker (a long JWT fits).
	maxAPIKeyLen = 4096
	// maxOwnerLen bounds owner: a node id's limit, that of the state folder it names
	// (storage.NodeDirName).
	maxOwnerLen = 128
)

// checkLimits refuses a spec, as sent (before Normalize, so that no refusal quotes an
// oversized value), with a field over its limit; the 400 names the field.
func checkLimits(s *worker.Spec) *apiError {
	for _, f := range []struct {
		name  string
		v     string
		limit int
	}{
		{"url", s.URL, maxURLLen},
		{"connection_mode", s.ConnectionMode, maxEnumLen},
		{"provider", s.Provider, maxEnumLen},
		{"model", s.Model, maxModelLen},
		{"region", s.Region, maxRegionLen},
		{"api_key", s.APIKey, maxAPIKeyLen},
	} {
		if len(f.v) > f.limit {
			return tooLong(f.name, f.limit)
		}
	}
	if s.Health != nil && s.Health.LLMProbeModel != nil && len(*s.Health.LLMProbeModel) > maxModelLen {
		return tooLong("health.llm_probe_model", maxModelLen)
	}
	if e := checkList("models", s.Models, maxModels, maxModelLen); e != nil {
		return e
	}
	if len(s.ModelList()) > maxModels { // model and models together
		return tooMany("models", maxModels)
	}
	if e := checkList("capabilities", s.Capabilities, maxCapabilities, maxCapabilityLen); e != nil {
		return e
	}
	if len(s.Labels) > maxLabels {
		return tooMany("labels", maxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) { // the same refusal every time
		v := s.Labels[k]
		if len(k) > maxLabelKeyLen {
			return errorf(fasthttp.StatusBadRequest, codeInvalidField, fmt.Sprintf("labels: a key is longer than %d bytes", maxLabelKeyLen))
		}
		if len(v) > maxLabelValueLen {
			return tooLong("labels."+k, maxLabelValueLen)
		}
	}
	return nil
}

// checkOwnerLen refuses an owner longer than a node id can be.
func checkOwnerLen(owner string) *apiError {
	if len(owner) > maxOwnerLen {
		return tooLong("owner", maxOwnerLen)
	}
	return nil
}

// checkList refuses a list of more than most items, or with an item longer than itemMax bytes.
func checkList(name string, items []string, most, itemMax int) *apiError {
	if len(items) > most {
		return tooMany(name, most)
	}
	for i, v := range items {
		if len(v) > itemMax {
			return tooLong(name+"["+strconv.Itoa(i)+"]", itemMax)
		}
	}
	return nil
}

func tooLong(field string, limit int) *apiError {
	return errorf(fasthttp.StatusBadRequest, codeInvalidField, fmt.Sprintf("%s: longer than %d bytes", field, limit))
}

func tooMany(field string, limit int) *apiError {
	return errorf(fasthttp.StatusBadRequest, codeInvalidField, fmt.Sprintf("%s: more than %d", field, limit))
}
