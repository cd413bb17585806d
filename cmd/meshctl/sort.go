package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// sortFlag adds --sort to a table command; by receives the column, one of columns (those -o
// wide shows too), and order says the table's default order ("by name, then URL").
func sortFlag(cmd *cobra.Command, by *string, columns []string, order string) {
	cmd.Flags().StringVar(by, "sort", "", "order the table's rows by `COLUMN`, shown or not ("+strings.ToLower(strings.Join(columns, ", "))+
		"); numbers in numeric order; default: "+order+". -o json prints the gateway's answer as it came")
}

// checkSort refuses a --sort column the table does not have, before the gateway is asked.
func checkSort(cmd *cobra.Command, by string, header []string) error {
	if by == "" || column(header, by) >= 0 {
		return nil
	}
	return fmt.Errorf("%s: --sort %q is not a column; want one of %s", commandName(cmd), by,
		strings.ToLower(strings.Join(header, ", ")))
}

// column is the index of the column named name (any case; - and _ alike), or -1.
func column(header []string, name string) int {
	norm := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
	return slices.IndexFunc(header, func(h string) bool { return norm(h) == norm(name) })
}

// sortRows orders rows by the column named by, numbers numerically and the rest as text,
// keeping the rows' order among equals; "" or an unknown column keeps the order.
func sortRows(header []string, rows [][]string, by string) {
	i := column(header, by)
	if i < 0 {
		return
	}
	slices.SortStableFunc(rows, func(a, b []string) int {
		x, xerr := strconv.ParseFloat(strings.TrimRight(a[i], "*%"), 64)
		y, yerr := strconv.ParseFloat(strings.TrimRight(b[i], "*%"), 64)
		if xerr == nil && yerr == nil {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
		return strings.Compare(a[i], b[i])
	})
}

// countsLine renders counts in the given order, skipping zeros: "2 routable, 1 disabled".
func countsLine(order []string, counts map[string]int) string {
	var parts []string
	for _, k := range order {
		if n := counts[k]; n > 0 {
			parts = append(parts, strconv.Itoa(n)+" "+k)
		}
	}
	return strings.Join(parts, ", ")
}

// plural is "1 peer" or "3 peers".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
