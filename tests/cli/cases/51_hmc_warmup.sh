# shellcheck shell=bash
# 51_hmc_warmup.sh -- hmc without warm-up: the step size from Stan's initial
# search, draws that move; --target-accept refused where it does nothing.

begin "hmc --warmup 0 searches a step size: no divergences, draws that move"
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson --exposure exposure \
    --kernel matern32 -o "$CASE_TMP/coal.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --warmup 0 --draws 200 --chains 2 \
    -o "$CASE_TMP/d.csv"
expect_exit 0
expect_no_stderr 'divergent transitions:|warning'
expect_stderr '^gmm-infer hmc: chain 1: step size 0\.[0-9]+, 0 divergent transitions$'
# columns: .chain,.iteration,.draw,lp__,accept_stat__,stepsize__,treedepth__,
# n_leapfrog__,divergent__,energy__,f[1]
awk -F, 'NR == 1 { next }
    { n++; acc += $5; div += $9; if (!($6 > 0 && $6 < 1)) bad = 1
      if (!(($1, $11) in seen)) distinct++; seen[$1, $11] = 1 }
    END { if (bad || div || distinct < 0.9 * n || acc / n < 0.6)
              { printf "n %d, distinct f[1] %d, divergent %d, mean accept %.3f\n",
                       n, distinct, div, acc / n; exit 1 } }' "$CASE_TMP/d.csv" ||
    fail "hmc --warmup 0: draws stuck, divergent or a step size outside (0, 1)"

begin "hmc --target-accept is refused with --warmup 0 (it adapts in warm-up only)"
run "$GMM_INFER" hmc "$ROOT/data/coal.csv" --likelihood poisson --warmup 0 --target-accept 0.95 \
    -o "$CASE_TMP/x.csv"
expect_exit 2
expect_stderr '^gmm-infer hmc: --target-accept adapts the step size during warm-up: it does nothing with --warmup 0$'
expect_no_file "$CASE_TMP/x.csv"
