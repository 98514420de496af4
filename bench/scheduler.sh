#!/usr/bin/env bash
# Scheduler benchmark: builds the scheduler and its bench example with the
# release-native profile, prints the machine, then runs the bench (which
# starts its own redis-server on a free port). Pass --quick for a smoke run,
# --part rate|admit|failover for one part. Results: docs/benchmarks/scheduler.md.
#   bench/scheduler.sh [--quick] [--part NAME]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --quiet --profile release-native -p queuegate-scheduler --bins --examples
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(redis-server --version | cut -d' ' -f1-3)"
echo "command: bench/scheduler.sh $*"
"$target/release-native/examples/bench" "$@"
