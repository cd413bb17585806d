package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/meshgw/meshgw/test/proc"
)

// procs starts the processes of a run and stops every one of them, whatever happens: each runs
// in its own process group, gets SIGKILL if the harness dies, and Stop sends SIGTERM then
// SIGKILL to the groups (proc.Group).
type procs struct {
	proc.Group
	dir string // where each process's stderr is kept
}

func newProcs(log *slog.Logger, dir string) *procs {
	return &procs{Group: proc.Group{Log: log}, dir: dir}
}

// start runs name with args; its stderr goes to DIR/NAME.log and its stdout to stdout (nil
// discards it).
func (ps *procs) start(name string, stdout io.Writer, bin string, args ...string) (*proc.Proc, error) {
	return ps.startSpec(proc.Spec{Name: name, Path: bin, Args: args, Stdout: stdout})
}

// startSpec starts s with its stderr in DIR/NAME.log.
func (ps *procs) startSpec(s proc.Spec) (*proc.Proc, error) {
	logf, err := os.Create(ps.dir + "/" + s.Name + ".log")
	if err != nil {
		return nil, err
	}
	s.Stderr, s.KillWithParent = logf, true
	return ps.Start(s)
}

// startURL starts a process that prints "... listening on URL" on stdout and returns the URLs
// of the first n such lines.
func (ps *procs) startURL(ctx context.Context, name string, n int, bin string, args ...string) (*proc.Proc, []string, error) {
	l := proc.NewListening(n)
	p, err := ps.startSpec(proc.Spec{Name: name, Path: bin, Args: args, OnLine: l.Line})
	if err != nil {
		return nil, nil, err
	}
	urls, err := l.Wait(ctx, p, 10*time.Second)
	switch {
	case errors.Is(err, proc.ErrExited):
		return nil, nil, fmt.Errorf("%s exited before listening: %v (see %s/%s.log)", name, p.Err(), ps.dir, name)
	case errors.Is(err, proc.ErrNoLine):
		return nil, nil, fmt.Errorf("%s printed no URL within 10 s", name)
	case err != nil:
		return nil, nil, err
	}
	return p, urls, nil
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// cpuUse is CPU time split as the kernel counts it: in the process's own code and in the kernel
// on its behalf.
type cpuUse struct {
	user, sys time.Duration
}

func (c cpuUse) total() time.Duration { return c.user + c.sys }

// cpuTime returns the CPU time (user + system) that process pid has used so far.
func cpuTime(pid int) (time.Duration, error) {
	c, err := cpuUseOf(pid)
	return c.total(), err
}

// cpuUseOf returns the user and system time that process pid has used so far.
func cpuUseOf(pid int) (cpuUse, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return cpuUse{}, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a /proc/PID/stat line. The command
// name (field 2) may hold spaces, so fields are counted from its closing parenthesis.
func parseStatCPU(stat string) (cpuUse, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return cpuUse{}, errors.New("proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so utime (14) is f[11] and stime (15) f[12].
	if len(f) < 13 {
		return cpuUse{}, errors.New("proc stat: too few fields")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return cpuUse{}, errors.New("proc stat: bad utime or stime")
	}
	return cpuUse{user: time.Duration(u) * time.Second / clockTicks, sys: time.Duration(s) * time.Second / clockTicks}, nil
}

// rssBytes returns the resident set size and its peak (VmRSS, VmHWM) of process pid.
func rssBytes(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			if k == "VmRSS" {
				rss = n << 10
			} else {
				peak = n << 10
			}
		}
	}
	return rss, peak, nil
}

// cpuMeter measures the CPU time a set of processes spends between start and stop.
type cpuMeter struct {
	pids   []int
	before []cpuUse
}

func startCPU(pids ...int) *cpuMeter {
	m := &cpuMeter{pids: pids, before: make([]cpuUse, len(pids))}
	for i, pid := range pids {
		m.before[i], _ = cpuUseOf(pid)
	}
	return m
}

// stop returns the CPU time used since startCPU, summed over the processes.
func (m *cpuMeter) stop() time.Duration { return m.stopUse().total() }

// stopUse returns the user and system time used since startCPU, summed over the processes.
func (m *cpuMeter) stopUse() cpuUse {
	var sum cpuUse
	for i, pid := range m.pids {
		now, err := cpuUseOf(pid)
		if err == nil {
			sum.user += now.user - m.before[i].user
			sum.sys += now.sys - m.before[i].sys
		}
	}
	return sum
}

// machineBusy returns the CPU time all CPUs spent running processes (user, nice, system) or
// stolen by the hypervisor. Interrupt time is left out: on loopback most of it is the
// benchmark's own traffic (about 0.15 cores with wrk against the engine).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, errors.New("proc stat: no cpu line")
	}
	var ticks int64
	for i, v := range f[1:] {
		if i >= 3 && i <= 6 || i >= 8 { // idle, iowait, irq, softirq; guest time is in user
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// selfAndChildrenCPU returns this process's CPU time plus that of its waited-for children
// (cutime, cstime), such as each wrk run.
func selfAndChildrenCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, errors.New("proc stat: too few fields")
	}
	var ticks int64
	for _, v := range f[11:15] { // utime, stime, cutime, cstime
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// othersMeter measures how much CPU processes other than the harness, wrk and the processes it
// started used during a measurement: the noise on the figures.
type othersMeter struct {
	ps          *procs
	start       time.Time
	busy, mine0 time.Duration
	cpu         *cpuMeter
}

func (ps *procs) startOthers() *othersMeter {
	var pids []int
	for _, p := range ps.Procs() {
		pids = append(pids, p.Pid())
	}
	m := &othersMeter{ps: ps, start: time.Now(), cpu: startCPU(pids...)}
	m.busy, _ = machineBusy()
	m.mine0, _ = selfAndChildrenCPU()
	return m
}

// stop returns the CPU cores that other processes used on average since startOthers.
func (m *othersMeter) stop() float64 {
	busy, err1 := machineBusy()
	mine, err2 := selfAndChildrenCPU()
	el := time.Since(m.start)
	if err1 != nil || err2 != nil || el <= 0 {
		return 0
	}
	others := (busy - m.busy) - (mine - m.mine0) - m.cpu.stop()
	return max(0, others.Seconds()/el.Seconds())
}
