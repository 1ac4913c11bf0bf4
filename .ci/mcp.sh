# Sourced by .ci/run: installs the official MCP reference server
# (@modelcontextprotocol/server-everything, pinned) with npm, and exports
# KIT_TEST_MCP_EVERYTHING, the command that starts it (the tests add `stdio` or
# `streamableHttp`). Installs Node.js from Debian's packages when absent.
if [ -n "${KIT_TEST_MCP_EVERYTHING:-}" ]; then
  return 0 2>/dev/null || exit 0
fi
MCP_EVERYTHING_VERSION=2026.8.31
MCP_DIR=/var/tmp/kit-ci-mcp
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
MCP_PKG="$MCP_DIR/node_modules/@modelcontextprotocol/server-everything"
if [ "$(node -p "require('$MCP_PKG/package.json').version" 2>/dev/null)" != "$MCP_EVERYTHING_VERSION" ]; then
  mkdir -p "$MCP_DIR"
  npm install --prefix "$MCP_DIR" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-everything@$MCP_EVERYTHING_VERSION" >/dev/null
fi
export KIT_TEST_MCP_EVERYTHING="node $MCP_PKG/dist/index.js"
