package main

import (
	"strings"
	"testing"
)

// A worker URL refused on the command line is named without its user info or query.
func TestRefusedWorkerURLNotEchoed(t *testing.T) {
	for _, u := range []string{"http://h:1?key=zzsecretzz", "http://user:zzsecretzz@h:1", "h:1?key=zzsecretzz"} {
		_, err := parse([]string{"--worker-urls", u}, nil)
		if err == nil || !strings.Contains(err.Error(), "--worker-urls") || strings.Contains(err.Error(), "zzsecretzz") {
			t.Errorf("--worker-urls %s: %v", u, err)
		}
	}
}
