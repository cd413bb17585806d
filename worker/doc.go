// Package worker defines what a worker is to every part of meshgw: its spec as an operator
// registers it, its deterministic id, and the capabilities a request may require of it.
package worker
