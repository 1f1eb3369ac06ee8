#!/usr/bin/env bash
# Installs the official MCP SDKs the SDK tests drive state-mcp with, into DIR (default
# target/sdk): a Python venv with tests/sdk/requirements.txt, and node_modules from
# tests/sdk/package-lock.json. Does nothing when DIR already holds what the pins ask for.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:-$here/../../target/sdk}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

stamp="$dir/.installed"
want="$(cat "$here/requirements.txt" "$here/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi

python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "setup.sh: $python is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup.sh: npm is not installed" >&2; exit 1; }

echo "setup.sh: installing the MCP Python SDK into $dir/venv" >&2
rm -rf "$dir/venv"
"$python" -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"

echo "setup.sh: installing the MCP TypeScript SDK into $dir/node" >&2
rm -rf "$dir/node"
mkdir -p "$dir/node"
cp "$here/package.json" "$here/package-lock.json" "$dir/node/"
(cd "$dir/node" && npm ci --silent --no-audit --no-fund)

echo "$want" > "$stamp"
