#!/usr/bin/env bash
# The whole-proxy benchmark: strata beside a direct connection, nginx and HAProxy in TCP mode
# (the layer-4 floor, when installed), in one run, interleaved, on loopback (benches/proxy/,
# bench/README.md). Builds the release binary as it
# ships — profile-guided, bench/pgo.sh — runs the classifier benchmarks (criterion for the
# table, bench/scan-ratios.sh for the verdict) unless told not to, then the proxy harness,
# which prints one table and writes it as JSON under target/bench/ (proxy-last.json is
# compared with the next run).
#
#   bash bench/proxy.sh               # everything, about 20 minutes on 2 cores (8 of them the build)
#   bash bench/proxy.sh --quick       # smoke test: seconds per part, no classifier bench, plain build
#   bash bench/proxy.sh --no-scan     # skip the classifier benchmark
#   bash bench/proxy.sh --no-pgo      # measure a plain `cargo build --release` instead
#   bash bench/proxy.sh --only load --agents 64 --rounds 3   # a part (load, testbed, sse,
#                                     # big, streams, telemetry, inspector, limits, keys, wrk,
#                                     # paths) and other harness options
#   bash bench/proxy.sh --only limits # a limits.calls rule that never refuses, and the circuit,
#                                     # against no limits: CPU per call and added latency
#   bash bench/proxy.sh --only keys --baseline OLD_BIN   # Idempotency-Key calls on the memory
#                                     # and Redis stores against calls without a key, the Redis
#                                     # ones also through OLD_BIN; needs redis-server (started on
#                                     # a free loopback port, ended by PID)
#   bash bench/proxy.sh --only wrk    # the fixed JSON scenario through wrk (Debian's; WRK=PATH)
#                                     # beside the harness's own load generator
#   bash bench/proxy.sh --only paths  # h2 and TLS agents, an https:// upstream, the 2025 form,
#                                     # keyed calls, a 503 retried, a body past the replay buffer,
#                                     # a 4 MiB tools/list: strata, nginx, and HAProxy in TCP mode
#                                     # as the layer-4 floor (Debian's haproxy; HAPROXY=PATH; its
#                                     # rows are left out without it)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
scan=1
pgo=1
strata=""
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --no-scan) scan=0 ;;
        --no-pgo) pgo=0 ;;
        --quick) scan=0; pgo=0; args+=("$1") ;;
        --strata) strata="${2:?--strata needs a path}"; shift ;;
        *) args+=("$1") ;;
    esac
    shift
done
nginx="${NGINX:-/usr/sbin/nginx}"
[ -x "$nginx" ] || { echo "nginx not found at $nginx (apt-get install nginx-light, or set NGINX)" >&2; exit 1; }
haproxy="${HAPROXY:-/usr/sbin/haproxy}"
[ -x "$haproxy" ] || echo "haproxy not found at $haproxy: the paths part runs without its layer-4 rows (apt-get install haproxy, or set HAPROXY)" >&2
wrk="${WRK:-/usr/bin/wrk}"
[ -x "$wrk" ] || echo "wrk not found at $wrk: no cross-check with an outside load generator (apt-get install wrk, or set WRK)" >&2
# 5,000 open streams need ~10,000 descriptors in the proxy and 5,000 in the generator.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ -n "$strata" ]; then
    build=given   # a binary named on the command line, measured as it is
elif [ "$pgo" = 1 ]; then
    bash bench/pgo.sh
    strata="$target/pgo/release/strata"
    build=pgo
else
    cargo build --release --bin strata
    strata="$target/release/strata"
    build=plain
fi
if [ "$scan" = 1 ]; then
    # criterion's JSON feeds the table below; the interleaved ratios give the verdict.
    cargo bench --bench scan
    bash bench/scan-ratios.sh || true   # exits 1 when its own targets are missed
    args+=(--scan "$target/criterion")
fi
exec cargo bench --bench proxy -- --strata "$strata" --build "$build" --nginx "$nginx" --haproxy "$haproxy" \
    --wrk "$wrk" --out "$target/bench" "${args[@]}"
