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
    # column 3: stepsize__; nominal eps from "# Step size = "; 200 uniform
    # draws on eps (0.7, 1.3) reach within 2% of both ends but for p ~ 1e-5
    awk -F, '/^# Step size = / { eps = $0; sub(/^# Step size = /, "", eps); next }
        /^#/ || /^lp__/ { next }
        { r = $3 / eps; n++; if (r < 0.7 || r > 1.3) bad++
          if (n == 1 || r < lo) lo = r; if (n == 1 || r > hi) hi = r }
        END { if (n != 200 || bad || lo > 0.71 || hi < 1.29)
                  { printf "n %d, outside %d, ratios %g .. %g\n", n, bad, lo, hi; exit 1 } }' \
        "$f" || fail "chain $c: stepsize__ not spread over eps (1 -+ 0.3)"
done
grep -q '"stepsize_jitter": 0.29999999999999999' "$CASE_TMP/d.csv.json" ||
    fail "stepsize_jitter not recorded in FILE.json"
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --stepsize-jitter 1 -o "$CASE_TMP/x.csv"
expect_exit 2
expect_stderr "^gmm-infer hmc: --stepsize-jitter: '1' is not a number in \[0, 1\)$"
expect_no_file "$CASE_TMP/x.csv"
