#!/usr/bin/env bash
# The serving figures of docs/performance.md: starts `specula-cli serve` on the demo pair (CPU
# backend) on a free loopback port, runs `bench-serve` at n = 1 and 8 with four clients at a
# time and with one, three runs each, and prints the load average before and after: the
# figures mean something only when the machine was quiet throughout.
#
# Usage: tools/bench/serve.sh [SPECULA_CLI]   (default: build/app/specula-cli)
set -euo pipefail
cli=${1:-build/app/specula-cli}
log=$(mktemp)
"$cli" serve --device cpu --port 0 --max-queue 16 >"$log" 2>/dev/null &
server=$!
trap 'kill "$server" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 600); do
  grep -q 'listening on' "$log" && break
  sleep 0.1
done
url=$(grep -o 'http://[0-9.]*:[0-9]*' "$log") || { echo "serve did not start" >&2; exit 1; }
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores, $(date -u +%F)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for concurrency in 4 1; do
  for run in 1 2 3; do
    echo "run $run, $concurrency at a time:"
    "$cli" bench-serve --remote "$url" --n 1 8 --requests 16 --concurrency "$concurrency" --max-tokens 64
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
