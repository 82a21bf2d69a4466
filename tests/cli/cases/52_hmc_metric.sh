# shellcheck shell=bash
# 52_hmc_metric.sh -- hmc --metric: auto's choice reported, the Laplace
# map's draws against the exact Gaussian posterior and against the prior
# map's draws on count data, the refusals.

coal="$ROOT/data/coal.csv"

# z-scores of the draws' means (summary $1) against reference means
# (column 2 of $2, a CSV of site,mean,var in f's order), the Monte-Carlo
# error sqrt(var / ess_bulk) with ess_bulk at most the draws' count $3;
# prints the worst |z| and exits 1 when it is 4.5 or more.
worst_z() {
    awk -F, -v N="$3" 'FNR == 1 { next }
        NR == FNR { m[FNR - 1] = $2; v[FNR - 1] = $3; next }
        $1 ~ /^f\[/ { i = substr($1, 3) + 0; ess = $9 < N ? $9 : N
                      z = ($2 - m[i]) / sqrt(v[i] / ess); if (z < 0) z = -z
                      if (z > w) w = z; k++ }
        END { printf "%.2f over %d\n", w, k; exit !(k > 0 && w < 4.5) }' "$2" "$1"
}

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
expect_no_stderr 'warning'
z=$(worst_z "$CASE_TMP/s.csv" "$CASE_TMP/exact.csv" 1000) || fail "means off the exact posterior: worst |z| $z"

begin "hmc on counts: the Laplace and prior maps' draws agree within Monte-Carlo error"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$CASE_TMP/coal.json"
expect_exit 0
for m in laplace prior; do
    run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --metric $m --chains 2 --warmup 300 \
        --draws 500 --quiet -o "$CASE_TMP/$m.csv" --summary "$CASE_TMP/$m-s.csv"
    expect_exit 0
    expect_stderr_empty
done
# the prior map's means and squared MC errors as the reference, the Laplace
# map's errors added: var / ess = var_l / ess_l + var_p / ess_p
awk -F, 'NR == 1 { print "site,mean,var"; next }
    $1 ~ /^f\[/ { ess = $9 < 1000 ? $9 : 1000; print substr($1, 3) + 0 "," $2 "," $4 * $4 / ess }' \
    "$CASE_TMP/prior-s.csv" > "$CASE_TMP/ref.csv"
z=$(awk -F, 'FNR == 1 { next }
    NR == FNR { m[$1] = $2; e2[$1] = $3; next }
    $1 ~ /^f\[/ { i = substr($1, 3) + 0; ess = $9 < 1000 ? $9 : 1000
                  z = ($2 - m[i]) / sqrt(e2[i] + $4 * $4 / ess); if (z < 0) z = -z
                  if (z > w) w = z; k++ }
    END { printf "%.2f over %d\n", w, k; exit !(k == 112 && w < 4.5) }' \
    "$CASE_TMP/ref.csv" "$CASE_TMP/laplace-s.csv") || fail "laplace and prior means differ: worst |z| $z"

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
