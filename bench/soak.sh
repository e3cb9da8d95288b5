#!/usr/bin/env bash
# The full soak: 100,000 calls at 64 concurrent through the release strata
# binary, every testbed scenario in both protocol eras, JSON and SSE, HTTP/1.1 and h2 agents.
# Prints the summary table and exits non-zero when anything was lost, changed or leaked.
#
#   bash bench/soak.sh                       # 100,000 calls
#   STRATA_SOAK_CALLS=300000 bash bench/soak.sh
#
# Other knobs (tests/soak/main.rs): STRATA_SOAK_CONCURRENCY, STRATA_SOAK_TRANSPORT=h1|h2,
# STRATA_SOAK_ONLY=tool,method (a subset of the mix), STRATA_SOAK_LOG=FILE (keep strata's log),
# STRATA_SOAK_HEAPTRACK=FILE (strata under heaptrack). Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== build (release: the strata binary and the soak driver)" >&2
cargo build --release --quiet
cargo test --release --quiet --test soak --no-run

echo "== soak (${STRATA_SOAK_CALLS:-100000} calls)" >&2
# --nocapture shows the table; the test prints it before its assertions, so a failure shows it too.
cargo test --release --quiet --test soak -- --ignored --exact soak_full --nocapture
