#!/usr/bin/env bash
# Installs mitmproxy (PyPI, pinned in requirements.txt) into tests/capture/.venv, for
# tests/it/classify_capture.rs: MCP SDK traffic recorded as HAR by `mitmdump --set hardump=…`.
# A venv of its own: mitmproxy pins older h11 and cryptography than the MCP SDK's venv
# (tests/sdk/.venv) holds, and installing it there would change what the SDK tests run.
# Idempotent and quick when already installed (a stamp of requirements.txt skips the work).
# Usage: bash tests/capture/setup.sh      (from anywhere; exits non-zero if the install fails)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

python="${PYTHON:-python3}"
want="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [[ -x .venv/bin/mitmdump && "$(cat .venv/.strata-stamp 2>/dev/null)" == "$want" ]]; then
    echo "capture setup: mitmproxy venv up to date ($(.venv/bin/mitmdump --version | head -1))"
    exit 0
fi
echo "capture setup: creating tests/capture/.venv with $("$python" --version)"
rm -rf .venv
"$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input -r requirements.txt
echo "capture setup: installed $(.venv/bin/mitmdump --version | head -1)"
echo "$want" > .venv/.strata-stamp
