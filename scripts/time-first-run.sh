#!/usr/bin/env bash
# What a newcomer waits for: a fresh clone's `make run` with an empty home (so pip's cache is empty), timed to the
# console answering and to the first alert, with the virtualenv's size and where the time went.
#
#   scripts/time-first-run.sh [REPO] [JAR_CACHE]
#
# REPO (default: this checkout's committed HEAD) is cloned into a temporary directory.  JAR_CACHE (default: this
# user's lab jar cache) is handed to the demo as TXNWATCH_LAB_CACHE, so Kafka's jars count as downloaded, as the
# goal of docs/contributing.md says; pass "" to download them too (Maven's own cache then starts empty as well).
# The demo listens on PORT (default 18080) and PORT+1, so it does not collide with a `make run` of your own.
# Prints one line per phase (seconds since `make run` started) and the load average; leaves the clone and its
# log in place for a look (the last line says where) and stops the demo it started.
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
jars=${2-${TXNWATCH_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/txnwatch/kafka}}
port=${PORT:-18080}
limit=${LIMIT_S:-1800}

work=$(mktemp -d /tmp/txnwatch-first-run.XXXXXX)
git clone -q "$repo" "$work/txnwatch"
mkdir "$work/home"
log=$work/make-run.log
start=$EPOCHREALTIME
elapsed() { awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

cd "$work/txnwatch"
# Each line of make's output stamped with the seconds since the start: the phases are read off the log.
( export HOME=$work/home; unset XDG_CACHE_HOME PIP_CACHE_DIR
  if [[ -n $jars ]]; then export TXNWATCH_LAB_CACHE=$jars; else unset TXNWATCH_LAB_CACHE; fi
  # Its own session: Ctrl-C's SIGINT goes to the whole of it (make, the demo, the lab) at the end.
  exec setsid bash -c 'echo $$ >"$0"; exec make run DEMO_ARGS="--port $1"' "$work/pgid" "$port" ) 2>&1 \
  | while IFS= read -r line; do printf '%s %s\n' "$(elapsed)" "$line"; done >"$log" &
until [[ -s $work/pgid ]]; do sleep 0.1; done
demo_pgid=$(cat "$work/pgid")
stop() {
  kill -INT -- "-$demo_pgid" 2>/dev/null || return 0
  for _ in $(seq 60); do kill -0 -- "-$demo_pgid" 2>/dev/null || return 0; sleep 1; done
  kill -TERM -- "-$demo_pgid" 2>/dev/null || true
}
trap stop EXIT

# CPU seconds spent so far by the whole of it: every live descendant of make (the lab's brokers start sessions of
# their own), each with its reaped children.
cpu() {
  local tick; tick=$(getconf CLK_TCK)
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$demo_pgid" -v tick="$tick" '
    { pid = $1; sub(/^.*\) /, ""); parent[pid] = $2; used[pid] = $12 + $13 + $14 + $15 }
    END { for (p in used) { q = p; while (q != "" && q != root && q > 1) q = parent[q]; if (q == root) t += used[p] }
          printf "%.0f", t / tick }'
}

base=http://127.0.0.1:$port
console='' listed='' firing='' console_cpu=''
while [[ -z $firing ]]; do
  if [[ -z $console ]] && [[ $(curl -s -o /dev/null -w '%{http_code}' "$base/console") == 200 ]]; then
    console=$(elapsed) console_cpu=$(cpu)
  fi
  if [[ -n $console ]]; then
    alerts=$(curl -s "$base/api/v1/alerts" || true)
    [[ -z $listed && $alerts == *'"rule"'* ]] && listed=$(elapsed)
    [[ $alerts == *'"state":"firing"'* ]] && firing=$(elapsed)
  fi
  if awk -v e="$(elapsed)" -v l="$limit" 'BEGIN { exit !(e > l) }'; then echo "gave up after ${limit} s" >&2; break; fi
  sleep 1
done
load=$(cut -d' ' -f1-3 /proc/loadavg)

phase() {  # the second of the first log line matching $1
  local at; at=$(grep -m1 -E "$1" "$log" | cut -d' ' -f1 || true); echo "${at:--}"
}
echo "venv created            $(phase 'installing Python dependencies') s   (python -m venv, apt checks)"
echo "pip done                $(phase "^[0-9.]+ (.*console's assets|console assets|\[lab\] |  >>> Open the console)") s"
echo "console assets done     $(phase 'console assets (fetched|already)') s   (npm pack, when missing)"
echo "lab up                  $(phase '\[lab\] cluster up') s"
echo "banner (daemon starts)  $(phase '>>> Open the console') s"
echo "console 200             ${console:--} s   (${console_cpu:--} CPU-s by then, every process of make run)"
echo "first alert listed      ${listed:--} s"
echo "first alert firing      ${firing:--} s"
echo "venv                    $(du -sh .venv | cut -f1)"
echo "load average            $load (at the end)"
echo "log                     $log"
