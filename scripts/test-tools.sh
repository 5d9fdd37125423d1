#!/usr/bin/env bash
# Installs the optional tools the tests use, the same way .ci/run does: the A2A and MCP Python
# SDKs (venvs under target/), server-everything (npm, under target/), and PostgreSQL, HAProxy, tmux and
# bubblewrap from Debian (as root, after apt-get update). Without them `cargo test --workspace`
# still passes: the tests that need one say SKIPPED (except under CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== A2A SDK for the interop tests"
# The official Python SDK (client and server) that the A2A tests talk to; pinned.
# Tests find it at target/a2a-venv (or $CADRE_A2A_VENV) and fail under CI=true without it.
A2A_VENV="${CADRE_A2A_VENV:-target/a2a-venv}"
A2A_PINS=("a2a-sdk[http-server]==1.3.0" "uvicorn==0.54.0")
if ! "$A2A_VENV/bin/python" -c 'import a2a, uvicorn, importlib.metadata as m; assert m.version("a2a-sdk") == "1.3.0"' 2>/dev/null; then
  python3 -m venv "$A2A_VENV"
  "$A2A_VENV/bin/pip" install -q --disable-pip-version-check "${A2A_PINS[@]}"
fi
"$A2A_VENV/bin/python" -c 'import importlib.metadata as m; print("a2a-sdk", m.version("a2a-sdk"))'
# The SDK of the v0.3 line, a client that reads only the old card shape; at $CADRE_A2A03_VENV
# or target/a2a-venv03.
A2A03_VENV="${CADRE_A2A03_VENV:-target/a2a-venv03}"
if ! "$A2A03_VENV/bin/python" -c 'import a2a, importlib.metadata as m; assert m.version("a2a-sdk") == "0.3.26"' 2>/dev/null; then
  python3 -m venv "$A2A03_VENV"
  "$A2A03_VENV/bin/pip" install -q --disable-pip-version-check "a2a-sdk==0.3.26"
fi
"$A2A03_VENV/bin/python" -c 'import importlib.metadata as m; print("a2a-sdk", m.version("a2a-sdk"))'

echo "== MCP reference server and Python SDK for the MCP tests"
# server-everything (npm) and the official Python SDK (`mcp`), pinned. Tests find them at
# target/mcp-npm and target/mcp-venv (or $CADRE_MCP_EVERYTHING / $CADRE_MCP_VENV) and fail
# under CI=true without them.
MCP_EVERYTHING_VERSION="2026.8.31"
MCP_NPM="target/mcp-npm"
if ! grep -qs "\"version\": \"$MCP_EVERYTHING_VERSION\"" "$MCP_NPM/node_modules/@modelcontextprotocol/server-everything/package.json"; then
  mkdir -p "$MCP_NPM"
  (cd "$MCP_NPM" && npm install --no-audit --no-fund --silent "@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION")
fi
MCP_VENV="${CADRE_MCP_VENV:-target/mcp-venv}"
if ! "$MCP_VENV/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "2.3.0"' 2>/dev/null; then
  python3 -m venv "$MCP_VENV"
  "$MCP_VENV/bin/pip" install -q --disable-pip-version-check "mcp==2.3.0"
fi
"$MCP_VENV/bin/python" -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))'

echo "== PostgreSQL (for the cadre-store tests, which start their own throwaway clusters)"
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y postgresql
fi

echo "== HAProxy (for the cluster test behind a load balancer, crates/cadre/tests/cluster_haproxy.rs)"
if ! command -v haproxy >/dev/null && [ ! -x /usr/sbin/haproxy ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y haproxy
fi

echo "== tmux (for the end-to-end test of the full-screen UI)"
if ! command -v tmux >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y tmux
fi
tmux -V

echo "== bubblewrap (for the sandbox tests of its backend)"
if ! command -v bwrap >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y bubblewrap
fi
bwrap --version

