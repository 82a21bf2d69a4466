# shellcheck shell=bash
# 78_predict_lme4.sh -- predict of y ~ x + f(g, iid) (lme4: y ~ x + (1 | g)) at lme4's
# estimates against lme4 1.1-31 and a dense computation (scripts/make-lme4-predict-fixtures.R:
# lmer at REML = FALSE, glmer's Laplace for Poisson), every number to 1e-6 relative (a mean
# relative to the larger of |mean| and its sd):
#
#   - --re none: the fixed effects alone, predict(m, re.form = NA), at new rows (levels of the
#     data or not) and at the data rows, with the variance x' C x of the coefficients'
#     estimate (C: the inverse observed information, dense);
#   - the default (--re all) at new rows: predict(m, newdata, allow.new.levels = TRUE) -- a
#     new level's effect its prior, mean 0 -- with the group effect's conditional variance
#     (ranef's postVar), or the group variance at a new level;
#   - --terms: the coefficients with sqrt(C_kk), each level's conditional mode and sd
#     (ranef(m, condVar = TRUE)).
# Sourced by tests/cli/run.sh (see there for the helpers).

lpx="$ROOT/tests/fixtures/lme4_predict"

# Output $1's columns $3 (mean) and $4 (var or sd) against expected $2's columns $5 and $6,
# row by row in order (the first column, a level, need not be unique): |d| <= 1e-6 max(|m|,
# sd) for the mean, 1e-6 relative for the variance or sd.  $7 "sd": the 4th columns are sds.
lp_match() {
    awk -F, -v cm="$3" -v cv="$4" -v em="$5" -v ev="$6" -v sd="${7:-}" '
        function abs(x) { return x < 0 ? -x : x }
        NR == FNR { if (FNR > 1) { m[FNR] = $em; v[FNR] = $ev; n = FNR }; next }
        FNR > 1 { if (!(FNR in m)) { print "row " FNR - 1 ": no expected row"; bad = 1; next }
            s = sd ? v[FNR] : sqrt(v[FNR]); sc = abs(m[FNR]) > s ? abs(m[FNR]) : s
            if (abs($cm - m[FNR]) > 1e-6 * sc || abs($cv - v[FNR]) > 1e-6 * abs(v[FNR])) {
                print "row " FNR - 1 ": " $cm " " $cv ", expected " m[FNR] " " v[FNR]; bad = 1 }
            seen = FNR }
        END { if (seen != n) { print seen - 1 " rows, expected " n - 1; bad = 1 }; exit bad }' \
        "$2" "$1"
}

for set in gauss pois; do
    begin "predict --re none ($set): lme4's predict(re.form = NA) and the coefficients' variance"
    run "$GMM_INFER" predict --model "$lpx/${set}_model.json" --at "$lpx/${set}_new.csv" --re none
    expect_exit 0
    expect_stderr_empty
    lp_match "$OUT" "$lpx/${set}_expected.csv" 2 3 2 3 > "$CASE_TMP/cmp" ||
        fail "$(head -3 "$CASE_TMP/cmp")"
    if [[ $set == pois ]]; then
        # the rate column: the mean of exp(f) under the estimate's normal, exp(m + v / 2)
        paste -d, "$OUT" "$lpx/${set}_expected.csv" | awk -F, 'NR > 1 {
            r = exp($11 + $12 / 2); d = $6 - r; if (d < 0) d = -d
            if (d > 1e-6 * r) { print "row " NR - 1 ": rate " $6 ", exp(m + v/2) " r; bad = 1 } }
            END { exit bad }' > "$CASE_TMP/cmp" || fail "$(head -3 "$CASE_TMP/cmp")"
    fi

    begin "predict --re none ($set) at the data rows: predict(m, re.form = NA)"
    run "$GMM_INFER" predict --model "$lpx/${set}_model.json" --re none
    expect_exit 0
    lp_match "$OUT" "$lpx/${set}_fixed.csv" 2 3 2 3 > "$CASE_TMP/cmp" ||
        fail "$(head -3 "$CASE_TMP/cmp")"

    begin "predict ($set) at new rows: allow.new.levels = TRUE, a new level's prior variance"
    run "$GMM_INFER" predict --model "$lpx/${set}_model.json" --at "$lpx/${set}_new.csv"
    expect_exit 0
    lp_match "$OUT" "$lpx/${set}_expected.csv" 2 3 4 5 > "$CASE_TMP/cmp" ||
        fail "$(head -3 "$CASE_TMP/cmp")"
    cut -d, -f1 "$OUT" > "$CASE_TMP/levels"
    cut -d, -f2 "$lpx/${set}_new.csv" | sed '1s/.*/node/' > "$CASE_TMP/want"
    cmp -s "$CASE_TMP/levels" "$CASE_TMP/want" || fail "the rows are not labelled by their levels"

    begin "predict --terms ($set): the coefficients' se and ranef's modes and conditional sds"
    run "$GMM_INFER" predict --model "$lpx/${set}_model.json" --terms
    expect_exit 0
    # the same rows (term and level), ranef's sorted by level, the tool's in data order
    lp_sorted() { head -1 "$1"; tail -n +2 "$1" | sort -t, -k1,1 -k2,2; }
    lp_sorted "$OUT" > "$CASE_TMP/got"
    lp_sorted "$lpx/${set}_terms.csv" > "$CASE_TMP/want"
    cmp -s <(cut -d, -f1,2 "$CASE_TMP/got") <(cut -d, -f1,2 "$CASE_TMP/want") ||
        fail "terms and levels differ from ranef's"
    lp_match "$CASE_TMP/got" "$CASE_TMP/want" 3 4 3 4 sd > "$CASE_TMP/cmp" ||
        fail "$(head -3 "$CASE_TMP/cmp")"
done

begin "predict --re: all or none, and none excludes --terms and --draws"
run "$GMM_INFER" predict --model "$lpx/gauss_model.json" --re some
expect_exit 2
expect_stderr "gmm-infer predict: --re: expected 'all' or 'none', got 'some'"
run "$GMM_INFER" predict --model "$lpx/gauss_model.json" --re none --terms
expect_exit 2
expect_stderr "gmm-infer predict: --re none excludes --terms and --draws"
run "$GMM_INFER" predict --model "$lpx/gauss_model.json" --re none --draws "$lpx/gauss.csv"
expect_exit 2
expect_stderr "--re none excludes --terms and --draws"

begin "predict --re all is the default"
run "$GMM_INFER" predict --model "$lpx/pois_model.json" --at "$lpx/pois_new.csv"
cp "$OUT" "$CASE_TMP/default.csv"
run "$GMM_INFER" predict --model "$lpx/pois_model.json" --at "$lpx/pois_new.csv" --re all
expect_exit 0
cmp -s "$OUT" "$CASE_TMP/default.csv" || fail "--re all differs from the default"

begin "predict at new levels says which rows take the prior, and --re none does not"
run "$GMM_INFER" predict --model "$lpx/gauss_model.json" --at "$lpx/gauss_new.csv"
expect_exit 0
expect_stderr "note: 3 rows at a level the model's data do not have \(first [^ ]*gauss_new\.csv:3: column 'g', level 'new1'\): a new group, whose effect is the prior's, mean 0 and variance f\.g\.variance = 0\.348483"
run "$GMM_INFER" predict --model "$lpx/gauss_model.json" --at "$lpx/gauss_new.csv" --re none
expect_exit 0
expect_stderr_empty

# A Poisson model of structured terms: besag on a graph and rw2 (tests/fixtures/stack).
sfx="$ROOT/tests/fixtures/stack"
sp="$CASE_TMP/sp.json"
"$GMM_INFER" fit --formula "n ~ x1 + f(node, besag, graph=$sfx/edges.csv) + f(week, rw2)" \
    --likelihood poisson -o "$sp" "$sfx/predict_pois_data.csv" 2> /dev/null
b0=$(json_num "$sp" intercept)
b1=$(json_num "$sp" coef.x1)
se0=$(sed -n '/"std_errors"/,/}/p' "$sp" | json_key intercept)

begin "predict --re none drops structured terms too: a node off the graph, any week, X beta"
spn="$CASE_TMP/sp_new.csv"
printf 'node,week,x1\n99,-40,0\n2,1.87,-0.5\n0,3.3,1.25\n' > "$spn"
run "$GMM_INFER" predict --model "$sp" --at "$spn" --re none
expect_exit 0
awk -F, -v b0="$b0" -v b1="$b1" -v s0="$se0" 'NR == FNR { if (FNR > 1) x[FNR] = $3; next }
    FNR > 1 { m = b0 + b1 * x[FNR]; d = $2 - m; if (d < 0) d = -d; e = m < 0 ? -m : m
        if (d > 1e-12 * (e > 1 ? e : 1)) { print "row " FNR - 1 ": mean " $2 ", X beta " m; bad = 1 }
        # at x1 = 0 the variance is the squared standard error of the intercept (fit):
        # two central-difference Hessians of the exact gradient (by fit, and by predict
        # after its own Laplace evaluations), each good to about 1e-6 relative on this
        # model (1.6e-7 to 1.3e-6 apart across OpenBLAS kernels and builds), so 1e-5
        if (x[FNR] == 0) { v = s0 * s0; d = $3 - v; if (d < 0) d = -d
            if (d > 1e-5 * v) { print "row " FNR - 1 ": var " $3 ", se^2 " v; bad = 1 } }
        n++ }
    END { exit bad || n != 3 }' "$spn" "$OUT" > "$CASE_TMP/cmp" ||
    fail "$(head -3 "$CASE_TMP/cmp")"
run "$GMM_INFER" predict --model "$sp" --re none
expect_exit 0
awk -F, -v b0="$b0" -v b1="$b1" 'NR == FNR { if (FNR > 1) x[FNR] = $3; next }
    FNR > 1 { m = b0 + b1 * x[FNR]; d = $2 - m; if (d < 0) d = -d
        if (d > 1e-12 * (m < 0 ? -m : m) + 1e-15) { print "row " FNR - 1 ": " $2 ", X beta " m; bad = 1 }
        n++ }
    END { exit bad || n != 40 }' "$sfx/predict_pois_data.csv" "$OUT" > "$CASE_TMP/cmp" ||
    fail "$(head -3 "$CASE_TMP/cmp")"

begin "predict at a node off a besag term's graph names the row, column, node and term"
run "$GMM_INFER" predict --model "$sp" --at "$spn"
expect_exit 1
expect_stderr "sp_new\.csv:2: column 'node': '99' is not a node of the graph of f\(node, besag\) \([^)]*edges\.csv\)"

begin "predict --re none of a kernel term at new inputs: the intercept alone, its se^2 the variance"
cm="$CASE_TMP/coal.json"
"$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$cm" 2> /dev/null
b0=$(json_num "$cm" intercept)
se0=$(sed -n '/"std_errors"/,/}/p' "$cm" | json_key intercept)
run "$GMM_INFER" predict --model "$cm" --grid 1860:1960:50 --re none
expect_exit 0
awk -F, -v b0="$b0" -v s0="$se0" 'FNR > 1 { d = $2 - b0; e = $3 - s0 * s0
        if (d < 0) d = -d; if (e < 0) e = -e
        if (d > 1e-12 * (b0 < 0 ? -b0 : b0) || e > 1e-6 * s0 * s0) {
            print "x " $1 ": " $2 " " $3 ", intercept " b0 " se^2 " s0 * s0; bad = 1 }
        n++ }
    END { exit bad || n != 3 }' "$OUT" > "$CASE_TMP/cmp" || fail "$(head -3 "$CASE_TMP/cmp")"

begin "predict --re none --observed adds the noise variance to the coefficients'"
s2e=$(json_num "$lpx/gauss_model.json" likelihood.variance)
run "$GMM_INFER" predict --model "$lpx/gauss_model.json" --at "$lpx/gauss_new.csv" --re none \
    --observed
expect_exit 0
awk -F, -v s="$s2e" 'NR == FNR { if (FNR > 1) v[FNR] = $3 + s; next }
    FNR > 1 { d = $3 - v[FNR]; if (d < 0) d = -d
        if (d > 1e-6 * v[FNR]) { print "row " FNR - 1 ": var " $3 ", expected " v[FNR]; bad = 1 }
        n++ }
    END { exit bad || n != 6 }' "$lpx/gauss_expected.csv" "$OUT" > "$CASE_TMP/cmp" ||
    fail "$(head -3 "$CASE_TMP/cmp")"

begin "predict --re none of a model not at a maximum: no variance for its coefficients, an error"
run "$GMM_INFER" predict --model "$ROOT/tests/fixtures/stack/model_rw1_iid_x1.json" \
    --at "$ROOT/tests/fixtures/stack/predict_new.csv" --re none
expect_exit 1
expect_stderr "gmm-infer predict: the coefficients' variance: the observed information is not positive definite: the fit is not at a maximum"
expect_stdout_empty
