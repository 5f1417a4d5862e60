#!/usr/bin/env bash
# Runs every libFuzzer harness of a fuzz build (`make fuzz`), one after the other
# (docs/fuzzing.md).
#
#   usage: tests/fuzz/run_fuzzers.sh BUILD_DIR SEED_TOOL SECONDS [RUNS]
#
# Each harness runs for SECONDS seconds and keeps going after a finding, so that a long run
# collects them all. With RUNS, each harness instead runs RUNS inputs from a fixed random seed
# and stops at its first finding: the same code gives the same run, as CI wants.
#
# SEED_TOOL is make_fuzz_seeds of a main build (it compiles the seed networks, so it needs the
# whole compiler, which a fuzz build leaves out); it writes the seeds afresh into
# BUILD_DIR/fuzz/seeds. Each harness keeps its corpus in
# BUILD_DIR/fuzz/corpus/HARNESS from run to run, logs to BUILD_DIR/fuzz/logs/HARNESS.log and
# writes what this run found (crash-*, timeout-*, oom-*, leak-*) to
# BUILD_DIR/fuzz/findings/HARNESS/. Exits with 1 when any harness found something.
set -euo pipefail

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
    echo "usage: $0 BUILD_DIR SEED_TOOL SECONDS [RUNS]" >&2
    exit 2
fi
build=$1
seed_tool=$2
seconds=$3
runs=${4:-}
fuzz=$build/fuzz
# Undefined behaviour is fatal, except where tests/ubsan.supp says why not.
supp=$(cd "$(dirname "$0")/.." && pwd)/ubsan.supp
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Per input: a functional run of a seed blob takes well under a second.
input_timeout=20

if [ -n "$runs" ]; then
    limit="$runs runs"
    mode=(-runs="$runs" -seed=1)
else
    limit="$seconds s"
    # The fuzzing runs in a child process that is restarted after a finding.
    mode=(-max_total_time="$seconds" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi

rm -rf "$fuzz/seeds" "$fuzz/findings"
mkdir -p "$fuzz/logs"
"$seed_tool" "$fuzz/seeds"

found=0
# harness, seed directory, extra libFuzzer options
run() {
    local harness=$1 seeds=$2
    shift 2
    local corpus=$fuzz/corpus/$harness findings=$fuzz/findings/$harness
    mkdir -p "$corpus" "$findings"
    echo "fuzz: $harness for $limit (corpus $corpus)"
    "$build/tests/fuzz/$harness" "$corpus" "$fuzz/seeds/$seeds" "${mode[@]}" \
        -timeout="$input_timeout" -rss_limit_mb=4096 -artifact_prefix="$findings/" \
        -print_final_stats=1 "$@" > "$fuzz/logs/$harness.log" 2>&1 || true
    grep -E '^#[0-9]+' "$fuzz/logs/$harness.log" | tail -n 1 | sed 's/^/  /' || true
    local count
    count=$(find "$findings" -type f | wc -l)
    if [ "$count" -gt 0 ]; then
        echo "  $count finding(s) in $findings:"
        find "$findings" -type f | sort | sed 's/^/    /'
        found=1
    fi
}

# Blob mutations change sizes a lot: no gradual growth of the input length.
run fuzz_blob_timing blob -len_control=0
run fuzz_blob_functional blob_small -len_control=0
run fuzz_target_description target
run fuzz_schedule_chain schedule_chain
run fuzz_schedule_json schedule_json
run fuzz_schedules_file schedules_file
run fuzz_tensor_file tensor_file
run fuzz_onnx_import onnx

if [ "$found" -ne 0 ]; then
    echo "fuzz: findings above (logs in $fuzz/logs); docs/fuzzing.md says how to reproduce them"
    exit 1
fi
echo "fuzz: no findings"
