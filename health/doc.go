// Package health probes workers and runs each worker's health state machine (DESIGN.md section 6).
package health
