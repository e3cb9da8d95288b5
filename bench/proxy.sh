#!/usr/bin/env bash
# The whole-proxy benchmark: strata beside a direct connection and nginx, in one run,
# interleaved, on loopback (benches/proxy/, bench/README.md). Builds the release binary, runs
# the classifier benchmarks (criterion for the table, bench/scan-ratios.sh for the verdict) unless told not to, then the proxy harness,
# which prints one table and writes it as JSON under target/bench/ (proxy-last.json is
# compared with the next run).
#
#   bash bench/proxy.sh               # everything, about 6 minutes on 2 cores
#   bash bench/proxy.sh --quick       # smoke test: seconds per part, no classifier bench
#   bash bench/proxy.sh --no-scan     # skip the classifier benchmark
#   bash bench/proxy.sh --only load --agents 64 --rounds 3   # a part (load, testbed, sse,
#                                     # big, streams) and other harness options
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
scan=1
args=()
for a in "$@"; do
    case "$a" in
        --no-scan) scan=0 ;;
        --quick) scan=0; args+=("$a") ;;
        *) args+=("$a") ;;
    esac
done
nginx="${NGINX:-/usr/sbin/nginx}"
[ -x "$nginx" ] || { echo "nginx not found at $nginx (apt-get install nginx-light, or set NGINX)" >&2; exit 1; }
# 5,000 open streams need ~10,000 descriptors in the proxy and 5,000 in the generator.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cargo build --release --bin strata
if [ "$scan" = 1 ]; then
    # criterion's JSON feeds the table below; the interleaved ratios give the verdict.
    cargo bench --bench scan
    bash bench/scan-ratios.sh || true   # exits 1 when its own targets are missed
    args+=(--scan "$target/criterion")
fi
exec cargo bench --bench proxy -- --strata "$target/release/strata" --nginx "$nginx" \
    --out "$target/bench" "${args[@]}"
