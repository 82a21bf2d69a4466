# shellcheck shell=bash
# 76_formula_fixed.sh -- the fixed part of R's formula language end to end
# (the design's columns against R's model.matrix: tests/mdl/test_design.c):
#
#   - lme4's cake, angle ~ recipe * temp + (1 | replicate), against
#     lmer(REML = FALSE) (tests/fixtures/design/cake_fit.csv,
#     scripts/make-design-fixtures.R): the log likelihood within 1e-6, every
#     coefficient within 1e-5 standard errors and the variances within 1e-5
#     relative (a fit stops at a Newton decrement <= 1e-8: the optimum is
#     known to ~1e-4 standard errors; measured 1.2e-6); with the variances
#     held at lme4's, the coefficients (a least-squares problem in the
#     interaction's columns) to 1e-9 relative;
#   - offset(log(e)) in a Poisson GLMM against glmer (tests/fixtures/design/
#     offset_fit.csv; measured: loglik 4.7e-13, coefficients 6e-8
#     relative) and against the same model written with --exposure e (the
#     log likelihood to 1e-9);
#   - a model with poly(), a reference level, an interaction, offset() and a
#     transformed response, written by fit and read by predict: data rows as
#     new rows (a few of them, without every level) give the numbers
#     predicted at the data -- the levels, poly()'s basis and the offset come
#     from the model, not the new rows;
#   - a value a function does not take: the file, line, value and term, the
#     caret under the function.
# Sourced by tests/cli/run.sh (see there for the helpers).

dfx="$ROOT/tests/fixtures/design"
lme4_val() { awk -F, -v k="$1" '$1 == k { print $2; exit }' "$dfx/cake_fit.csv"; }
se_of() { sed -n '/"std_errors"/,/}/p' "$1" | json_key "$2"; }

begin "cake: angle ~ factor(recipe) * temp + f(replicate, iid) agrees with lmer(REML = FALSE)"
run "$GMM_INFER" fit --formula 'angle ~ factor(recipe) * temp + f(replicate, iid)' \
    -o "$CASE_TMP/cake.json" "$dfx/cake.csv"
expect_exit 0
m="$CASE_TMP/cake.json"
expect_file "$m" '"converged": true'
close_to "$(json_num "$m" loglik)" "$(lme4_val loglik)" 1e-6 abs ||
    fail "loglik $(json_num "$m" loglik), lme4 $(lme4_val loglik)"
names='intercept coef.recipe[B] coef.recipe[C] coef.temp coef.recipe[B]:temp coef.recipe[C]:temp'
for k in $names; do
    got=$(json_num "$m" "$k")
    [[ -n $got ]] || fail "no coefficient $k in the model file"
    se=$(se_of "$m" "$k")
    close_to "$got" "$(lme4_val "$k")" "$(awk -v s="$se" 'BEGIN { print 1e-5 * s }')" abs ||
        fail "$k = $got, lme4 $(lme4_val "$k") (se $se)"
done
for k in f.replicate.variance likelihood.variance; do
    close_to "$(json_num "$m" "$k")" "$(lme4_val "$k")" 1e-5 ||
        fail "$k = $(json_num "$m" "$k"), lme4 $(lme4_val "$k")"
done
# at lme4's variances the coefficients are generalised least squares
run "$GMM_INFER" fit --formula "angle ~ factor(recipe) * temp + f(replicate, iid, variance=$(lme4_val f.replicate.variance) fixed)" \
    --noise "$(lme4_val likelihood.variance)" --fix likelihood.variance -o "$CASE_TMP/gls.json" \
    "$dfx/cake.csv"
expect_exit 0
for k in $names; do
    close_to "$(json_num "$CASE_TMP/gls.json" "$k")" "$(lme4_val "$k")" 1e-9 ||
        fail "at lme4's variances $k = $(json_num "$CASE_TMP/gls.json" "$k"), lme4 $(lme4_val "$k")"
done

begin "offset(log(e)) in a Poisson GLMM: glmer's fit, and the fit of --exposure e"
run "$GMM_INFER" fit --formula 'n ~ x + offset(log(e)) + f(grp, iid)' --likelihood poisson \
    -o "$CASE_TMP/off.json" "$dfx/data.csv"
expect_exit 0
o="$CASE_TMP/off.json"
glmer_val() { awk -F, -v k="$1" '$1 == k { print $2; exit }' "$dfx/offset_fit.csv"; }
close_to "$(json_num "$o" loglik)" "$(glmer_val loglik)" 1e-6 abs ||
    fail "loglik $(json_num "$o" loglik), glmer $(glmer_val loglik)"
for k in intercept coef.x; do
    se=$(se_of "$o" "$k")
    close_to "$(json_num "$o" "$k")" "$(glmer_val "$k")" "$(awk -v s="$se" 'BEGIN { print 1e-5 * s }')" abs ||
        fail "$k = $(json_num "$o" "$k"), glmer $(glmer_val "$k") (se $se)"
done
close_to "$(json_num "$o" f.grp.variance)" "$(glmer_val f.grp.variance)" 1e-5 ||
    fail "f.grp.variance = $(json_num "$o" f.grp.variance), glmer $(glmer_val f.grp.variance)"
# the same model as the exposure e: e exp(eta) = exp(eta + log(e))
run "$GMM_INFER" fit --formula 'n ~ x + f(grp, iid)' --likelihood poisson --exposure e \
    -o "$CASE_TMP/exp.json" "$dfx/data.csv"
expect_exit 0
close_to "$(json_num "$o" loglik)" "$(json_num "$CASE_TMP/exp.json" loglik)" 1e-9 abs ||
    fail "offset(log(e)) loglik $(json_num "$o" loglik), --exposure e $(json_num "$CASE_TMP/exp.json" loglik)"

begin "poly(), a reference level, an interaction, offset() and log(y): predict at new rows uses the model's"
form='log(y) ~ poly(x, 2) + factor(f, ref = "B") * z + offset(log(e)) + f(grp, iid)'
run "$GMM_INFER" fit --formula "$form" -o "$CASE_TMP/m.json" "$dfx/data.csv"
expect_exit 0
for k in 'coef.poly(x, 2)1' 'coef.poly(x, 2)2' 'coef.f[A]' 'coef.f[C]' coef.z 'coef.f[A]:z' \
    'coef.f[C]:z'; do
    [[ -n $(json_num "$CASE_TMP/m.json" "$k") ]] || fail "no coefficient $k"
done
close_to "$(json_num "$CASE_TMP/m.json" 'coef.offset(log(e))')" 1 0 abs || fail "the offset's coefficient is not 1"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
cp "$OUT" "$CASE_TMP/rows.csv"
# data rows 6, 9 and 12 (levels C, C and C; x and z of three rows) as new rows
{ head -1 "$dfx/data.csv"; sed -n '7p;10p;13p' "$dfx/data.csv"; } > "$CASE_TMP/new.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --at "$CASE_TMP/new.csv"
expect_exit 0
i=2
for r in 7 10 13; do
    close_to "$(sed -n "${i}p" "$OUT" | cut -d, -f2)" "$(sed -n "${r}p" "$CASE_TMP/rows.csv" | cut -d, -f2)" 1e-12 abs ||
        fail "data row $((r - 1)) as a new row: mean $(sed -n "${i}p" "$OUT" | cut -d, -f2), at the data $(sed -n "${r}p" "$CASE_TMP/rows.csv" | cut -d, -f2)"
    close_to "$(sed -n "${i}p" "$OUT" | cut -d, -f3)" "$(sed -n "${r}p" "$CASE_TMP/rows.csv" | cut -d, -f3)" 1e-12 abs ||
        fail "data row $((r - 1)) as a new row: variance differs"
    i=$((i + 1))
done
run "$GMM_INFER" score --model "$CASE_TMP/m.json" "$CASE_TMP/new.csv"
expect_exit 0
expect_stdout '"n": 3'

begin "a value a function does not take: file, line, value and term, the caret under the function"
run "$GMM_INFER" fit --formula 'y ~ x + log(z) + f(grp, iid)' "$dfx/data.csv"
expect_exit 1
expect_stderr "data\.csv:2: log\(\) of a value that is not positive \(-1\.64\) in the term 'log\(z\)'$"
expect_stderr '^ {10}\^$'
run "$GMM_INFER" fit --formula 'y ~ factor(f, ref = "D") + f(grp, iid)' "$dfx/data.csv"
expect_exit 1
expect_stderr "formula: 'D' is not a level of column 'f' \(3 levels, from 'A' to 'C'\)$"
expect_stderr '^ {23}\^$'
