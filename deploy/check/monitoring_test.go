package check

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestAlertsReadExportedMetrics: every expression of deploy/prometheus/rules.yaml reads only
// metrics meshgw exports (promtool checks the syntax, not the names: a misspelt name is an alert
// that never fires).
func TestAlertsReadExportedMetrics(t *testing.T) {
	b, err := readRepo("deploy", "prometheus", "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(t)
	var n int
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			n++
			names := metricsIn(r.Expr)
			if len(names) == 0 {
				t.Errorf("%s reads no meshgw metric: %s", r.Alert, r.Expr)
			}
			for _, m := range names {
				if !exported[m] {
					t.Errorf("%s reads %s, which meshgw does not export", r.Alert, m)
				}
			}
		}
	}
	if n < 9 {
		t.Errorf("%d alerts; the issue lists nine", n)
	}
}

// grafanaPanel is what the check reads of a Grafana panel (rows hold panels too).
type grafanaPanel struct {
	ID      int            `json:"id"`
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// TestDashboardQueriesExportedMetrics: every query of every panel of deploy/grafana/meshgw.json
// reads metrics meshgw exports, panel ids are unique, and the rows Fleet, Per gateway, Per
// worker and Raft are there.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := readRepo("deploy", "grafana", "meshgw.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string         `json:"uid"`
		Title      string         `json:"title"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("meshgw.json: %v", err)
	}
	exported := exportedMetrics(t)
	ids := map[int]string{}
	rows := map[string]bool{}
	var queries int
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				rows[p.Title] = true
			} else if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries++
				names := metricsIn(tg.Expr)
				if len(names) == 0 {
					t.Errorf("panel %q: %q reads no metric", p.Title, tg.Expr)
				}
				for _, m := range names {
					if !exported[m] && (liveScrape() || strings.HasPrefix(m, "meshgw_")) {
						t.Errorf("panel %q reads %s, which meshgw does not export", p.Title, m)
					}
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			for _, m := range metricsIn(q["query"].(string)) {
				if !exported[m] {
					t.Errorf("variable %s reads %s, which meshgw does not export", v.Name, m)
				}
			}
		}
	}
	for _, r := range []string{"Fleet", "Per gateway", "Per worker", "Raft"} {
		if !rows[r] {
			t.Errorf("no %q row", r)
		}
	}
	if !liveScrape() {
		t.Logf("$METRICS_FILE not set: the go_* and process_* names were not checked (scripts/deploy-check.sh sets it)")
	}
	t.Logf("%d panels, %d queries, every metric exported", len(ids), queries)
}

// liveScrape reports whether a running gateway's /metrics was given ($METRICS_FILE), which
// holds the Go and process collectors' names that the code does not spell out.
func liveScrape() bool { return os.Getenv("METRICS_FILE") != "" }

// TestEveryMetricIsDocumented holds docs/metrics.md to the code: every meshgw_ metric the
// gateway registers is named there, so that an operator who finds a series in a scrape finds
// what it means. (exportedMetrics adds _bucket, _sum and _count to every name; those are not.)
func TestEveryMetricIsDocumented(t *testing.T) {
	doc, err := readRepo("docs", "metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := exportedMetrics(t)
	for name := range names {
		derived := false
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, s); ok && names[base] {
				derived = true
			}
		}
		if strings.HasPrefix(name, "meshgw_") && !derived && !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not name %s", name)
		}
	}
}
