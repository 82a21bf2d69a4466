# shellcheck shell=bash
# 58_formula_mrf.sh -- the besag term against mgcv 1.8-41's Markov random field smooth
# (s(region, bs = "mrf"), method = "ML") and a dense Laplace computation, on the committed
# fixtures of scripts/make-mrf-fixtures.R (a 4 x 4 lattice with a chord, three rows per region
# so that mgcv's centring constraint is the sum-to-zero over nodes; see there for why the
# conventions then coincide and for the variance conversion v = c phi / lambda).
#   Gaussian: the maximised log likelihood, intercept, coefficient, region variance, noise
#   variance and the linear predictor at every data row (predict) equal mgcv's.
#   Poisson: the same against the dense Laplace maximised over (coefficients, variance) by R's
#   optim; and the Laplace log likelihood at mgcv's own estimates equals mgcv's ML score (mgcv
#   evaluates the same Laplace formula but at the joint penalised mode of the coefficients, so
#   its maximiser is not ours).
# Tolerances: fit stops at a gradient norm <= 1e-5 on the log-variance and coefficient scale,
# mgcv's Newton at 1e-10 and optim at a relative change of 1e-15, so the parameters agree to
# about 1e-5 / (the smallest curvature, > 0.1 here): 1e-4 relative; the maxima's values to
# second order: 1e-8 absolute; the linear predictor, a smooth function of the parameters, to
# 1e-5.  Measured: loglik 3e-13, parameters <= 2.2e-7 relative, linear predictor <= 7e-8.
# Sourced by tests/cli/run.sh (see there for the helpers).

mfx="$ROOT/tests/fixtures/mrf"
mrf_formula="y ~ x + f(region, besag, graph=tests/fixtures/mrf/edges.csv)"

mrf_ref() { awk -F, -v k="$2" '$1 == k { print $2 }' "$1"; }
# Compare model $1 (fitted) and predict's output $2 with reference table $3.
mrf_against() {
    local p got want
    got=$(json_num "$1" loglik); want=$(mrf_ref "$3" loglik)
    close_to "$got" "$want" 1e-8 abs || fail "$3: loglik $got, reference $want"
    for p in intercept coef.x f.region.variance ${4:-}; do
        got=$(json_num "$1" "$p"); want=$(mrf_ref "$3" "$p")
        close_to "$got" "$want" 1e-4 || fail "$3: $p $got, reference $want"
    done
    # predict's mean at row r against eta:r
    awk -F, 'NR == FNR { if ($1 ~ /^eta:/) { sub(/^eta:/, "", $1); e[$1] = $2; n++ }; next }
             FNR > 1 && ($1 in e) { d = $2 - e[$1]; if (d < 0) d = -d; if (d > 1e-5) bad++; seen++ }
             END { exit !(n == 48 && seen == n && !bad) }' "$3" "$2" ||
        fail "$3: predict's means differ from the reference's linear predictor by more than 1e-5"
}

begin "besag + covariate, Gaussian: the ML fit equals mgcv's mrf smooth (method = \"ML\")"
run "$GMM_INFER" fit --formula "$mrf_formula" -o "$CASE_TMP/m.json" "$mfx/gauss.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
mrf_against "$CASE_TMP/m.json" "$OUT" "$mfx/gauss_ref.csv" likelihood.variance

begin "besag + covariate, Poisson: the maximised Laplace fit equals the dense Laplace's maximum"
run "$GMM_INFER" fit --formula "$mrf_formula" --likelihood poisson -o "$CASE_TMP/m.json" \
    "$mfx/pois.csv"
expect_exit 0
cp "$CASE_TMP/m.json" "$WORK/mrf-pois.json"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
mrf_against "$CASE_TMP/m.json" "$OUT" "$mfx/pois_ref.csv"

begin "besag + covariate, Poisson: the Laplace log likelihood at mgcv's estimates is mgcv's ML score"
# the fitted model file with mgcv's estimates in its parameters block
awk -v b0="$(mrf_ref "$mfx/pois_ref.csv" mgcv:intercept)" \
    -v b1="$(mrf_ref "$mfx/pois_ref.csv" mgcv:coef.x)" \
    -v v="$(mrf_ref "$mfx/pois_ref.csv" mgcv:f.region.variance)" '
    /"parameters": \{/ { inp = 1 }
    inp && /^ *}/ { inp = 0 }
    inp && /"intercept":/ { sub(/: .*/, ": " b0 ",") }
    inp && /"coef.x":/ { sub(/: .*/, ": " b1) }
    inp && /"f.region.variance":/ { sub(/: .*/, ": " v ",") }
    { print }' "$WORK/mrf-pois.json" > "$CASE_TMP/at_mgcv.json"
run "$GMM_INFER" loglik --model "$CASE_TMP/at_mgcv.json"
expect_exit 0
got=$(json_num "$OUT" loglik)
want=$(mrf_ref "$mfx/pois_ref.csv" mgcv:loglik)
close_to "$got" "$want" 1e-7 abs || fail "loglik at mgcv's estimates $got, mgcv $want"
# and lower than the maximum, by mgcv's different maximiser
fitted=$(json_num "$WORK/mrf-pois.json" loglik)
awk -v a="$got" -v b="$fitted" 'BEGIN { exit !(b - a > 0.1) }' ||
    fail "the maximum $fitted is not above the value at mgcv's point $got"
