#!/usr/bin/env bash
# The release build strata ships and is measured as: profile-guided (PGO). Three steps:
#   1. an instrumented build (target/pgo-gen/release/strata);
#   2. training: the proxy benchmark's loads through that build alone (`--train --quick`:
#      JSON and SSE calls at 1, 16 and 64 agents against the fixed upstream and the testbed,
#      SSE delivery, a large response, open streams; ~55 s) through four strata processes —
#      the default config, retries off, every call traced (OpenTelemetry export at ratio 1.0
#      to the harness's OTLP sink), an `https://` upstream — then the paths part's strata rows
#      (h2 prior knowledge, TLS agents with HTTP/1.1 and h2, an `https://` upstream, the
#      2025-era form, a body past the replay buffer, a 4 MiB tools/list), each process writing
#      its counts as it exits (the training fails if more than 1 % of any scenario's calls did);
#   3. the counts merged (llvm-profdata) and strata built again with them:
#      target/pgo/release/strata.
# Why: strata's hot path runs through large async state machines, the classifier and the
# call record, in 8 MB of code; without a profile LLVM lays cold blocks (error paths, retries,
# rare log events, unwinding) between hot ones and a call's code does not fit the instruction
# cache. With it: callgrind at 64 connections, 976 -> 154 I1 misses and 29.5k -> 24.1k
# instructions a call; the harness, CPU per call x0.86-0.91 (bench/README.md, "The PGO build").
#
#   bash bench/pgo.sh          # ~8 minutes on 2 cores; prints the binary's path
#
# Needs llvm-profdata (Debian: `apt-get install llvm-19`; or rustup's llvm-tools component);
# set LLVM_PROFDATA to choose one. The build's other flags come from .cargo/config.toml:
# cargo joins `--config build.rustflags` to them.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
gen="$target/pgo-gen"
out="$target/pgo"
raw="$out/raw"

# The newest one found: the raw format is the compiler's (rustc 1.95: LLVM 22), and an older
# llvm-profdata refuses a newer format (Debian's default `llvm`, 14, does; 19 reads it).
find_profdata() {
    if [ -n "${LLVM_PROFDATA:-}" ]; then echo "$LLVM_PROFDATA"; return; fi
    local sysroot tool
    sysroot="$(rustc --print sysroot)"
    tool="$(ls "$sysroot"/lib/rustlib/*/bin/llvm-profdata 2>/dev/null | head -1 || true)"
    if [ -n "$tool" ]; then echo "$tool"; return; fi
    tool="$(ls -d /usr/lib/llvm-*/bin/llvm-profdata 2>/dev/null | sort -V | tail -1 || true)"
    if [ -n "$tool" ]; then echo "$tool"; return; fi
    command -v llvm-profdata || true
}
profdata="$(find_profdata)"
if [ -z "$profdata" ]; then
    echo "pgo: llvm-profdata not found (apt-get install llvm-19, or rustup component add llvm-tools; or set LLVM_PROFDATA)" >&2
    exit 1
fi

echo "== pgo 1/3: instrumented build ($gen)"
rm -rf "$raw"
mkdir -p "$raw"
# Build scripts are instrumented too; their counts go to a directory nothing reads.
CARGO_TARGET_DIR="$gen" cargo build --release --bin strata \
    --config "build.rustflags=[\"-Cprofile-generate=$gen/build-scripts-profiles\"]"

echo "== pgo 2/3: training"
# Every strata process (the proxies, the testbed) writes its own file when it exits.
LLVM_PROFILE_FILE="$raw/strata-%p-%m.profraw" \
    cargo bench --bench proxy -- --train --quick --strata "$gen/release/strata"
ls "$raw"/strata-*.profraw >/dev/null 2>&1 || { echo "pgo: training wrote no profile" >&2; exit 1; }

echo "== pgo 3/3: merge ($profdata) and the optimised build ($out)"
"$profdata" merge -o "$out/strata.profdata" "$raw"/strata-*.profraw
CARGO_TARGET_DIR="$out" cargo build --release --bin strata \
    --config "build.rustflags=[\"-Cprofile-use=$out/strata.profdata\"]"
echo "pgo: built $out/release/strata"
