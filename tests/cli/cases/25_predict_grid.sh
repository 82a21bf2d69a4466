# shellcheck shell=bash
# 25_predict_grid.sh -- predict on a grid over the data of a fitted model:
# grid points next to inputs (closer than the model's accuracy limit for
# intervals between inputs) are answered, and the band follows the data.
# Sourced by tests/cli/run.sh (see there for the helpers).

begin "predict --grid over weekly CO2 data: queries next to inputs are answered"
# The weekly record from 1990 on (417 rows): x in decimal years, so a grid of
# step 0.01 lands within 1e-4 of some inputs (1996.53 vs 1996.53005464481).
awk -F, 'NR == 1 || $1 >= 1990' "$ROOT/data/co2_train.csv" >"$CASE_TMP/weekly.csv"
run "$GMM_INFER" fit "$CASE_TMP/weekly.csv" -o "$CASE_TMP/w.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/w.json" --grid 1990:1998:0.01 --observed \
    --level 0.95 -o "$CASE_TMP/grid.csv"
expect_exit 0
expect_stdout_empty
expect_stderr_empty
expect_file "$CASE_TMP/grid.csv" '^x,mean,var,lower,upper,level$'
expect_file "$CASE_TMP/grid.csv" '^1998,'
[[ $(wc -l <"$CASE_TMP/grid.csv") -eq 802 ]] || fail "grid.csv should have 801 rows"
# The grid does come closer to an input than the accuracy limit of the
# fitted Matern-3/2 factor (3e-4 lengthscales): queries are not states, so
# the limit does not apply to them and such a query must be answered.
ell=$(sed -n 's/^ *"0\.matern32\.lengthscale": \(.*\),$/\1/p' "$CASE_TMP/w.json")
near=$(awk -F, -v ell="$ell" '
    FNR == 1 { next }
    NR == FNR { xs[++n] = $1; next }
    { for (i = 1; i <= n; i++) { d = $1 - xs[i]; if (d < 0) d = -d; if (m == "" || d < m) m = d } }
    END { print (ell > 0 && m < 3e-4 * ell) ? "yes" : "no: " m " vs 3e-4 * " ell }' \
    "$CASE_TMP/weekly.csv" "$CASE_TMP/grid.csv")
[[ "$near" == yes ]] || fail "no grid point below the accuracy limit from an input ($near)"
# Every row finite with a positive variance and the band mean -/+ 1.959964
# sd at level 0.95; that band of y (--observed) at the grid point nearest
# each input holds at least 90% of the data.
check=$(awk -F, '
    FNR == 1 { next }
    NR == FNR {
        h = 1.959963984540054 * sqrt($3); tol = 1e-12 * (($2 < 0 ? -$2 : $2) + h)
        if ($2 + 0 != $2 || !($3 > 0) || $6 != "0.95" ||
            ($4 - ($2 - h)) ^ 2 > tol ^ 2 || ($5 - ($2 + h)) ^ 2 > tol ^ 2) bad = bad " " $1
        i = sprintf("%.0f", ($1 - 1990) / 0.01); lo[i] = $4; hi[i] = $5; next
    }
    {
        i = sprintf("%.0f", ($1 - 1990) / 0.01); n++
        if ($2 >= lo[i] && $2 <= hi[i]) in_band++
    }
    END {
        if (bad != "") { print "bad rows at" bad; exit }
        print (n > 400 && in_band >= 0.9 * n) ? "ok" : "band holds " in_band " of " n
    }' "$CASE_TMP/grid.csv" "$CASE_TMP/weekly.csv")
[[ "$check" == ok ]] || fail "grid predictions: $check"
