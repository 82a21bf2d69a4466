# shellcheck shell=bash
# 68_formula_ts.sh -- the stacked latent's time-series terms (stack_ts.c, stack_kron.c) end to
# end: `y ~ f(t, ar1)` fitted on two Gaussian series with gaps and repeated rows
# (tests/fixtures/ts/, scripts/make-ts-fixtures.R), rho near +1 and near -1, against R's
# maximum of the same dense exact log marginal likelihood: the maximum to 1e-6 absolute (second
# order in the maximisers' errors), the parameters to 1e-4 relative, the certificate
# "converged": true; score beyond the positions (the ar1 forecast) runs; seasonal, group and
# replicate fit and their keys' errors point into the formula.  Measured: the maxima within
# 1e-9 (2.7e-10, 6e-10), the parameters within 1e-6 relative.  (The likelihood at fixed
# parameters is checked against a dense computation in tests/model/test_stack_ts.c.)
# Sourced by tests/cli/run.sh (see there for the helpers).

tfx="$ROOT/tests/fixtures/ts"
ts_ref() { awk -F, -v k="$1" '$1 == k { print $2 }' "$tfx/expected.csv"; }

for c in ar1_pos ar1_neg; do
    begin "formula ar1 ($c): fit's maximum and parameters are R's dense maximum"
    run "$GMM_INFER" fit --formula 'y ~ f(t, ar1)' -o "$CASE_TMP/$c.json" "$tfx/$c.csv"
    expect_exit 0
    expect_file "$CASE_TMP/$c.json" '"converged": true'
    got=$(json_num "$CASE_TMP/$c.json" loglik); want=$(ts_ref "$c:loglik")
    cp "$CASE_TMP/$c.json" "$WORK/ts-$c.json"
    close_to "$got" "$want" 1e-6 abs || fail "$c: loglik $got, R $want"
    for p in f.t.variance f.t.rho likelihood.variance intercept; do
        got=$(json_num "$CASE_TMP/$c.json" "$p"); want=$(ts_ref "$c:$p")
        close_to "$got" "$want" 1e-4 || fail "$c: $p $got, R $want"
    done
done

begin "formula ar1: score at positions beyond the data (the forecast) and inside a gap"
printf 't,y\n113,3.1\n175,2.9\n99,3.0\n' > "$CASE_TMP/new.csv"
run "$GMM_INFER" score --model "$WORK/ts-ar1_pos.json" "$CASE_TMP/new.csv"
expect_exit 0
expect_stdout '"lpd"'
printf 't,y\n113.5,3.1\n' > "$CASE_TMP/bad.csv"
run "$GMM_INFER" score --model "$WORK/ts-ar1_pos.json" "$CASE_TMP/bad.csv"
expect_exit 1
expect_stderr 'not an integer'

begin "formula seasonal, group and replicate fit; describe their sizes"
awk -F, 'BEGIN { OFS = "," } NR == 1 { print $0, "g", "r"; next }
         { print $0, ($1 % 3) + 1, ($1 % 2) }' "$tfx/ar1_pos.csv" > "$WORK/ts-g.csv"
run "$GMM_INFER" fit --verbose --formula 'y ~ f(t, seasonal, period=4)' "$WORK/ts-g.csv" \
    -o "$CASE_TMP/s.json"
expect_exit 0
expect_stderr 'f\.t \(seasonal\): 70 latents; n = 70, bandwidth 3, observation width 1, 3 constraints'
run "$GMM_INFER" fit --verbose --formula 'y ~ f(t, rw1, group=g, control=ar1, group.rho=0.3)' \
    "$WORK/ts-g.csv" -o "$CASE_TMP/g.json"
expect_exit 0
expect_stderr '\(3 groups, ar1\)'
expect_file "$CASE_TMP/g.json" '"f\.t\.group\.rho"'
run "$GMM_INFER" fit --verbose --formula 'y ~ f(t, ar1, replicate=r)' "$WORK/ts-g.csv" \
    -o "$CASE_TMP/r.json"
expect_exit 0
expect_stderr '\(2 replicates\)'

begin "formula ts: rows with a missing group= or replicate= cell are dropped with a count (na.omit)"
awk -F, 'BEGIN { OFS = "," } NR == 5 || NR == 9 { $(NF - 1) = "" } NR == 12 { $NF = "" } { print }' \
    "$WORK/ts-g.csv" > "$CASE_TMP/ts-na.csv"
run "$GMM_INFER" fit --formula 'y ~ f(t, rw1, group=g, control=ar1)' "$CASE_TMP/ts-na.csv" \
    -o "$CASE_TMP/gna.json"
expect_exit 0
expect_stderr '; 2 more dropped for a missing value'
run "$GMM_INFER" fit --formula 'y ~ f(t, ar1, replicate=r)' "$CASE_TMP/ts-na.csv" \
    -o "$CASE_TMP/rna.json"
expect_exit 0
expect_stderr '; 1 more dropped for a missing value'

begin "formula ts: errors point into the formula"
run "$GMM_INFER" fit --formula 'y ~ f(t, seasonal)' "$WORK/ts-g.csv"
expect_exit 1
expect_stderr 'needs the season length, period=M'
run "$GMM_INFER" fit --formula 'y ~ f(t, rw1, group=g)' "$WORK/ts-g.csv"
expect_exit 1
expect_stderr 'control=ar1, rw1, rw2 or iid'
run "$GMM_INFER" fit --formula 'y ~ f(t, rw1, group=g, control=ar2)' "$WORK/ts-g.csv"
expect_exit 1
expect_stderr "control must be ar1, rw1, rw2 or iid, not 'ar2'"
run "$GMM_INFER" fit --formula 'y ~ f(t, ar1, rho=1.5)' "$WORK/ts-g.csv"
expect_exit 1
expect_stderr 'rho = 1.5 is not in \(-1, 1\)'
run "$GMM_INFER" fit --formula 'y ~ f(t, rw1, group=g, control=rw1)' "$WORK/ts-g.csv"
expect_exit 1
expect_stderr 'intrinsic main model with an intrinsic group structure'
