# shellcheck shell=bash
# 59_formula_bym2.sh -- bym2 + covariate + exposure, Poisson, on a real areal data set (the
# 140 districts' influenza totals 2001-2008, population as exposure; tests/fixtures/bym2/,
# scripts/make-bym2-fixtures.R) against a dense R computation of the same Laplace
# approximation (f ~ N(0, v ((1 - phi) I + phi R^+ / c)), R the ICAR Laplacian, c the geometric
# mean of diag(R^+)): the log likelihood at a fixed point to 1e-8 relative (an evaluation, no
# optimiser); the maximum, found by fit and by R's optim: its value to 1e-8 absolute (second
# order in the maximisers' errors), the parameters to 1e-4 relative (fit stops at a gradient
# norm <= 1e-5 on the log and coefficient scale), the linear predictor at every district
# (predict's mean, without the log exposure) to 1e-5.  Measured: 5e-12 at the fixed point and
# 3e-12 at the maximum, the parameters within 2e-7 relative, the linear predictor within 1.2e-7.
# Sourced by tests/cli/run.sh (see there for the helpers).

bfx="$ROOT/tests/fixtures/bym2"
bym2_ref() { awk -F, -v k="$1" '$1 == k { print $2 }' "$bfx/ref.csv"; }

begin "bym2 on the districts: the fit's maximum, parameters and linear predictor are the dense Laplace's"
run "$GMM_INFER" fit --formula 'count ~ east + f(node, bym2, graph=data/flu_bybw_edges.csv)' \
    --likelihood poisson --exposure population -o "$CASE_TMP/m.json" "$bfx/districts.csv"
expect_exit 0
cp "$CASE_TMP/m.json" "$WORK/bym2-districts.json"
got=$(json_num "$CASE_TMP/m.json" loglik); want=$(bym2_ref loglik)
close_to "$got" "$want" 1e-8 abs || fail "loglik $got, dense $want"
for p in intercept coef.east f.node.variance f.node.phi; do
    got=$(json_num "$CASE_TMP/m.json" "$p"); want=$(bym2_ref "$p")
    close_to "$got" "$want" 1e-4 || fail "$p $got, dense $want"
done
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
# predict's row r is node r - 1
awk -F, 'NR == FNR { if ($1 ~ /^eta:/) { sub(/^eta:/, "", $1); e[$1 + 1] = $2; n++ }; next }
         FNR > 1 && ($1 in e) { d = $2 - e[$1]; if (d < 0) d = -d; if (d > 1e-5) bad++; seen++ }
         END { exit !(n == 140 && seen == n && !bad) }' "$bfx/ref.csv" "$OUT" ||
    fail "predict's means differ from the dense linear predictor by more than 1e-5"

begin "bym2 on the districts: loglik at a fixed point is the dense Laplace's"
awk -v b0="$(bym2_ref at:intercept)" -v b1="$(bym2_ref at:coef.east)" \
    -v v="$(bym2_ref at:f.node.variance)" -v phi="$(bym2_ref at:f.node.phi)" '
    /"parameters": \{/ { inp = 1 }
    inp && /^ *}/ { inp = 0 }
    inp && /"intercept":/ { sub(/: .*/, ": " b0 ",") }
    inp && /"coef.east":/ { sub(/: .*/, ": " b1) }
    inp && /"f.node.variance":/ { sub(/: .*/, ": " v ",") }
    inp && /"f.node.phi":/ { sub(/: .*/, ": " phi ",") }
    { print }' "$WORK/bym2-districts.json" > "$CASE_TMP/at.json"
run "$GMM_INFER" loglik --model "$CASE_TMP/at.json"
expect_exit 0
got=$(json_num "$OUT" loglik); want=$(bym2_ref at:loglik)
close_to "$got" "$want" 1e-8 || fail "loglik at the fixed point $got, dense $want"
