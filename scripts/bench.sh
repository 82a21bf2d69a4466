#!/bin/sh
# bench.sh -- the Python baselines of `make bench`, run after the C benchmarks.
#
#   GMM_INFER=build/release/gmm-infer [BENCH_QUICK=1] [BENCH_CSV=FILE] scripts/bench.sh
#
# - scripts/bench_ssm_baselines.py: statsmodels' Kalman filter, the exact dense
#   GP (LAPACK dpotrf, analytic gradient) and SciPy's banded Cholesky on the CO2
#   state-space model (matern32 + quasiperiodic, state dim 6), synthetic weekly
#   data; n = 1000, 3000, 10000 (BENCH_QUICK: n = 3000, shorter repeats).  When
#   `$GMM_INFER loglik --help` works, the same run also times `gmm-infer loglik`
#   as a whole process and checks its loglik and gradient against the dense GP.
#   With BENCH_CSV (the file the C benchmarks append to), it also times
#   statsmodels' loglik + score on tests/bench/bench_ssm.c's own data and
#   parameters at n = 3000 and appends ssm_loglik_grad,3000,<l>,statsmodels,<ms>
#   beside bench_ssm's gmm_default row (quick mode included).
# - scripts/bench_rcm.py: SciPy's reverse Cuthill-McKee on the shipped/shared
#   graphs, a scrambled 10x20 grid and (not in quick mode) a 1e6-node grid;
#   with `$GMM_INFER order --help` working, `gmm-infer order` on the same
#   graphs beside it, its bandwidth and profile recomputed from its permutation.
# - scripts/bench_glmer.R: `gmm-infer fit` of a 1e5-row Poisson model with
#   three covariates and a 1000-level iid term against lme4's glmer on the
#   same data, side by side with the ratio (BENCH_QUICK: 2e4 rows, 200
#   levels); skipped when Rscript or lme4 is missing.
#
# One BLAS thread throughout.  A subcommand the binary does not have yet is
# reported as 'skipped: ...', never a failure; a baseline that fails its own
# correctness checks is a failure.  PYTHON overrides the interpreter (default
# /usr/bin/python3, Debian's, which has python3-numpy/scipy/statsmodels).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

if [ -n "${PYTHON:-}" ]; then
    py=$PYTHON
elif [ -x /usr/bin/python3 ]; then
    py=/usr/bin/python3
else
    py=python3
fi
if ! "$py" -c 'import numpy, scipy, statsmodels' 2>/dev/null; then
    echo "bench.sh: $py lacks numpy, scipy or statsmodels: run scripts/install-deps.sh --bench as root" >&2
    exit 1
fi

if [ -n "${BENCH_QUICK:-}" ]; then
    sizes=3000 budget=0.3 rcm_quick=--quick
else
    sizes=1000,3000,10000 budget=1.0 rcm_quick=
fi

tool_opt=
gmm=${GMM_INFER:-}
if [ -z "$gmm" ]; then
    echo "skipped: gmm-infer timing (GMM_INFER not set)"
elif [ ! -x "$gmm" ]; then
    echo "skipped: gmm-infer timing ($gmm is not an executable)"
elif "$gmm" loglik --help >/dev/null 2>&1; then
    tool_opt=--gmm-infer=$gmm
else
    echo "skipped: gmm-infer loglik (not available in $gmm yet)"
fi

csv_opt=
if [ -n "${BENCH_CSV:-}" ]; then
    csv_opt=--csv=$BENCH_CSV
fi

echo "== state-space baselines (n = $sizes, 1 thread)"
# shellcheck disable=SC2086 # $tool_opt and $csv_opt are one word or none
"$py" "$here/bench_ssm_baselines.py" --sizes "$sizes" --budget "$budget" $tool_opt $csv_opt

echo "== reverse Cuthill-McKee (scipy)"
order_opt=
if [ -n "$gmm" ] && [ -x "$gmm" ]; then
    if "$gmm" order --help >/dev/null 2>&1; then
        order_opt=--gmm-infer=$gmm
    else
        echo "skipped: gmm-infer order (not available in $gmm yet)"
    fi
fi
# shellcheck disable=SC2086 # $rcm_quick and $order_opt are one word or none
"$py" "$here/bench_rcm.py" --budget "$budget" $rcm_quick $order_opt

echo "== formula fit against lme4's glmer"
if [ -z "$gmm" ] || [ ! -x "$gmm" ]; then
    echo "skipped: glmer comparison (no gmm-infer)"
elif ! Rscript -e 'suppressPackageStartupMessages(library(lme4))' >/dev/null 2>&1; then
    echo "skipped: glmer comparison (Rscript or lme4 missing: apt-get install r-cran-lme4)"
elif [ -n "${BENCH_QUICK:-}" ]; then
    Rscript "$here/bench_glmer.R" "$gmm" 20000 200
else
    Rscript "$here/bench_glmer.R" "$gmm"
fi

echo "== formula fits against glmmTMB and glmer, whole processes (VerbAgg, 1e5-row Poisson)"
if [ -z "$gmm" ] || [ ! -x "$gmm" ]; then
    echo "skipped: glmmTMB comparison (no gmm-infer)"
elif ! Rscript -e 'suppressPackageStartupMessages({library(lme4); library(glmmTMB)})' \
        >/dev/null 2>&1; then
    echo "skipped: glmmTMB comparison (Rscript, lme4 or glmmTMB missing: install-deps.sh --bench)"
elif [ -n "${BENCH_QUICK:-}" ]; then
    "$here/bench_glmm.sh" "$gmm" 20000
else
    "$here/bench_glmm.sh" "$gmm"
fi
