#!/usr/bin/env bash
# Installs the official MCP SDK clients that tests/it/sdk_clients.rs drives, all pinned:
#   - Python: PyPI `mcp` (requirements.txt) into tests/sdk/.venv, with the machine's python3;
#   - TypeScript: npm `@modelcontextprotocol/sdk` and `@modelcontextprotocol/client`
#     (package-lock.json) into tests/sdk/node_modules, with `npm ci`.
# Idempotent and quick when already installed (a stamp of the lock files skips the work).
# Usage: bash tests/sdk/setup.sh        (from anywhere; exits non-zero if an install fails)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

python="${PYTHON:-python3}"
stamp() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

# --- Python SDK ---
want="$(stamp requirements.txt)"
if [[ -x .venv/bin/python && "$(cat .venv/.strata-stamp 2>/dev/null)" == "$want" ]]; then
    echo "sdk setup: python venv up to date ($(.venv/bin/python -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))'))"
else
    echo "sdk setup: creating tests/sdk/.venv with $("$python" --version)"
    rm -rf .venv
    "$python" -m venv .venv
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input -r requirements.txt
    .venv/bin/python -c 'import mcp, importlib.metadata as m; print("sdk setup: installed mcp", m.version("mcp"))'
    echo "$want" > .venv/.strata-stamp
fi

# --- TypeScript SDK ---
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "sdk setup: node/npm not found: the TypeScript SDK clients are not installed" >&2
    exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if (( major < 20 )); then
    echo "sdk setup: node $(node --version) is too old, the TypeScript SDK needs >= 20" >&2
    exit 1
fi
want="$(stamp package.json package-lock.json)"
if [[ -d node_modules && "$(cat node_modules/.strata-stamp 2>/dev/null)" == "$want" ]]; then
    echo "sdk setup: node_modules up to date"
else
    echo "sdk setup: npm ci with node $(node --version)"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$want" > node_modules/.strata-stamp
fi
for pkg in sdk client; do
    node -p "'sdk setup: installed @modelcontextprotocol/$pkg ' + require('./node_modules/@modelcontextprotocol/$pkg/package.json').version"
done
