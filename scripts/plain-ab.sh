#!/usr/bin/env bash
# plain-ab.sh [PAIRS] [SECONDS]: meshgw ÷ minproxy on plain chat requests, alternated in short
# slices so that the host's drift over tens of seconds falls on both alike.
#
# make bench's plain rows pair one 10 s run of each proxy per round; on a shared host the same
# binary's throughput moves 10-20 % between such runs, so one round's ratio spans 0.79-1.24 and
# a run's median of 5 lands either side of 0.9 by chance. This script starts two bench upstreams,
# minproxy and meshgw (round_robin, defaults) on loopback, then runs wrk -t2 -c64 against each in
# turn, PAIRS times (15) for SECONDS each (2), and prints each pair's ratio, their median, the
# ratio of the summed requests, and each proxy's CPU per request (user and system, from /proc).
# Everything it starts is stopped on exit. Needs bin/ (scripts/bench.sh builds it) and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-15}
secs=${2:-2}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "plain-ab: nothing listens on 127.0.0.1:$1" >&2
  return 1
}

u1=$(free_port); u2=$(free_port); mp=$(free_port); gw=$(free_port)
bin/bench-upstream --port "$u1" >"$work/u1.log" 2>&1 & pids+=($!)
bin/bench-upstream --port "$u2" >"$work/u2.log" 2>&1 & pids+=($!)
wait_port "$u1"; wait_port "$u2"
bin/bench-minproxy --listen "127.0.0.1:$mp" --upstreams "127.0.0.1:$u1,127.0.0.1:$u2" >"$work/mp.log" 2>&1 &
mp_pid=$!; pids+=($mp_pid)
bin/meshgw --host 127.0.0.1 --port "$gw" --worker-urls "http://127.0.0.1:$u1,http://127.0.0.1:$u2" \
  --policy round_robin --log-level warn --node-id ab --ephemeral --mesh-port "$(free_port)" \
  --raft-port "$(free_port)" --rpc-port "$(free_port)" \
  --prometheus-port "$(free_port)" --prometheus-host 127.0.0.1 >"$work/gw.log" 2>&1 &
gw_pid=$!; pids+=($gw_pid)
wait_port "$mp"; wait_port "$gw"

cat >"$work/chat.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"model":"fake-model","messages":[{"role":"user","content":"Say hello in one short sentence, please."}],"max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
EOF
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14, $15}' "/proc/$1/stat"; }
# one NAME PID PORT: one wrk run; prints "NAME requests user_ticks system_ticks".
one() {
  local u0 s0 u1 s1 n
  read -r u0 s0 < <(cpu "$2")
  n=$(wrk -t2 -c64 -d"${secs}s" -s "$work/chat.lua" "http://127.0.0.1:$3/v1/chat/completions" | awk '/requests in/{print $1}')
  read -r u1 s1 < <(cpu "$2")
  echo "$1 $n $((u1 - u0)) $((s1 - s0))"
}
one warm "$mp_pid" "$mp" >/dev/null
one warm "$gw_pid" "$gw" >/dev/null
for i in $(seq "$pairs"); do
  if ((i % 2)); then one mp "$mp_pid" "$mp"; one gw "$gw_pid" "$gw"; else one gw "$gw_pid" "$gw"; one mp "$mp_pid" "$mp"; fi
done >"$work/runs"
python3 - "$work/runs" "$tick" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
tick = int(sys.argv[2])
mp = [r for r in rows if r[0] == "mp"]
gw = [r for r in rows if r[0] == "gw"]
ratios = [int(g[1]) / int(m[1]) for m, g in zip(mp, gw)]
def cpu(rs, col):
    return sum(int(r[col]) for r in rs) * 1e6 / tick / sum(int(r[1]) for r in rs)
print("pairs:", " ".join(f"{r:.2f}" for r in ratios))
print(f"meshgw ÷ minproxy: median of pairs {statistics.median(ratios):.3f}, summed requests "
      f"{sum(int(g[1]) for g in gw) / sum(int(m[1]) for m in mp):.3f}")
print(f"CPU per request: minproxy {cpu(mp, 2):.1f} user + {cpu(mp, 3):.1f} system µs, "
      f"meshgw {cpu(gw, 2):.1f} user + {cpu(gw, 3):.1f} system µs")
EOF
