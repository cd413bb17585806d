package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// MachineInfo describes where the figures were taken.
type MachineInfo struct {
	CPUs      int    `json:"nproc"`
	Model     string `json:"cpu_model"`
	MemoryMiB int64  `json:"memory_mib"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	HAProxy   string `json:"haproxy"`
	Wrk       string `json:"wrk"`
}

// String is the one-line summary put in the report's "machine" field.
func (m MachineInfo) String() string {
	return joinNonEmpty(", ", fmt.Sprintf("%d CPUs %s", m.CPUs, m.Model), fmt.Sprintf("%.1f GiB", float64(m.MemoryMiB)/1024),
		"Linux "+m.Kernel, m.Go, m.HAProxy, m.Wrk)
}

// probeMachine reads /proc and asks haproxy and wrk for their versions.
func probeMachine(ctx context.Context, haproxyBin, wrkBin string) MachineInfo {
	m := MachineInfo{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemoryMiB = kb >> 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.HAProxy = firstLine(ctx, haproxyBin, "-v")
	m.Wrk = firstLine(ctx, wrkBin, "-v")
	return m
}

// firstLine runs bin with args and returns the first line of its output ("" on failure).
func firstLine(ctx context.Context, bin string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
