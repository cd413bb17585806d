package main

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// A fleet in several regions is read region by region: meshctl peers and meshctl owners sort
// their rows by region first (then as they would otherwise) when their rows name more than
// one, and their summary lines count the rows of each region. A fleet of one region (or none)
// reads as before.

// regionsOf returns the distinct regions of rows, sorted, "" (no region) last when a row has
// none.
func regionsOf[R any](rows []R, region func(R) string) []string {
	var out []string
	for _, r := range rows {
		if g := region(r); !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, regionOrder)
	return out
}

// regionOrder orders regions by name, no region last.
func regionOrder(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return cmp.Compare(a, b)
}

// byRegionFirst orders rows by region when they name more than one, keeping the order of
// rows within a region (a stable sort: call it after the default order).
func byRegionFirst[R any](rows []R, region func(R) string) {
	if len(regionsOf(rows, region)) < 2 {
		return
	}
	slices.SortStableFunc(rows, func(a, b R) int { return regionOrder(region(a), region(b)) })
}

// regionsSummary is "; by region: ap 1, eu 2 (leader), us 1" when rows name more than one
// region, else "". note, if set, adds a word in parentheses to a region's count.
func regionsSummary[R any](rows []R, region func(R) string, note func(region string) string) string {
	regions := regionsOf(rows, region)
	if len(regions) < 2 {
		return ""
	}
	counts := map[string]int{}
	for _, r := range rows {
		counts[region(r)]++
	}
	parts := make([]string, 0, len(regions))
	for _, g := range regions {
		p := cmp.Or(g, "no region") + " " + strconv.Itoa(counts[g])
		if note != nil {
			if n := note(g); n != "" {
				p += " (" + n + ")"
			}
		}
		parts = append(parts, p)
	}
	return "; by region: " + strings.Join(parts, ", ")
}
