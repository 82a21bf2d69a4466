# shellcheck shell=bash
# 32_fit_trust.sh -- fit's answer does not depend on how the covariates are
# written, and "converged" is the test at the returned point: a calendar
# year beside the intercept, covariates scaled by 1e12 and 1e-12 and shifted
# by 1e6 sd reach the same maximum; aliased columns are dropped and named;
# a variance whose maximum is at 0 and a likelihood without a maximum are
# said.  Data are drawn in awk from a Park-Miller stream (exact in doubles).

tr_lcg='function u() { s = (s * 16807) % 2147483647; return s / 2147483647 }'

# A herd model like lme4's cbpp: 15 herds x 4 periods, size 8..30, the
# incidence binomial with logit p = -1.5 - 0.5 period + herd effect (sd 0.7).
tr_herds() {
    awk "$tr_lcg"' BEGIN { s = 20260; print "herd,period,year,big,small,shift,size,incidence"
        for (h = 1; h <= 15; h++) { z = 0; for (i = 0; i < 12; i++) z += u(); b = 0.7 * (z - 6)
            for (p = 1; p <= 4; p++) { n = 8 + int(23 * u()); e = -1.5 - 0.5 * p + b
                q = 1 / (1 + exp(-e)); k = 0; for (i = 0; i < n; i++) k += (u() < q)
                printf "%d,%d,%d,%.17g,%.17g,%.17g,%d,%d\n", h, p, 2000 + p, p * 1e12, p * 1e-12,
                    p + 1.2e6, n, k } } }' > "$1"
}

begin "fit: a calendar year, x 1e12, x 1e-12 and + 1e6 sd reach the period index's maximum"
tr_herds "$CASE_TMP/herds.csv"
fitb() {
    run "$GMM_INFER" fit "$CASE_TMP/herds.csv" --formula "incidence ~ $1 + f(herd, iid)" \
        --likelihood binomial --trials size -o "$CASE_TMP/$1.json"
    expect_exit 0
    expect_file "$CASE_TMP/$1.json" '"converged": true,$'
    expect_file "$CASE_TMP/$1.json" '^  "stop": "newton",$'
}
for v in period year big small shift; do fitb "$v"; done
ll0=$(json_num "$CASE_TMP/period.json" loglik)
b0=$(json_num "$CASE_TMP/period.json" coef.period)
se0=$(sed -n '/"std_errors"/,/}/p' "$CASE_TMP/period.json" | json_key coef.period)
for v in year big small shift; do
    case $v in big) sc=1e12 ;; small) sc=1e-12 ;; *) sc=1 ;; esac
    ll=$(json_num "$CASE_TMP/$v.json" loglik)
    b=$(json_num "$CASE_TMP/$v.json" "coef.$v")
    se=$(sed -n '/"std_errors"/,/}/p' "$CASE_TMP/$v.json" | json_key "coef.$v")
    close_to "$ll" "$ll0" 1e-10 || fail "$v: loglik $ll, period index $ll0"
    want=$(awk -v b="$b0" -v s="$sc" 'BEGIN { printf "%.17g", b / s }')
    close_to "$b" "$want" 1e-6 || fail "$v: slope $b, period index / $sc = $want"
    want=$(awk -v b="$se0" -v s="$sc" 'BEGIN { printf "%.17g", b / s }')
    close_to "$se" "$want" 1e-5 || fail "$v: standard error $se, period index / $sc = $want"
done
dec=$(json_num "$CASE_TMP/year.json" decrement)
awk -v d="$dec" 'BEGIN { exit !(d != "" && d >= 0 && d <= 1e-8) }' || fail "decrement '$dec'"

begin "fit: aliased columns are dropped, named, written as null, and change nothing else"
tr_herds "$CASE_TMP/h0.csv"
awk -F, 'NR == 1 { print $0 ",c,twice"; next } { print $0 ",3," 2 * $2 }' "$CASE_TMP/h0.csv" \
    > "$CASE_TMP/h.csv"
run "$GMM_INFER" fit "$CASE_TMP/h.csv" --formula 'incidence ~ period + c + twice + f(herd, iid)' \
    --likelihood binomial --trials size -o "$CASE_TMP/a.json"
expect_exit 0
expect_stderr '^gmm-infer fit: warning: fixed-effect model matrix is rank deficient so dropping 2 columns \(not estimated\): coef\.c, coef\.twice$'
expect_file "$CASE_TMP/a.json" '^    "coef\.c": null,$'
expect_file "$CASE_TMP/a.json" '^    "coef\.twice": null$'
expect_file "$CASE_TMP/a.json" '"converged": true,$'
sed -n '/"std_errors"/,/}/p' "$CASE_TMP/a.json" | grep -q 'coef\.c\|coef\.twice' &&
    fail "a dropped column has a standard error"
run "$GMM_INFER" fit "$CASE_TMP/h.csv" --formula 'incidence ~ period + f(herd, iid)' \
    --likelihood binomial --trials size -o "$CASE_TMP/b.json"
close_to "$(json_num "$CASE_TMP/a.json" loglik)" "$(json_num "$CASE_TMP/b.json" loglik)" 1e-12 ||
    fail "loglik with the aliased columns differs from the model without them"
run "$GMM_INFER" predict --model "$CASE_TMP/a.json"
expect_exit 0
expect_stdout '^node,mean,var,'
run "$GMM_INFER" predict --terms --model "$CASE_TMP/a.json"
expect_exit 0
expect_stdout '^coef\.c,,NA,NA$'
expect_stdout '^coef\.period,,-[0-9.]+,[0-9.]+$'

# Groups read twice: as fixed effects and as an iid term, whose variance has
# its maximum at 0 (the fixed effects explain each group exactly); the limit
# is the Gaussian linear model of the groups, loglik -n/2 (log(2 pi RSS/n) + 1).
begin "fit: a variance whose maximum is at 0 is a boundary fit, named, its loglik the limit's"
awk "$tr_lcg"' BEGIN { s = 97; print "g,y"
    for (i = 0; i < 60; i++) { g = i % 6; z = 0; for (k = 0; k < 12; k++) z += u()
        printf "%d,%.6f\n", g, g * 0.7 + (z - 6) } }' > "$CASE_TMP/g.csv"
run "$GMM_INFER" fit "$CASE_TMP/g.csv" --formula 'y ~ factor(g) + f(g, iid)' -o "$CASE_TMP/g.json"
expect_exit 0
expect_stderr '^gmm-infer fit: warning: boundary \(singular\) fit: f\.g\.variance -> 0 '
expect_file "$CASE_TMP/g.json" '"boundary": \['
expect_file "$CASE_TMP/g.json" '"converged": true,$'
lm=$(awk -F, 'NR > 1 { n[$1]++; s[$1] += $2; ss[$1] += $2 * $2; N++ }
    END { for (g in n) r += ss[g] - s[g] * s[g] / n[g]
          printf "%.17g", -N / 2 * (log(2 * 3.141592653589793 * r / N) + 1) }' "$CASE_TMP/g.csv")
close_to "$(json_num "$CASE_TMP/g.json" loglik)" "$lm" 1e-8 ||
    fail "boundary loglik $(json_num "$CASE_TMP/g.json" loglik), the linear model's $lm"

# One row per level of a random walk with an intercept: as the noise -> 0 the
# walk interpolates the data and the intercept takes the constraint's
# direction, so the likelihood grows without bound (a local maximum may exist
# inside; there is no global one).
begin "fit: a Gaussian likelihood without a maximum (rw1, one row per level) says so"
awk "$tr_lcg"' BEGIN { s = 5; print "t,x,y"; w = 0
    for (i = 1; i <= 60; i++) { z = 0; for (k = 0; k < 12; k++) z += u(); w += 0.3 * (z - 6)
        x = u(); printf "%d,%.6f,%.6f\n", i, x, w + 0.5 * x + 0.2 * (u() - 0.5) } }' > "$CASE_TMP/w.csv"
run "$GMM_INFER" fit "$CASE_TMP/w.csv" --formula 'y ~ x + f(t, rw1)' --noise 1e-6 -o "$CASE_TMP/w.json"
expect_exit 0
expect_stderr '^gmm-infer fit: warning: the likelihood has no maximum: it grows without bound as likelihood\.variance -> 0'
expect_file "$CASE_TMP/w.json" '"converged": false,$'
expect_file "$CASE_TMP/w.json" '^  "stop": "unbounded",$'
# the file holds the point reached, its loglik the one written
run "$GMM_INFER" loglik --model "$CASE_TMP/w.json"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$(json_num "$CASE_TMP/w.json" loglik)" 1e-12 ||
    fail "loglik at the written values $(json_num "$OUT" loglik), the file's $(json_num "$CASE_TMP/w.json" loglik)"

begin "a model read with data where a fitted column is aliased keeps its value; vi of a vi with a dropped column"
tr_herds "$CASE_TMP/h0.csv"
awk -F, 'NR == 1 { print $0 ",twice"; next } { print $0 "," 2 * $2 }' "$CASE_TMP/h0.csv" \
    > "$CASE_TMP/h.csv"
awk -F, 'BEGIN { OFS = "," } NR > 1 { $2 = 2 } { print }' "$CASE_TMP/h.csv" > "$CASE_TMP/flat.csv"
run "$GMM_INFER" fit "$CASE_TMP/h.csv" --formula 'incidence ~ period + f(herd, iid)' \
    --likelihood binomial --trials size -o "$CASE_TMP/m.json"
expect_exit 0
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json" "$CASE_TMP/flat.csv"
expect_exit 0
expect_stderr "^gmm-infer loglik: warning: the column of coef\.period is aliased in these data: held at the model's value"
got=$(sed -n '/"parameters"/,/}/p' "$OUT" | json_key coef.period)
close_to "$got" "$(json_num "$CASE_TMP/m.json" coef.period)" 1e-15 ||
    fail "coef.period read back as $got"
run "$GMM_INFER" fit "$CASE_TMP/h.csv" --formula 'incidence ~ period + twice + f(herd, iid)' \
    --likelihood binomial --trials size -o "$CASE_TMP/a.json"
expect_exit 0
run "$GMM_INFER" vi --model "$CASE_TMP/a.json" --quiet -o "$CASE_TMP/v.json"
expect_exit 0
run "$GMM_INFER" vi --model "$CASE_TMP/v.json" --quiet -o "$CASE_TMP/v2.json"
expect_exit 0
expect_file "$CASE_TMP/v2.json" '^    "coef\.twice": null

# hmc --sample-hyper samples the coefficients in the design basis under priors on the
# centred, scaled design, so the slope's posterior does not depend on how x is written:
# with the period index, a calendar year and period x 1e-6 the posterior means agree within
# Monte Carlo error.  Each comparison: |m_a - s m_b| <= 5.3 sqrt(mcse_a^2 + (s mcse_b)^2),
# mcse = sd / sqrt(ess_bulk) from summary -- a false failure of 1.2e-7 per comparison
# (normal tails at 5.3 sd), 2.4e-7 for the case.
begin "hmc --sample-hyper: the slope's posterior with period, year and period x 1e-6 agrees"
tr_herds "$CASE_TMP/herds.csv"
awk -F, 'NR == 1 { print $0 ",micro"; next } { printf "%s,%.17g\n", $0, $2 * 1e-6 }' \
    "$CASE_TMP/herds.csv" > "$CASE_TMP/h.csv"
for v in period year micro; do
    run "$GMM_INFER" fit "$CASE_TMP/h.csv" --formula "incidence ~ $v + f(herd, iid)" \
        --likelihood binomial --trials size -o "$CASE_TMP/$v.json"
    expect_exit 0
    run "$GMM_INFER" hmc --model "$CASE_TMP/$v.json" --sample-hyper --chains 2 --threads 2 \
        --warmup 500 --draws 1000 --quiet -o "$CASE_TMP/d_$v.csv"
    expect_exit 0
    run "$GMM_INFER" summary "$CASE_TMP/d_$v.csv"
    expect_exit 0
    awk -F, -v c="coef.$v" '$1 == c { printf "%.17g %.17g\n", $2, $4 / sqrt($9) }' "$OUT" \
        > "$CASE_TMP/m_$v"
done
expect_file "$CASE_TMP/d_year.csv.json" '"coefficient_priors": "on the centred design'
expect_file "$CASE_TMP/d_year.csv.json" '"coef.year": 2002.5'
read -r mp sp < "$CASE_TMP/m_period"
for v in year micro; do
    read -r m s < "$CASE_TMP/m_$v"
    sc=$([[ $v == micro ]] && echo 1e-6 || echo 1)
    awk -v a="$mp" -v sa="$sp" -v b="$m" -v sb="$s" -v c="$sc" 'BEGIN {
        d = a - b * c; if (d < 0) d = -d; t = 5.3 * sqrt(sa * sa + (sb * c) ^ 2)
        exit !(a < -0.2 && d <= t) }' ||
        fail "slope's posterior mean with $v: $m (x $sc), with the period index $mp (mcse $sp, $s)"
done
