package chaos

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/meshgw/meshgw/test/chaos/cluster"
	"github.com/meshgw/meshgw/test/chaos/history"
	"github.com/meshgw/meshgw/test/chaos/workload"
)

// converge bounds the wait for the healed cluster to agree on every record.
const converge = 60 * time.Second

// final waits until the healed cluster formed and every gateway lists the same records, none
// of them draining (a deleted worker's owner removes its record at the drain's deadline), then
// records each gateway's local list and one consistent read of each worker.
// It returns what kept the cluster from healing, if anything.
func final(ctx context.Context, c *cluster.Cluster, admin *workload.Admin, rec *history.Recorder, gateways []workload.Gateway, workers []workload.Worker) []string {
	var errs []string
	if err := c.WaitFormed(ctx, converge); err != nil {
		errs = append(errs, "after the faults: "+err.Error())
	}
	var views map[string]map[string]history.Final
	deadline := time.Now().Add(converge)
	for {
		views = map[string]map[string]history.Final{}
		for _, g := range gateways {
			if v, ok := list(g, workers); ok {
				views[g.ID] = v
			}
		}
		if (agree(views, len(gateways)) && !draining(views)) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	switch {
	case !agree(views, len(gateways)):
		errs = append(errs, fmt.Sprintf("the gateways still disagree on the records %v after healing", converge))
	case draining(views):
		errs = append(errs, fmt.Sprintf("a deleted worker's record still drains %v after healing (its owner did not remove it)", converge))
	}
	for g, v := range views {
		for w, f := range v {
			rec.Final(g, w, f)
		}
	}
	for i, w := range workers {
		admin.Do(ctx, 0, history.Read, w, gateways[i%len(gateways)])
	}
	return errs
}

// list reads g's GET /workers (its local, applied view) for the workers of the run.
func list(g workload.Gateway, workers []workload.Worker) (map[string]history.Final, bool) {
	var ans struct {
		Workers []struct {
			ID            string  `json:"id"`
			Disabled      bool    `json:"disabled"`
			DrainDeadline *string `json:"drain_deadline"`
		} `json:"workers"`
	}
	if !cluster.GetJSON(g.URL+"/workers", &ans) {
		return nil, false
	}
	v := map[string]history.Final{}
	for _, w := range workers {
		v[w.ID] = history.Final{}
	}
	for _, w := range ans.Workers {
		if _, ok := v[w.ID]; ok {
			v[w.ID] = history.Final{Found: true, Disabled: w.Disabled, Draining: w.DrainDeadline != nil}
		}
	}
	return v, true
}

// draining reports whether some gateway lists a record draining.
func draining(views map[string]map[string]history.Final) bool {
	for _, v := range views {
		for _, f := range v {
			if f.Draining {
				return true
			}
		}
	}
	return false
}

func agree(views map[string]map[string]history.Final, n int) bool {
	if len(views) != n {
		return false
	}
	var first map[string]history.Final
	for _, v := range views {
		if first == nil {
			first = v
		} else if !reflect.DeepEqual(first, v) {
			return false
		}
	}
	return true
}
