# shellcheck shell=bash
# 52_hmc_metric.sh -- hmc --metric: auto's choice reported, the Laplace
# map's draws against the exact Gaussian posterior and against the prior
# map's draws on count data, the refusals.

coal="$ROOT/data/coal.csv"

begin "hmc --metric auto: laplace for informative counts, prior for weak ones, and says why"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$CASE_TMP/coal.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --chains 1 --warmup 20 --draws 5 \
    -o "$CASE_TMP/d.csv"
expect_exit 0
expect_stderr "^gmm-infer hmc: metric: laplace \(auto: the data's information is [0-9.e+]+ times the prior's in the stiffest direction, above 4\)$"
expect_file "$CASE_TMP/d.csv.json" '"metric": "laplace"'
# the Laplace map's step-size target, unless given
expect_file "$CASE_TMP/d.csv.json" '"target_accept": 0\.651000'
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --chains 1 --warmup 20 --draws 5 \
    --target-accept 0.9 --quiet -o "$CASE_TMP/d9.csv"
expect_exit 0
expect_file "$CASE_TMP/d9.csv.json" '"target_accept": 0\.9000'
awk 'BEGIN { print "x,y"; for (i = 1; i <= 40; i++) printf "%d,%d\n", i, (i % 9 == 0) }' \
    > "$CASE_TMP/weak.csv"
run "$GMM_INFER" hmc "$CASE_TMP/weak.csv" --x x --y y --likelihood poisson \
    --kernel 'matern32(variance=0.3, lengthscale=10)' --chains 1 --warmup 20 --draws 5 \
    -o "$CASE_TMP/w.csv"
expect_exit 0
expect_stderr "^gmm-infer hmc: metric: prior \(auto: the data's information is 0\.[0-9]+ times the prior's in the stiffest direction, at most 4\)$"
expect_file "$CASE_TMP/w.csv.json" '"metric": "prior"'
expect_file "$CASE_TMP/w.csv.json" '"target_accept": 0\.8000'
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --chains 1 --warmup 20 --draws 5 \
    --sample-hyper -o "$CASE_TMP/h.csv"
expect_exit 0
expect_stderr '^gmm-infer hmc: metric: prior \(auto: the hyperparameters are sampled\)$'

begin "hmc --metric laplace draws the exact Gaussian posterior"
awk 'BEGIN { print "x,y"; for (i = 1; i <= 60; i++) printf "%d,%.6f\n", i, sin(i / 8) + 0.3 * sin(7 * i) }' \
    > "$CASE_TMP/g.csv"
run "$GMM_INFER" fit "$CASE_TMP/g.csv" --x x --y y --kernel 'matern32(variance=1, lengthscale=10)' \
    --likelihood 'gaussian(variance=0.1)' --fix 0.matern32.variance \
    --fix 0.matern32.lengthscale --fix likelihood.variance -o "$CASE_TMP/g.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/g.json" -o "$CASE_TMP/exact.csv"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/g.json" --metric laplace --chains 2 --warmup 300 \
    --draws 500 -o "$CASE_TMP/d.csv" --summary "$CASE_TMP/s.csv"
expect_exit 0
expect_stderr '^gmm-infer hmc: metric: laplace$'
# No warning: the whitened target is exactly N(0, I), where the leapfrog cannot
# diverge below the step size 2; over 10 seeds every tree had depth 3 (not 10)
# and E-BFMI was 0.91-1.25 per chain (sd 0.09: 0.3 is 8 sd off).
expect_no_stderr 'warning'
# the 60 rows' means within Monte Carlo error: mc_means, 60 x 3e-9 = 1.8e-7
awk -F, 'NR == 1 { print "row,mean,var"; next } { print NR - 1 "," $2 "," $3 }' \
    "$CASE_TMP/exact.csv" > "$CASE_TMP/ref.csv"
z=$(mc_means "$CASE_TMP/s.csv" "$CASE_TMP/ref.csv" 6.5 1000) || fail "means off the exact posterior: $z"

begin "hmc on counts: the Laplace and prior maps' draws agree within Monte-Carlo error"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$CASE_TMP/coal.json"
expect_exit 0
# No warning, quiet or not (stderr empty): over 10 seeds both maps' trees had
# depth 3 (laplace) and 5 (prior) at every draw, not 10, E-BFMI 0.86-1.23 per
# chain (sd 0.08: 0.3 is 9 sd off), no divergence.
for m in laplace prior; do
    run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --metric $m --chains 2 --warmup 300 \
        --draws 500 --quiet -o "$CASE_TMP/$m.csv" --summary "$CASE_TMP/$m-s.csv"
    expect_exit 0
    expect_stderr_empty
done
# the Laplace map's 112 means against the prior map's, both within Monte Carlo
# error: mc_means, 112 x 3e-9 = 3.4e-7
awk -F, 'NR == 1 { print "site,mean,var,ess"; next }
    $1 ~ /^f\[/ { print $1 "," $2 "," $4 * $4 "," $9 }' "$CASE_TMP/prior-s.csv" > "$CASE_TMP/ref.csv"
z=$(mc_means "$CASE_TMP/laplace-s.csv" "$CASE_TMP/ref.csv" 6.5 1000) ||
    fail "laplace and prior means differ: $z"
[[ $z == *" over 112" ]] || fail "laplace and prior means: $z, expected 112 rows"

begin "hmc --metric: laplace refused with --sample-hyper, unknown names refused"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel matern32 --metric laplace \
    --sample-hyper -o "$CASE_TMP/x.csv"
expect_exit 2
expect_stderr '^gmm-infer hmc: --metric laplace holds the hyperparameters at the model.s values: it cannot be used with --sample-hyper \(use --metric prior\)$'
expect_no_file "$CASE_TMP/x.csv"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel matern32 --metric fisher \
    -o "$CASE_TMP/x.csv"
expect_exit 2
expect_stderr "^gmm-infer hmc: --metric: 'fisher' is not laplace, prior or auto$"
expect_no_file "$CASE_TMP/x.csv"
