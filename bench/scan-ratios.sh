#!/usr/bin/env bash
# Runs the scan benchmark (benches/scan.rs) and prints throughput and the ratios the classifier
# is held to, from criterion's own output (target/criterion/scan_*/*/new/{estimates,benchmark}.json).
#
#   bench/scan-ratios.sh                 # run the benchmark (criterion defaults set in scan.rs)
#   bench/scan-ratios.sh --no-run        # only print the table from the last run
#   bench/scan-ratios.sh --measurement-time 5   # any other arguments go to criterion
#
# Targets (all in one run): strata >= 3x serde_json::Value on every body; strata >= IgnoredAny
# on every body; on the 16 MiB string-heavy body strata >= 20% of a plain memchr pass for a
# byte that never occurs (memchr_absent). Exit status 1 when a target is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--no-run" ]; then
    shift
else
    cargo bench --bench scan -- "$@"
fi
exec python3 - <<'PY'
import json, os, sys

root = os.environ.get("CARGO_TARGET_DIR", "target") + "/criterion"
order = ["tool_result_1k", "text_result_64k", "string_heavy_16m", "tools_list_4m", "sse_progress_32k"]
funcs = ["strata", "serde_value", "serde_ignored", "memchr_absent", "memchr_quotes"]

def load(body, func):
    d = os.path.join(root, "scan_" + body, func, "new")
    with open(os.path.join(d, "estimates.json")) as f:
        ns = json.load(f)["mean"]["point_estimate"]
    with open(os.path.join(d, "benchmark.json")) as f:
        tp = json.load(f).get("throughput") or {}
    n = tp.get("Bytes") or tp.get("BytesDecimal")
    return n, ns

def fmt(gbs):
    return f"{gbs:8.2f}" if gbs < 100 else f"{gbs:8.0f}"

rows, missed = [], []
print("throughput in GB/s (10^9 bytes/s), mean of criterion's samples")
print(f"{'body':18} {'bytes':>9} " + " ".join(f"{f:>13}" for f in funcs)
      + f" {'vs Value':>9} {'vs Ignored':>10} {'vs memchr':>9}")
for body in order:
    try:
        res = {f: load(body, f) for f in funcs}
    except FileNotFoundError:
        print(f"{body:18} (no results)")
        continue
    n = res["strata"][0]
    gbs = {f: n / ns for f, (_, ns) in res.items()}  # bytes per ns = GB/s
    v = gbs["strata"] / gbs["serde_value"]
    ig = gbs["strata"] / gbs["serde_ignored"]
    mc = gbs["strata"] / gbs["memchr_absent"]
    print(f"{body:18} {n:>9} " + " ".join(f"{fmt(gbs[f]):>13}" for f in funcs)
          + f" {v:8.1f}x {ig:9.2f}x {100*mc:8.1f}%")
    if v < 3:
        missed.append(f"{body}: {v:.2f}x the Value parse (target >= 3x)")
    if ig < 1:
        missed.append(f"{body}: {ig:.2f}x IgnoredAny (target >= 1x)")
    if body == "string_heavy_16m" and mc < 0.2:
        missed.append(f"{body}: {100*mc:.1f}% of memchr (target >= 20%)")
print()
if missed:
    print("MISSED:\n  " + "\n  ".join(missed))
    sys.exit(1)
print("all targets met")
PY
