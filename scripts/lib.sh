# Shared by the scripts in this folder: paths, pinned versions, offline
# switches. Source it; it does nothing on its own.

QG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export QG_ROOT

# Pinned tool versions. wasm-bindgen-cli must equal the wasm-bindgen crate
# pinned in Cargo.toml. WORKERS_RS_VERSION is no tool: it is the workers-rs
# release (`worker`, `worker-macros`) whose worker-build 0.8.7 steps
# scripts/build-worker takes and whose glue worker/entry.js calls.
WASM_BINDGEN_VERSION="0.2.130"
WORKERS_RS_VERSION="0.8.7"
# The aarch64 release build: cargo-zigbuild links with Zig's C toolchain
# (ring compiles C for its target; Debian has no aarch64 musl compiler),
# both from their PyPI wheels in the per-machine venv (the wheel's binary
# installs in seconds; building it from the crate registry took minutes).
CARGO_ZIGBUILD_VERSION="0.24.0"
ZIGLANG_VERSION="0.17.0"
# The release's software bills of materials (CycloneDX).
CARGO_CYCLONEDX_VERSION="0.5.9"
QG_VENV="${QUEUEGATE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/queuegate/venv}"

# Tools we install with cargo live in a cache outside the checkout, so fresh
# clones on the same machine reuse them.
QG_TOOLS="${QUEUEGATE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/queuegate/tools}"
export QG_TOOLS
export PATH="$QG_TOOLS/bin:$HOME/.cargo/bin:$PATH"

# The wasm tools scripts/build-worker runs (none is downloaded at build time).
export WASM_BINDGEN_BIN="$QG_TOOLS/bin/wasm-bindgen"
export WASM_OPT_BIN="$QG_ROOT/node_modules/.bin/wasm-opt"
export ESBUILD_BIN="$QG_ROOT/node_modules/.bin/esbuild"

# wrangler must never reach remote hosts here.
export WRANGLER_SEND_METRICS=false
export WRANGLER_SEND_ERROR_REPORTS=false
export WRANGLER_HIDE_BANNER=true
export CLOUDFLARE_CF_FETCH_ENABLED=false

# What ships or is installed (the wasm, the release binaries, the cargo
# tools) is compiled by rustc alone, the same way whoever calls: the lint
# driver and the incremental setting scripts/test exports for its debug
# build must not reach it (they would lint foreign code, and change the
# fingerprint, so a build from scripts/test and one by hand would rebuild
# each other's). scripts/bootstrap, build-worker and release call this.
rustc_alone() { unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS CARGO_INCREMENTAL; }

# Each step says how far into the run it starts ([m:ss] since the first
# script sourced this file), so a CI log shows where the time goes.
QG_STARTED="${QG_STARTED:-$(date +%s)}"
export QG_STARTED
say() {
  local t=$(($(date +%s) - QG_STARTED))
  printf '\033[1m==> [%d:%02d] %s\033[0m\n' $((t / 60)) $((t % 60)) "$*"
}
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
