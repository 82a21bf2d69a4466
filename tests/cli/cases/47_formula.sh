# shellcheck shell=bash
# 47_formula.sh -- --formula: fits of covariates, factors and an iid group effect against lme4
# 1.1-31 on the committed fixtures (scripts/make-lme4-fixtures.R: glmer's Laplace for Poisson
# and binomial with trials, lmer's exact maximum likelihood for the Gaussian): the maximised
# log likelihood within 2e-4, coefficients and the group variance within 1e-3 relative,
# standard errors within 1e-2 relative.  Then the formula read back from the model file,
# the formula's kernel and graph terms equal to the shorthand options, errors that point
# into the formula, and predictions that need covariate values refused.
# Sourced by tests/cli/run.sh (see there for the helpers).

fx="$ROOT/tests/fixtures/lme4"

# The number after "KEY": on a line of JSON read from stdin (first match; KEY taken literally,
# brackets and all).
json_key() {
    awk -v k="\"$1\":" '{ sub(/^ */, "") } index($0, k) == 1 {
        v = substr($0, length(k) + 2); sub(/,$/, "", v); print v; exit }'
}
json_num() { json_key "$2" < "$1"; }
# The same inside the "std_errors" object.
json_se() { sed -n '/"std_errors"/,/}/p' "$1" | json_key "$2"; }
# |a - b| <= tol * |b| (relative) or, with a 4th argument, absolute.
close_to() {
    awk -v a="$1" -v b="$2" -v t="$3" -v abs="${4:-}" 'BEGIN {
        d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b
        exit !(a != "" && (abs != "" ? d <= t : d <= t * s)) }'
}

# Compare the fitted model $1 with the reference table $2.
against_lme4() {
    local name value got
    while IFS=, read -r name value; do
        case $name in
        name) ;;
        loglik)
            got=$(json_num "$1" loglik)
            close_to "$got" "$value" 2e-4 abs || fail "$2: loglik $got, lme4 $value" ;;
        se:*)
            got=$(json_se "$1" "${name#se:}")
            close_to "$got" "$value" 1e-2 || fail "$2: se of ${name#se:} $got, lme4 $value" ;;
        *)
            got=$(json_num "$1" "$name")
            close_to "$got" "$value" 1e-3 || fail "$2: $name $got, lme4 $value" ;;
        esac
    done < "$2"
}

begin "Poisson + three covariates + f(g, iid) equals glmer (nAGQ = 1)"
run "$GMM_INFER" fit --formula 'y ~ x1 + x2 + x3 + f(g, iid)' --likelihood poisson \
    -o "$CASE_TMP/m.json" "$fx/pois.csv"
expect_exit 0
against_lme4 "$CASE_TMP/m.json" "$fx/pois_ref.csv"

begin "binomial with trials + factor(period) + f(g, iid) equals glmer; numeric levels in order"
run "$GMM_INFER" fit --formula 'k ~ x1 + factor(period) + f(g, iid)' --likelihood binomial \
    --trials n -o "$CASE_TMP/m.json" "$fx/binom.csv"
expect_exit 0
against_lme4 "$CASE_TMP/m.json" "$fx/binom_ref.csv"
# levels 2, 3, 7, 10: 2 is the reference, and 10 comes after 7
expect_file "$CASE_TMP/m.json" '"coef.period\[10\]"'
grep -q '"coef.period\[2\]"' "$CASE_TMP/m.json" && fail "the reference level has a coefficient"

begin "Gaussian + factor + f(g, iid): the exact marginal likelihood maximised as lmer (ML)"
run "$GMM_INFER" fit --formula 'y ~ x1 + factor(period) + f(g, iid)' -o "$CASE_TMP/m.json" \
    "$fx/gauss.csv"
expect_exit 0
against_lme4 "$CASE_TMP/m.json" "$fx/gauss_ref.csv"
expect_file "$CASE_TMP/m.json" '"center": null'

begin "the formula is read back from the model file: loglik --model gives the fit's value"
run "$GMM_INFER" fit --formula 'k ~ x1 + factor(period) + f(g, iid)' --likelihood binomial \
    --trials n -o "$CASE_TMP/m.json" "$fx/binom.csv"
expect_exit 0
expect_file "$CASE_TMP/m.json" '"formula": "k ~ x1 \+ factor\(period\) \+ f\(g, iid\)"'
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$(json_num "$CASE_TMP/m.json" loglik)" 1e-9 abs ||
    fail "loglik --model $(json_num "$OUT" loglik) != fit's $(json_num "$CASE_TMP/m.json" loglik)"
run "$GMM_INFER" gradcheck --model "$CASE_TMP/m.json"
expect_exit 0

begin "--fix takes coefficient names; gradcheck passes with covariates on a kernel term"
awk 'BEGIN { srand(7); print "t,z,y"
    for (i = 1; i <= 80; i++) { z = rand(); printf "%d,%.4f,%d\n", i, z,
        int(3 * exp(sin(i / 9) + z) * rand() + 0.5) } }' > "$CASE_TMP/s.csv"
run "$GMM_INFER" gradcheck --formula 'y ~ z + f(t, "matern32(variance=0.5, lengthscale=8)")' \
    --likelihood poisson "$CASE_TMP/s.csv"
expect_exit 0
expect_stdout 'coef\.z'
run "$GMM_INFER" fit --formula 'y ~ z + f(t, matern32)' --likelihood poisson \
    --fix coef.z --fix intercept --intercept 0.25 -o "$CASE_TMP/m.json" "$CASE_TMP/s.csv"
expect_exit 0
close_to "$(json_num "$CASE_TMP/m.json" intercept)" 0.25 0 abs || fail "intercept moved"
close_to "$(json_num "$CASE_TMP/m.json" coef.z)" 0 0 abs || fail "coef.z moved" 

begin "f(t, KERNEL) and f(node, PRECISION, graph=...) give the shorthand options' loglik"
awk 'BEGIN { srand(7); print "t,z,y"
    for (i = 1; i <= 80; i++) { z = rand(); printf "%d,%.4f,%d\n", i, z,
        int(3 * exp(sin(i / 9) + z) * rand() + 0.5) } }' > "$CASE_TMP/s.csv"
run "$GMM_INFER" loglik --likelihood poisson --x t --y y \
    --kernel 'matern32(variance=0.5, lengthscale=8)' "$CASE_TMP/s.csv"
expect_exit 0
a=$(json_num "$OUT" loglik)
run "$GMM_INFER" loglik --likelihood poisson \
    --formula 'y ~ f(t, "matern32(variance=0.5, lengthscale=8)")' "$CASE_TMP/s.csv"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$a" 1e-12 abs || fail "kernel term $(json_num "$OUT" loglik) != $a"
printf 'i,j\n1,2\n2,3\n3,4\n4,5\n' > "$CASE_TMP/e.csv"
printf 'node,y\n1,2\n2,0\n3,4\n4,1\n5,3\n1,1\n' > "$CASE_TMP/g.csv"
run "$GMM_INFER" loglik --likelihood poisson --graph "$CASE_TMP/e.csv" --node node --y y \
    --precision 'edge-ou(variance=1, lengthscale=2)' "$CASE_TMP/g.csv"
expect_exit 0
a=$(json_num "$OUT" loglik)
run "$GMM_INFER" loglik --likelihood poisson \
    --formula "y ~ f(node, 'edge-ou(variance=1, lengthscale=2)', graph=$CASE_TMP/e.csv)" \
    "$CASE_TMP/g.csv"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$a" 1e-12 abs || fail "graph term $(json_num "$OUT" loglik) != $a"

begin "formula errors point at the character; terms that cannot be built say why"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, rw2)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "gauss\.csv:2: column 'g': 'c17' is not a number"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid) + f(g, rw1)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "two f\(\) terms on column 'g'"
expect_stderr '^ {25}\^$'
run "$GMM_INFER" fit --formula 'y ~ x1 + f(t, "matern32(varianc=1)")' "$fx/gauss.csv"
expect_exit 1
expect_stderr "unknown parameter 'varianc'"
expect_stderr '^                          \^$'
run "$GMM_INFER" fit --formula 'y x1 + f(g, iid)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "expected 'RESPONSE ~ TERMS'"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid)' --kernel matern32 "$fx/gauss.csv"
expect_exit 2
expect_stderr '--formula replaces --kernel'
run "$GMM_INFER" fit --formula 'y ~ x9 + f(g, iid)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "no column 'x9'"

begin "predictions at nodes need covariate values: refused with the reason; score --loo at rows"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid)' -o "$CASE_TMP/m.json" "$fx/gauss.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 1
expect_stderr 'covariates: predictions need their values'
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --draws 10 --warmup 10
expect_exit 1
expect_stderr 'covariates'
# at the data rows the covariates are known: leave-one-out works
run "$GMM_INFER" score --model "$CASE_TMP/m.json" --loo
expect_exit 0
expect_stdout '"n": 300'
run "$GMM_INFER" fit --formula 'y ~ f(g, iid)' --likelihood poisson -o "$CASE_TMP/m.json" \
    "$fx/pois.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
expect_stdout '^grp01,'

begin "a kernel term with a covariate: predict at the data rows, vi, hmc, score --loo"
awk 'BEGIN { srand(7); print "t,z,y"
    for (i = 1; i <= 80; i++) { z = rand(); printf "%d,%.4f,%d\n", i, z,
        int(3 * exp(sin(i / 9) + z) * rand() + 0.5) } }' > "$CASE_TMP/s.csv"
run "$GMM_INFER" fit --formula 'y ~ z + f(t, matern32)' --likelihood poisson \
    -o "$CASE_TMP/m.json" "$CASE_TMP/s.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
expect_stdout '^1,'
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --grid 1:3:0.5
expect_exit 1
expect_stderr 'covariates: predictions need their values'
run "$GMM_INFER" vi --model "$CASE_TMP/m.json" -o "$CASE_TMP/v.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --draws 100 --warmup 100 -o "$CASE_TMP/d.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/d.csv"
expect_exit 0
run "$GMM_INFER" score --model "$CASE_TMP/m.json" --loo
expect_exit 0
expect_stdout '"elpd_loo"'
