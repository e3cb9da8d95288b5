#!/usr/bin/env bash
# Runs one official MCP SDK client against an MCP endpoint and prints what it surfaced, as JSON.
#
#   bash tests/sdk/run.sh CLIENT URL [client options]   e.g. ... python http://127.0.0.1:8000/mcp
#   bash tests/sdk/run.sh --check CLIENT                 exit 0 if CLIENT is installed, else 3
#   bash tests/sdk/run.sh --list                         the CLIENT names
#
# CLIENT is one of:
#   python     PyPI `mcp` (python_client.py): legacy and 2026-07-28 eras
#   ts-sdk     npm `@modelcontextprotocol/sdk` v1 (ts_client.mjs --package sdk): legacy era
#   ts-client  npm `@modelcontextprotocol/client` v2 (ts_client.mjs --package client): both eras
# Install them with setup.sh. The client's own diagnostics go to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
clients=(python ts-sdk ts-client)

installed() {
    case "$1" in
        python) [[ -x "$here/.venv/bin/python" ]] && "$here/.venv/bin/python" -c 'import mcp' 2>/dev/null ;;
        ts-sdk) command -v node >/dev/null && [[ -f "$here/node_modules/@modelcontextprotocol/sdk/package.json" ]] ;;
        ts-client) command -v node >/dev/null && [[ -f "$here/node_modules/@modelcontextprotocol/client/package.json" ]] ;;
        *) echo "unknown client '$1' (one of: ${clients[*]})" >&2; return 2 ;;
    esac
}

case "${1:-}" in
    --list) printf '%s\n' "${clients[@]}"; exit 0 ;;
    --check)
        if installed "${2:?--check needs a CLIENT}"; then exit 0; fi
        echo "$2 is not installed: run 'bash tests/sdk/setup.sh'" >&2
        exit 3 ;;
    ""|-h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac

client="$1"; url="${2:?usage: run.sh CLIENT URL [options]}"; shift 2
if ! installed "$client"; then
    echo "$client is not installed: run 'bash tests/sdk/setup.sh'" >&2
    exit 3
fi
case "$client" in
    python) exec "$here/.venv/bin/python" "$here/python_client.py" "$url" "$@" ;;
    ts-sdk) exec node "$here/ts_client.mjs" "$url" --package sdk "$@" ;;
    ts-client) exec node "$here/ts_client.mjs" "$url" --package client "$@" ;;
esac
