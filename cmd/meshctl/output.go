package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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

// printWorkers prints the workers table; wide adds URL, EPOCH and LAST_ERROR.
func printWorkers(w io.Writer, recs []record, wide bool) error {
	header := []string{"WORKER", "ID", "HEALTH", "BREAKER", "FLAGS", "OWNER", "ROUTABLE", "MODELS"}
	if wide {
		header = append(header, "URL", "EPOCH", "LAST_ERROR")
	}
	t := newTable(w, header...)
	for _, r := range recs {
		cells := []string{r.DisplayID, r.ID, r.HealthState, r.breakerState(), r.flags(),
			r.Owner, strconv.FormatBool(r.Routable), r.models()}
		if wide {
			cells = append(cells, r.URL, strconv.FormatUint(r.Epoch, 10), r.LastError)
		}
		t.row(cells...)
	}
	return t.flush()
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
