#!/usr/bin/env bash
# The classifier's speed targets, measured interleaved (benches/scan_ratios.rs): each round runs
# strata, serde_json::Value, serde::de::IgnoredAny and a memchr pass on each body for a short
# slice, in turn; each keeps its best round. Prints GB/s and the ratios; exits 1 when a target
# is missed.
#
#   bench/scan-ratios.sh                    # 25 rounds of 25 ms slices (about a minute)
#   bench/scan-ratios.sh tools_list sse     # only the bodies whose names contain these
#   STRATA_SCAN_ROUNDS=21 bench/scan-ratios.sh
#
# Targets (all in one run): strata >= 3x serde_json::Value on every body; strata >= IgnoredAny
# on every body; on the 16 MiB string-heavy body strata >= 20% of a plain memchr pass for a
# byte that never occurs. `cargo bench --bench scan` (criterion) gives the distributions.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --bench scan_ratios -- "$@"
