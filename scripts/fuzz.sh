#!/bin/sh
# fuzz.sh -- run libFuzzer harnesses one after another (`make fuzz`).
#
#   scripts/fuzz.sh BUILD_DIR SECONDS NAME...
#
# Runs BUILD_DIR/fuzz_NAME for SECONDS seconds each, one harness at a time
# and one fuzzing process (-fork=1: a worker restarted after each finding,
# so one run can report several; the machine is shared), on the working
# corpus BUILD_DIR/corpus/NAME (new inputs go there) seeded from
# tests/fuzz/corpus/NAME, with the dictionary tests/fuzz/NAME.dict.  A
# crash, leak, timeout or out-of-memory input is copied to
# tests/fuzz/regress/NAME/, where `make check` replays it from then on: fix
# the bug, then commit the input with the fix (an input whose bug belongs
# to someone else waits in tests/fuzz/known/NAME/, not replayed).  The log
# of each run is BUILD_DIR/NAME.log.  Prints, per harness, the executions,
# their rate and the coverage reached.
# Exit status: 0 no finding, 1 some harness found one, 2 usage.
set -eu

[ $# -ge 3 ] || { echo "usage: fuzz.sh BUILD_DIR SECONDS NAME..." >&2; exit 2; }
build=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
found=0
for name in "$@"; do
    bin=$build/fuzz_$name
    corpus=$build/corpus/$name
    crashes=$build/crashes/$name
    log=$build/$name.log
    mkdir -p "$corpus" "$crashes"
    rm -f "$crashes"/*
    dict=""
    [ -f "$here/tests/fuzz/$name.dict" ] && dict="-dict=$here/tests/fuzz/$name.dict"
    echo "fuzz $name: ${seconds}s (log $log)" >&2
    status=0
    # shellcheck disable=SC2086
    "$bin" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -artifact_prefix="$crashes/" $dict \
        "$corpus" "$here/tests/fuzz/corpus/$name" >"$log" 2>&1 || status=$?
    # The fork-mode parent's status lines: "#RUNS: cov: C ft: F corp: N
    # exec/s R oom/timeout/crash: a/b/c time: Ts job: J dft_time: 0".
    last=$(grep '^#[0-9]*: cov:' "$log" | tail -n 1)
    runs=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
    rate=$(echo "$last" | sed -n 's/.*exec\/s \([0-9]*\).*/\1/p')
    cov=$(echo "$last" | grep -o 'cov: [0-9]* ft: [0-9]*' || true)
    found_counts=$(echo "$last" | grep -o 'oom/timeout/crash: [0-9/]*' || true)
    echo "fuzz $name: ${runs:-?} executions (${rate:-?}/s), $cov, corpus $(ls "$corpus" | wc -l) inputs, $found_counts" >&2
    this=0
    for f in "$crashes"/*; do
        [ -e "$f" ] || continue
        mkdir -p "$here/tests/fuzz/regress/$name"
        cp "$f" "$here/tests/fuzz/regress/$name/"
        echo "fuzz $name: FOUND $(basename "$f") -> tests/fuzz/regress/$name/" >&2
        this=1 found=1
    done
    if [ "$status" != 0 ] && [ "$this" = 0 ]; then
        echo "fuzz $name: the fuzzer failed (exit $status); see $log" >&2
        found=1
    fi
done
exit "$found"
