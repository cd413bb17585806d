package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// printJSON prints an answer as the gateway sent it, indented.
func printJSON(w io.Writer, body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		return &badAnswerError{What: "-o json", Err: err}
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// record is what the tables show of a worker record (GET /workers/{id}).
type record struct {
	ID          string   `json:"id"`
	DisplayID   string   `json:"display_id"`
	URL         string   `json:"url"`
	Owner       string   `json:"owner"`
	Epoch       uint64   `json:"epoch"`
	HealthState string   `json:"health_state"`
	Disabled    bool     `json:"disabled"`
	IsDead      bool     `json:"is_dead"`
	Routable    bool     `json:"routable"`
	Models      []string `json:"models"`
	Discovered  []string `json:"discovered_models"`
	LastError   string   `json:"last_error"`
	Breaker     *struct {
		State string `json:"state"`
	} `json:"breaker"`
	Cache *cacheStats `json:"cache"`
}

// cacheStats is a worker's prefix-cache hit ratio as the answering gateway observed it, and
// the one its cache_aware index predicted.
type cacheStats struct {
	PromptTokens         uint64   `json:"prompt_tokens"`
	CachedTokens         uint64   `json:"cached_tokens"`
	HitRatio             *float64 `json:"hit_ratio"`
	RoutedTextBytes      uint64   `json:"routed_text_bytes"`
	PredictedCachedBytes uint64   `json:"predicted_cached_bytes"`
	PredictedHitRatio    *float64 `json:"predicted_hit_ratio"`
}

// hit renders the observed hit ratio as a percentage, "" (shown as -) before any report.
func (c *cacheStats) hit() string {
	if c == nil {
		return ""
	}
	return percent(c.HitRatio)
}

// predicted renders the predicted hit ratio as a percentage, "" (shown as -) before any pick.
func (c *cacheStats) predicted() string {
	if c == nil {
		return ""
	}
	return percent(c.PredictedHitRatio)
}

// percent renders a ratio as a percentage with one decimal, "" for none.
func percent(r *float64) string {
	if r == nil {
		return ""
	}
	return strconv.FormatFloat(100**r, 'f', 1, 64) + "%"
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row writes one row; an empty cell prints as "-" so that columns stay readable.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(cells[i])
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// workersHeader are the columns of the workers table; wide adds URL, EPOCH, LAST_ERROR, the
// prompt and cached token counts behind CACHE_HIT, and the routing text's bytes behind
// PREDICTED.
func workersHeader(wide bool) []string {
	header := []string{"WORKER", "ID", "HEALTH", "BREAKER", "FLAGS", "OWNER", "ROUTABLE", "MODELS", "CACHE_HIT", "PREDICTED"}
	if wide {
		header = append(header, "URL", "EPOCH", "LAST_ERROR", "PROMPT_TOKENS", "CACHED_TOKENS", "ROUTED_BYTES", "PREDICTED_BYTES")
	}
	return header
}

// printWorkers prints the workers table, sorted by name (host:port), URL and id, or by the
// column by, which may be one that only wide shows.
func printWorkers(w io.Writer, recs []record, wide bool, by string) error {
	header := workersHeader(true)
	slices.SortStableFunc(recs, func(a, b record) int {
		return cmp.Or(strings.Compare(a.DisplayID, b.DisplayID), strings.Compare(a.URL, b.URL), strings.Compare(a.ID, b.ID))
	})
	rows := make([][]string, 0, len(recs))
	for _, r := range recs {
		prompt, cached, routed, predicted := "", "", "", ""
		if c := r.Cache; c != nil {
			prompt, cached = strconv.FormatUint(c.PromptTokens, 10), strconv.FormatUint(c.CachedTokens, 10)
			routed, predicted = strconv.FormatUint(c.RoutedTextBytes, 10), strconv.FormatUint(c.PredictedCachedBytes, 10)
		}
		rows = append(rows, []string{r.DisplayID, r.ID, r.HealthState, r.breakerState(), r.flags(),
			r.Owner, strconv.FormatBool(r.Routable), r.models(), r.Cache.hit(), r.Cache.predicted(),
			r.URL, strconv.FormatUint(r.Epoch, 10), r.LastError, prompt, cached, routed, predicted})
	}
	sortRows(header, rows, by)
	header = workersHeader(wide)
	t := newTable(w, header...)
	for _, r := range rows {
		t.row(r[:len(header)]...)
	}
	return t.flush()
}

// workersSummary is the line under the workers table: "3 workers: 2 routable, 1 disabled".
// A worker that is not routable counts once, under the first reason: disabled, quarantined,
// its health state when not ready, else its open breaker.
func workersSummary(recs []record) string {
	order := []string{"routable", "disabled", "quarantined", "pending", "not_ready", "failed", "draining", "unknown", "breaker open", "not routable"}
	counts := map[string]int{}
	for _, r := range recs {
		switch {
		case r.Routable:
			counts["routable"]++
		case r.Disabled:
			counts["disabled"]++
		case r.IsDead:
			counts["quarantined"]++
		case r.HealthState != "ready" && slices.Contains(order, r.HealthState):
			counts[r.HealthState]++
		case r.breakerState() == "open":
			counts["breaker open"]++
		default:
			counts["not routable"]++
		}
	}
	line := plural(len(recs), "worker")
	if c := countsLine(order, counts); c != "" {
		line += ": " + c
	}
	return line
}

func (r record) breakerState() string {
	if r.Breaker == nil {
		return ""
	}
	return r.Breaker.State
}

// flags names the operator's switches that are on: disabled, dead.
func (r record) flags() string {
	var f []string
	if r.Disabled {
		f = append(f, "disabled")
	}
	if r.IsDead {
		f = append(f, "dead")
	}
	return strings.Join(f, ",")
}

// models lists the declared models; for a worker that declares none (it takes any model) the
// models it announced, as "*(a,b)", else "*".
func (r record) models() string {
	if len(r.Models) == 0 && len(r.Discovered) > 0 {
		return "*(" + strings.Join(r.Discovered, ",") + ")"
	}
	if len(r.Models) == 0 {
		return "*"
	}
	return strings.Join(r.Models, ",")
}

// printFields prints a JSON object as FIELD VALUE lines, nested objects flattened with dots
// (health.timeout_secs), in key order.
func printFields(w io.Writer, body []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return &badAnswerError{What: "the request", Err: err}
	}
	lines := map[string]string{}
	flatten("", obj, lines)
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t := newTable(w, "FIELD", "VALUE")
	for _, k := range keys {
		t.row(k, lines[k])
	}
	return t.flush()
}

func flatten(prefix string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 && prefix != "" {
			out[prefix] = "{}"
		}
		for k, child := range v {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			flatten(name, child, out)
		}
	case nil:
		out[prefix] = "null"
	case string:
		out[prefix] = v
	default:
		b, _ := json.Marshal(v)
		out[prefix] = string(b)
	}
}

// decode reads a 2xx answer into v.
func decode(what string, body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &badAnswerError{What: what, Err: err}
	}
	return nil
}
