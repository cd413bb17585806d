package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// describeWorker prints one worker record (GET /workers/{id}) as kubectl describe does: labelled
// lines in sections, then every field the sections did not show, so that nothing the gateway
// answered is hidden.
func describeWorker(w io.Writer, what string, body []byte) error {
	var obj map[string]any
	if err := decode(what, body, &obj); err != nil {
		return err
	}
	d := &describer{obj: obj, shown: map[string]bool{}, tw: tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)}
	d.line("Name", d.str("display_id"))
	d.line("ID", d.str("id"))
	d.line("Worker ID", d.str("worker_id"))
	d.line("URL", d.str("url"))
	d.line("Connection", d.join(" ", d.str("connection_mode"), d.str("provider")))
	d.line("Owner", fmt.Sprintf("%s (epoch %s, %s)", d.str("owner"), d.str("epoch"), d.str("origin")))
	d.line("Region", d.str("region"))
	d.line("Health", d.str("health_state"))
	d.line("Routable", d.str("routable"))
	d.line("Stale", d.str("stale"))
	d.line("Disabled", d.join(" ", d.str("disabled"), d.paren(d.join(", ", d.str("disabled_reason"),
		d.prefixed("by ", d.str("disabled_by")), d.prefixed("at ", d.str("disabled_at"))))))
	d.line("Quarantined", d.str("is_dead"))
	d.line("Active requests", d.str("active_requests"))
	d.line("Models", d.join(", ", d.str("models"), d.prefixed("discovered: ", d.str("discovered_models"))))
	d.line("Capabilities", d.str("capabilities"))
	d.line("Priority", d.str("priority"))
	d.line("Cost", d.str("cost"))
	d.line("Labels", d.str("labels"))
	d.line("API key", map[string]string{"true": "set (never shown)", "false": "none"}[d.str("has_api_key")])
	d.line("Registered", d.join(" ", d.str("registered_at"), d.paren(d.prefixed("revision ", d.str("revision")))))
	failures, successes := d.str("consecutive_failures"), d.str("consecutive_successes")
	d.line("Probes", fmt.Sprintf("%s consecutive %s, %s %s; last at %s", failures, nouns(failures, "failure", "failures"),
		successes, nouns(successes, "success", "successes"), d.orNone(d.str("last_health_check"))))
	d.line("Last error", d.join(" ", d.orNone(d.str("last_error")), d.paren(d.prefixed("status ", nonZero(d.str("last_status_code"))))))
	d.section("Breaker", d.take("breaker"), "none (only the owner runs it; its bulletins show it elsewhere)")
	d.section("Health overrides", d.take("health"), "none")
	d.section("Resilience overrides", d.take("resilience"), "none")
	d.transitions()
	rest := map[string]string{}
	for k, v := range obj {
		if !d.shown[k] {
			flatten(k, v, rest)
		}
	}
	if len(rest) > 0 {
		fmt.Fprintln(d.tw, "Other fields:")
		for _, k := range slices.Sorted(maps.Keys(rest)) {
			fmt.Fprintf(d.tw, "  %s:\t%s\n", k, rest[k])
		}
	}
	return d.tw.Flush()
}

// describer renders a record's fields, remembering which it showed.
type describer struct {
	obj   map[string]any
	shown map[string]bool
	tw    *tabwriter.Writer
}

func (d *describer) line(label, value string) {
	if value == "" {
		value = "-"
	}
	fmt.Fprintf(d.tw, "%s:\t%s\n", label, value)
}

// take returns the field and marks it shown.
func (d *describer) take(key string) any {
	d.shown[key] = true
	return d.obj[key]
}

// str renders a field: strings as they are, lists joined with commas, objects as k=v pairs,
// "" when absent or null.
func (d *describer) str(key string) string {
	switch v := d.take(key).(type) {
	case nil:
		return ""
	case string:
		return v
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			parts = append(parts, scalar(e))
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		flat := map[string]string{}
		flatten("", v, flat)
		parts := make([]string, 0, len(flat))
		for _, k := range slices.Sorted(maps.Keys(flat)) {
			parts = append(parts, k+"="+flat[k])
		}
		return strings.Join(parts, ", ")
	default:
		return scalar(v)
	}
}

// section prints a nested object as indented lines, or none.
func (d *describer) section(title string, v any, none string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		fmt.Fprintf(d.tw, "%s:\t%s\n", title, none)
		return
	}
	fmt.Fprintf(d.tw, "%s:\n", title)
	flat := map[string]string{}
	flatten("", m, flat)
	for _, k := range slices.Sorted(maps.Keys(flat)) {
		fmt.Fprintf(d.tw, "  %s:\t%s\n", k, flat[k])
	}
}

// transitions prints the recent transitions as a small table, oldest first.
func (d *describer) transitions() {
	list, _ := d.take("transitions").([]any)
	if len(list) == 0 {
		fmt.Fprintf(d.tw, "Transitions:\t%s\n", "none known here (the owner keeps them)")
		return
	}
	fmt.Fprintln(d.tw, "Transitions:")
	fmt.Fprintln(d.tw, "  AT\tKIND\tFROM\tTO")
	for _, e := range list {
		m, _ := e.(map[string]any)
		fmt.Fprintf(d.tw, "  %s\t%s\t%s\t%s\n", scalar(m["at"]), scalar(m["kind"]), scalar(m["from"]), scalar(m["to"]))
	}
}

func (d *describer) join(sep string, parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), sep)
}

func (d *describer) paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func (d *describer) prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func (d *describer) orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// nouns is one or many, as the count n (a number as the gateway wrote it) asks.
func nouns(n, one, many string) string {
	if n == "1" {
		return one
	}
	return many
}

func nonZero(s string) string {
	if s == "0" {
		return ""
	}
	return s
}

// scalar renders a JSON value on one line.
func scalar(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}
