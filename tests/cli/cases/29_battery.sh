# shellcheck shell=bash
# 29_battery.sh -- the optimiser's battery: every model of
# tests/fixtures/battery/models.tsv (scripts/make-battery-fixtures.R: GLMMs with one or two
# crossed iid groups and factors, Gaussian, Poisson with exposure, binomial with trials,
# Bernoulli, negative binomial; rw1 and rw2 with covariates, one and several rows per level;
# besag and bym2 on a lattice; a matern32 kernel term beside fixed effects) fitted by the
# default `fit` and by `fit --restarts 20`:
#
#   - the default fit says "converged": true and its loglik is at least the best of the 20
#     restarts' minus 1e-6 nats;
#   - where lme4 (lmer ML, glmer Laplace, glmmTMB for the negative binomial) converged on the
#     same model (lme4.csv), the loglik is at least lme4's minus 1e-6 max(1, |loglik|) -- lme4's
#     own optimum may be slightly worse -- and every coefficient within 0.01 standard errors;
#   - a model with a limit in the battery (bym2 at phi = 1 is besag) has a loglik at least
#     that model's minus 1e-6 (1e-4 for a fit at phi's boundary, below);
#   - the model whose likelihood has no maximum (rw1, one row per level, Gaussian: the noise
#     -> 0) says so: "stop": "unbounded", "converged": false and a warning;
#   - a copy of a model with the covariate x shifted (by 1e3 or 1e6, x's sd ~ 1) or scaled (by
#     1e-12 or 1e12) has the base's loglik to 1e-8 relative, the transformed coefficient and
#     the intercept to 1e-6 relative (slope / scale; a shift moves the intercept by -slope *
#     shift), the standard errors to 1e-5 relative (the intercept's after a shift needs the
#     covariance: not checked), and the other parameters as the base's: coefficients within
#     1e-3 standard errors, variances within 1e-4 relative.  (Two points whose Newton
#     decrement is <= 1e-8 are within 2 sqrt(2e-8) = 2.8e-4 standard errors of each other
#     in every direction; only the transformed coefficients are held closer, as the fit
#     optimises in a basis where a shift or scale does not change the path.)
#
# scripts/battery-table.sh prints the same battery as a table (docs/accuracy.md, "The
# optimiser's battery").  Sourced by tests/cli/run.sh (see there for the helpers).

bat="$ROOT/tests/fixtures/battery"
bat_out="$WORK/battery"
mkdir -p "$bat_out"

# lme4.csv's value of NAME for model $1
bat_lme4() { awk -F, -v m="$1" -v k="$2" '$1 == m && $2 == k { print $3; exit }' "$bat/lme4.csv"; }
# "NAME VALUE" of every entry of the "parameters" (or "std_errors") object of model file $1
bat_block() {
    sed -n "/\"$2\": {/,/}/p" "$1" | sed -n 's/^ *"\([^"]*\)": \([^,{]*\),\{0,1\}$/\1 \2/p'
}
bat_se() { sed -n '/"std_errors"/,/}/p' "$1" | json_key "$2"; }
# a >= b - tol
bat_at_least() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { exit !(a != "" && b != "" && a >= b - t) }'; }

seed=0
while IFS=$'\t' read -r -u 3 name data formula lik opts expect base column base_column shift scale \
    lower; do
    [[ $name == name ]] && continue
    seed=$((seed + 1))
    [[ $opts == - ]] && opts=
    # shellcheck disable=SC2206  # the options are words
    optv=($opts)
    m="$bat_out/$name.json"

    if [[ $expect == unbounded ]]; then
        begin "battery $name: the likelihood has no maximum, and fit says so"
        run "$GMM_INFER" fit --formula "$formula" --likelihood "$lik" "${optv[@]}" -o "$m" "$data"
        expect_exit 0
        expect_file "$m" '"converged": false'
        expect_file "$m" '"stop": "unbounded"'
        expect_stderr 'warning: the likelihood has no maximum: it grows without bound as likelihood\.variance -> 0'
        continue
    fi

    begin "battery $name: the default fit is converged and at the best of 20 restarts"
    run "$GMM_INFER" fit --formula "$formula" --likelihood "$lik" "${optv[@]}" -o "$m" "$data"
    expect_exit 0
    expect_file "$m" '"converged": true'
    run "$GMM_INFER" fit --formula "$formula" --likelihood "$lik" "${optv[@]}" --restarts 20 \
        --seed "$seed" -o "$bat_out/$name.r20.json" "$data"
    expect_exit 0
    ll=$(json_num "$m" loglik)
    best=$(json_num "$bat_out/$name.r20.json" loglik)
    # A fit at bym2's phi -> 1 (its boundary, named in the file) is judged to 1e-4 nats: the
    # model reads 1 - phi from phi, whose rounding near 1 moves loglik by ~1e-5 there
    # (1 - phi = 1e-8 carries a relative error 1e-8; between restarts 1.1e-5 measured)
    btol=1e-6
    grep -q '^    "f\.[a-z_]*\.phi"' <(sed -n '/"boundary"/,/]/p' "$m") && btol=1e-4
    bat_at_least "$ll" "$best" "$btol" ||
        fail "default loglik $ll is below the best of 20 restarts, $best"

    if [[ $(bat_lme4 "$name" status) == converged ]]; then
        ref=$(bat_lme4 "$name" loglik)
        tol=$(awk -v l="$ref" 'BEGIN { l = l < 0 ? -l : l; print 1e-6 * (l > 1 ? l : 1) }')
        bat_at_least "$ll" "$ref" "$tol" ||
            fail "loglik $ll is below $(bat_lme4 "$name" fitter)'s $ref by more than $tol"
        while read -r p v; do
            [[ $p == intercept || $p == coef.* ]] || continue
            want=$(bat_lme4 "$name" "$p")
            se=$(bat_se "$m" "$p")
            awk -v a="$v" -v b="$want" -v s="$se" 'BEGIN {
                d = a - b; exit !(b != "" && s != "" && (d < 0 ? -d : d) <= 0.01 * s) }' ||
                fail "$p $v, lme4 '$want': more than 0.01 standard errors ($se) apart"
        done < <(bat_block "$m" parameters)
    fi

    if [[ $lower != - ]]; then
        sub=$(json_num "$bat_out/$lower.json" loglik)
        bat_at_least "$ll" "$sub" "$btol" ||
            fail "loglik $ll is below $lower's maximum $sub, a limit of this model"
    fi

    [[ $base == - ]] && continue
    begin "battery $name: $column = $scale $base_column + $shift, the fit is $base's transformed"
    b="$bat_out/$base.json"
    expect_file "$b"  # fitted above: a base comes before its copies in models.tsv
    close_to "$ll" "$(json_num "$b" loglik)" 1e-8 ||
        fail "loglik $ll, $base's $(json_num "$b" loglik)"
    slope=$(json_num "$b" "coef.$base_column")
    while read -r p v; do
        case $p in
        "coef.$base_column")
            q="coef.$column"
            want=$(awk -v a="$v" -v s="$scale" 'BEGIN { printf "%.17g", a / s }')
            close_to "$(json_num "$m" "$q")" "$want" 1e-6 ||
                fail "$q $(json_num "$m" "$q"), from $base's $p $v: $want" ;;
        intercept)
            want=$(awk -v a="$v" -v b="$slope" -v c="$shift" -v s="$scale" \
                'BEGIN { printf "%.17g", a - b / s * c }')
            close_to "$(json_num "$m" intercept)" "$want" 1e-6 ||
                fail "intercept $(json_num "$m" intercept), from $base's $v: $want" ;;
        coef.*)
            got=$(json_num "$m" "$p"); se=$(bat_se "$b" "$p")
            awk -v a="$got" -v b="$v" -v s="$se" 'BEGIN {
                d = a - b; exit !(a != "" && s != "" && (d < 0 ? -d : d) <= 1e-3 * s) }' ||
                fail "$p $got, $base's $v: more than 1e-3 standard errors ($se) apart" ;;
        *)
            close_to "$(json_num "$m" "$p")" "$v" 1e-4 ||
                fail "$p $(json_num "$m" "$p"), $base's $v" ;;
        esac
    done < <(bat_block "$b" parameters)
    while read -r p v; do
        case $p in
        "coef.$base_column")
            q="coef.$column"
            want=$(awk -v a="$v" -v s="$scale" 'BEGIN { printf "%.17g", a / s }') ;;
        intercept)
            [[ $shift == 0 ]] || continue
            q=intercept; want=$v ;;
        *) q=$p; want=$v ;;
        esac
        got=$(bat_se "$m" "$q")
        close_to "$got" "$want" 1e-5 || fail "std_errors $q $got, from $base's $p $v: $want"
    done < <(bat_block "$b" std_errors)
done 3< "$bat/models.tsv"
