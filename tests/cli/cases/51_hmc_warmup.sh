# shellcheck shell=bash
# 51_hmc_warmup.sh -- hmc without warm-up: the step size from Stan's initial
# search, draws that move; --target-accept refused where it does nothing;
# --stepsize-jitter.

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
# Over 30 seeds: step size 0.25 (the search halves from 1), mean accept_stat
# 0.927-0.937, every f[1] distinct, no divergence or warning.  False failures:
# accept < 0.6 is > 100 sd off; >= 40 repeated draws of 400 has P < 1e-60
# even if a transition stayed put with probability 1e-3 (4 x the 95% bound
# from 0 in 12000); a divergence (energy error > 1000) needs an unstable
# leapfrog, the whitened Hessian (~I at the mode) 64-fold (2 / 0.25)^2, i.e.
# exp(f) 64-fold, f some 20 posterior sd from the mode; the other warnings
# need trees of depth 10 (the U-turn comes after ~pi / 0.25 steps) or an
# E-BFMI below 0.3 (~1 here, its sd over 200 draws ~0.1).
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

begin "hmc --stepsize-jitter J: after warm-up each step size drawn from eps (1 -+ J); recorded"
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson --exposure exposure \
    --kernel matern32 -o "$CASE_TMP/coal.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --chains 2 --warmup 200 --draws 200 \
    --stepsize-jitter 0.3 --format cmdstan --quiet -o "$CASE_TMP/d.csv"
expect_exit 0
for c in 1 2; do
    f=$CASE_TMP/d_$c.csv
    grep -qx '#         stepsize_jitter = 0.29999999999999999' "$f" ||
        fail "chain $c: no stepsize_jitter = 0.3 in the CmdStan header"
    # column 3: stepsize__; nominal eps from "# Step size = ".  The ratios
    # lie in [0.7, 1.3] and 200 uniform ones reach within 0.6 q = 0.045 of
    # both ends: a false failure per end and chain (1 - q)^200 = 0.925^200 =
    # 1.7e-7, 6.8e-7 for the four
    awk -F, '/^# Step size = / { eps = $0; sub(/^# Step size = /, "", eps); next }
        /^#/ || /^lp__/ { next }
        { r = $3 / eps; n++; if (r < 0.7 || r > 1.3) bad++
          if (n == 1 || r < lo) lo = r; if (n == 1 || r > hi) hi = r }
        END { if (n != 200 || bad || lo > 0.745 || hi < 1.255)
                  { printf "n %d, outside %d, ratios %g .. %g\n", n, bad, lo, hi; exit 1 } }' \
        "$f" || fail "chain $c: stepsize__ not spread over eps (1 -+ 0.3)"
done
grep -q '"stepsize_jitter": 0.29999999999999999' "$CASE_TMP/d.csv.json" ||
    fail "stepsize_jitter not recorded in FILE.json"
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --stepsize-jitter 1 -o "$CASE_TMP/x.csv"
expect_exit 2
expect_stderr "^gmm-infer hmc: --stepsize-jitter: '1' is not a number in \[0, 1\)$"
expect_no_file "$CASE_TMP/x.csv"
