#!/bin/sh
# bench_stan.sh -- gmm-infer hmc against Stan on the influenza and Chicago
# graphs (docs/benchmarks.md, "HMC"): installs the benchmark's Debian
# packages (scripts/install-deps.sh --bench: r-cran-rstan among them), builds
# gmm-infer and runs scripts/bench_stan.R, which prints the table of docs/benchmarks.md.
#
#   scripts/bench_stan.sh [--out DIR] [--chains K] [--warmup W] [--draws D]
#                         [--cases flu,chicago,flu-hyper]
#
# `make bench` runs it (BENCH_QUICK=1: the fixed cases, 4 x (300 + 300)).
# About 15 minutes with the defaults (4 chains x 1000 + 1000, one core) on a
# quiet machine, most of it Stan on flu-hyper (the fixed cases: 3 minutes,
# two Stan compilations of about 30 s among them); the draws, summaries and
# results.csv go to DIR (default bench-stan).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh --bench
make -j2 gmm-infer >&2
# one BLAS thread: OpenBLAS workers spinning beside the samplers would count
# as their CPU time
export OPENBLAS_NUM_THREADS=1
exec Rscript scripts/bench_stan.R --gmm-infer ./gmm-infer "$@"
