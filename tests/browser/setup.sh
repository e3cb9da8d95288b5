#!/usr/bin/env bash
# Installs what tests/browser/page.test.mjs needs, from Debian and npm only:
#   - Debian's `chromium` (apt), the headless browser;
#   - npm `puppeteer-core` (pinned by package-lock.json) into tests/browser/node_modules with
#     `npm ci`; PUPPETEER_SKIP_DOWNLOAD=1, so no browser of its own is fetched.
# Idempotent and quick when already installed (a stamp of the lock files skips `npm ci`).
# Usage: bash tests/browser/setup.sh        (from anywhere; exits non-zero if an install fails)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

apt_install() {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! command -v chromium >/dev/null; then
    echo "browser setup: installing Debian's chromium"
    apt_install chromium
fi
echo "browser setup: $(chromium --version 2>/dev/null | head -n1)"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "browser setup: installing Debian's nodejs and npm"
    apt_install nodejs npm
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if (( major < 18 )); then
    echo "browser setup: node $(node --version) is too old, puppeteer-core needs >= 18" >&2
    exit 1
fi

stamp() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }
want="$(stamp package.json package-lock.json)"
if [[ -d node_modules && "$(cat node_modules/.strata-stamp 2>/dev/null)" == "$want" ]]; then
    echo "browser setup: node_modules up to date"
else
    echo "browser setup: npm ci with node $(node --version)"
    PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
    echo "$want" > node_modules/.strata-stamp
fi
node -p "'browser setup: installed puppeteer-core ' + require('./node_modules/puppeteer-core/package.json').version"
