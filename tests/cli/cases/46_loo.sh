# shellcheck shell=bash
# 46_loo.sh -- `gmm-infer loo`: R's loo 2.5.1 on the committed fixtures
# (totals and pointwise to 1e-8), hmc --log-lik then loo on a small Gaussian
# series (consistent fields, PSIS-LOO within its Monte Carlo error of the
# exact LOO of the same model), log_lik columns accepted by predict --draws,
# and errors.
# Sourced by tests/cli/run.sh (see there for the helpers).

fx="$ROOT/tests/fixtures/loo"

begin "loo --help on stdout, exit 0; listed in the top-level usage"
run "$GMM_INFER" loo --help
expect_exit 0
expect_stdout '^Usage: gmm-infer loo \[OPTIONS\] DRAWS\.csv\.\.\.'
expect_stdout -- '-p, --pointwise FILE'
expect_stderr_empty
run "$GMM_INFER" --help
expect_stdout '^  loo +PSIS-LOO and WAIC'

begin "loo of the fixture draws matches loo::loo and loo::waic (1e-8)"
for set in normal one heavy mixed ties clean; do
    run "$GMM_INFER" loo -p "$CASE_TMP/pw_$set.csv" "$fx/draws_$set.csv"
    expect_exit 0
    cp "$OUT" "$CASE_TMP/loo_$set.json"
    while IFS=, read -r measure est se; do
        [[ $measure == measure ]] && continue
        got=$(json_num "$CASE_TMP/loo_$set.json" "$measure")
        if [[ $measure == mcse_elpd_loo ]]; then # no SE; loo's NA is null
            if [[ $est == NA ]]; then
                [[ $got == null ]] || fail "$set $measure: $got, loo NA"
            else
                close_to "$got" "$est" 1e-8 || fail "$set $measure: $got, loo $est"
            fi
            continue
        fi
        gse=$(json_num "$CASE_TMP/loo_$set.json" "se_$measure")
        close_to "$got" "$est" 1e-8 || fail "$set $measure: $got, loo $est"
        close_to "$gse" "$se" 1e-8 || fail "$set se_$measure: $gse, loo $se"
    done < "$fx/totals_$set.csv"
    # pointwise: our columns 2..10 against the fixture's 1..9
    verdict=$(awk -F, '
        NR == FNR { if (FNR > 1) { n++; for (k = 2; k <= 10; k++) ours[n, k - 1] = $k }; next }
        FNR == 1 { next }
        { m++
          for (k = 1; k <= 9; k++) {
              a = ours[m, k]; b = $k
              if (a == "Inf" || b == "Inf" || a == "NA" || b == "NA") { if (a != b) { print "row " m " col " k ": " a " vs " b; exit }; continue }
              d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b
              if (d > 1e-8 * s) { print "row " m " col " k ": " a " vs " b; exit }
          } }
        END { if (m != n) print m " rows in loo, " n " ours"; else print "ok" }' \
        "$CASE_TMP/pw_$set.csv" "$fx/pointwise_$set.csv")
    [[ $verdict == ok ]] || fail "$set pointwise against loo: $verdict"
done
expect_file "$CASE_TMP/pw_normal.csv" '^variable,elpd_loo,p_loo,looic,pareto_k,r_eff,elpd_waic,p_waic,waic,mcse_elpd_loo$'
# the fixtures' outliers: one k in (0.5, 0.7], one > 1; heavy: some > 1
expect_file "$CASE_TMP/loo_normal.json" '"ok": 1,'
expect_file "$CASE_TMP/loo_normal.json" '"very_bad": 1$'
expect_file "$CASE_TMP/loo_ties.json" '^ *null,?$'

begin "hmc --log-lik then loo: a column per observed row, consistent JSON, near exact LOO; predict takes the draws"
{
    echo "t,y"
    awk 'BEGIN { for (i = 0; i < 60; i++) printf "%.3f,%.6f\n", i * 0.1, sin(i * 0.1) + 0.1 * cos(7 * i) }'
    echo "2.5,0.7"
    echo "7.0,NA"
} > "$CASE_TMP/small.csv"
# Fixed hyperparameters at which no observation has a leverage v_i / s2 above
# 0.27 (v_i: f's posterior variance at row i): that is the tail index k of its
# importance ratios 1 / p(y_i | f), so their variance is finite (k < 1/2) and
# PSIS-LOO has an ordinary Monte Carlo error.
kern='matern32(variance=1, lengthscale=3)'
s2=0.1
run "$GMM_INFER" hmc "$CASE_TMP/small.csv" --kernel "$kern" --noise $s2 --log-lik \
    --chains 2 --warmup 200 --draws 500 --seed 3 --quiet -o "$CASE_TMP/d.csv"
expect_exit 0
expect_file "$CASE_TMP/d.csv" ',f\[62\],log_lik\[1\],log_lik\[2\],'
expect_file "$CASE_TMP/d.csv" ',log_lik\[61\]$'
# Each log_lik[r] is the Gaussian density of y_r at the draw's f[r] with the
# noise variance s2 (f as written, on the data's scale: the library works
# with centred data, so rounding of the centre allows ~1e-12 relative to the
# two terms c = -log(2 pi s2) / 2 and q = (y - f)^2 / (2 s2), whose difference
# is near 0 for some draws).
verdict=$(awk -F, -v s2=$s2 '
    NR == FNR { if (FNR > 1) y[FNR - 1] = $2; next }
    FNR == 1 { for (k = 1; k <= NF; k++) {
                   if ($k ~ /^f\[/) fc[substr($k, 3) + 0] = k
                   if ($k ~ /^log_lik\[/) lc[substr($k, 9) + 0] = k }
               next }
    { for (r in lc) {
          c = -0.5 * log(2 * 3.141592653589793 * s2); q = (y[r] - $(fc[r]))^2 / (2 * s2)
          want = c - q; d = $(lc[r]) - want; if (d < 0) d = -d
          if (d > 1e-9 * ((c < 0 ? -c : c) + q)) { print "draw " FNR - 1 " log_lik[" r "]: " $(lc[r]) " vs " want; exit }
          n++ } }
    END { if (n != 61 * 1000) print n " values checked"; else print "ok" }' \
    "$CASE_TMP/small.csv" "$CASE_TMP/d.csv")
[[ $verdict == ok ]] || fail "log_lik against the Gaussian density: $verdict"
run "$GMM_INFER" loo "$CASE_TMP/d.csv"
expect_exit 0
j="$CASE_TMP/loo.json"
cp "$OUT" "$j"
expect_file "$j" '"n_obs": 61,'
expect_file "$j" '"n_draws": 1000,'
expect_file "$j" '"n_chains": 2,'
for k in elpd_loo se_elpd_loo mcse_elpd_loo p_loo se_p_loo looic se_looic elpd_waic \
         se_elpd_waic p_waic se_p_waic waic se_waic; do
    [[ -n $(json_num "$j" "$k") ]] || fail "no $k"
done
close_to "$(json_num "$j" looic)" "$(awk -v e="$(json_num "$j" elpd_loo)" 'BEGIN { printf "%.17g", -2 * e }')" 1e-14 ||
    fail "looic is not -2 elpd_loo"
close_to "$(json_num "$j" waic)" "$(awk -v e="$(json_num "$j" elpd_waic)" 'BEGIN { printf "%.17g", -2 * e }')" 1e-14 ||
    fail "waic is not -2 elpd_waic"
nk=$(sed -n '/"pareto_k": \[/,/\]/p' "$j" | grep -cE '^ *(-?[0-9]|null)')
[[ $nk -eq 61 ]] || fail "$nk Pareto k values, expected 61"
# The exact LOO of this Gaussian model at fixed hyperparameters: from the
# posterior N(m_i, v_i) of f at row i, the cavity without y_i has precision
# 1/v_i - 1/s2 and mean (m_i/v_i - y_i/s2) / that, and the LOO predictive
# is N(y_i; mean, 1/precision + s2).
run "$GMM_INFER" fit "$CASE_TMP/small.csv" --kernel "$kern" --noise $s2 \
    --fix 0.matern32.variance --fix 0.matern32.lengthscale --fix likelihood.variance \
    -o "$CASE_TMP/m.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
exact=$(paste -d, <(tail -n +2 "$CASE_TMP/small.csv") <(tail -n +2 "$OUT") | awk -F, -v s2=$s2 '
    $2 != "NA" { m = $4; v = $5; pc = 1 / v - 1 / s2; mc = (m / v - $2 / s2) / pc; sv = 1 / pc + s2
                 e += -0.5 * log(2 * 3.141592653589793 * sv) - ($2 - mc)^2 / (2 * sv) }
    END { printf "%.17g", e }')
# PSIS-LOO against it: loo's mcse_elpd_loo adds the rows' errors as if they
# were independent, but neighbouring rows' estimates share the draws (over
# seeds the error of 4000 draws had 2x that sd), so the standard error comes
# from independent chains instead: 40 chains of 250 draws, each chain's
# elpd_loo on its own, t = (mean - exact) / (sd / sqrt(40)) is Student's t
# with 39 df (normal per-chain errors), shifted by their bias, -sum_i
# var_i / 2 ~ -0.004 from a log of an average of 250 ratios, 0.13 sd of the
# mean here.  |t| <= 6 fails falsely with P(t_39 > 5.87) + P(t_39 > 6.13) =
# 5.6e-7.  The mean's sd is ~0.03 nats: a log-likelihood missing its
# normalising constant or a row would be off by tens.
run "$GMM_INFER" hmc "$CASE_TMP/small.csv" --kernel "$kern" --noise $s2 --log-lik \
    --chains 40 --warmup 200 --draws 250 --seed 3 --quiet -o "$CASE_TMP/c.csv"
expect_exit 0
awk -F, -v dir="$CASE_TMP" 'NR == 1 { h = $0; next }
    { f = dir "/chain_" $1 ".csv"; if (!(f in seen)) { print h > f; seen[f] = 1 }; print > f }' \
    "$CASE_TMP/c.csv"
for c in $(seq 40); do
    "$GMM_INFER" loo "$CASE_TMP/chain_$c.csv" 2>/dev/null | json_key elpd_loo
done > "$CASE_TMP/per-chain"
t=$(awk -v x="$exact" '{ n++; s += $1; ss += $1 * $1 }
    END { m = s / n; sd = sqrt((ss - n * m * m) / (n - 1))
          printf "%d chains: mean %.6g, sd %.3g, t %.2f", n, m, sd, (m - x) / (sd / sqrt(n))
          exit !(n == 40 && sd > 0 && (m - x) ^ 2 <= 36 * sd * sd / n) }' "$CASE_TMP/per-chain") ||
    fail "elpd_loo per chain off the exact LOO $exact: $t"

# draws with log_lik columns are still the model's draws for predict
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --log-lik --chains 2 --warmup 50 --draws 20 \
    --quiet -o "$CASE_TMP/dm.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/dm.csv"
expect_exit 0
cp "$CASE_TMP/dm.csv" "$CASE_TMP/nosidecar.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/nosidecar.csv"
expect_exit 0
expect_stderr 'only that their columns are its columns'
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --log-lik --chains 1 --warmup 20 --draws 5 \
    --quiet --format cmdstan -o "$CASE_TMP/cs.csv"
expect_exit 0
expect_file "$CASE_TMP/cs_1.csv" ',f\.62,log_lik\.1,log_lik\.2,'

begin "loo errors: no log_lik columns, non-finite draws, usage"
run "$GMM_INFER" loo "$ROOT/tests/fixtures/summary/draws_odd.csv"
expect_exit 1
expect_stderr '^gmm-infer loo: no log_lik\[i\] columns in the draws'
printf '.chain,log_lik[1]\n1,-1\n1,-Inf\n1,-2\n' > "$CASE_TMP/inf.csv"
run "$GMM_INFER" loo "$CASE_TMP/inf.csv"
expect_exit 1
expect_stderr "inf\\.csv:3: column 'log_lik\\[1\\]': '-Inf' is not finite"
run "$GMM_INFER" loo
expect_exit 2
run "$GMM_INFER" loo --bogus "$fx/draws_one.csv"
expect_exit 2
run "$GMM_INFER" loo - -
expect_exit 2
