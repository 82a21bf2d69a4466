# shellcheck shell=bash
# 53_hmc_diagnostics.sh -- hmc's warnings after sampling, as CmdStan's
# diagnose prints them: tree-depth saturation and E-BFMI per chain,
# divergences; each against the draws' own sampler columns, and none on a
# healthy run.

coal="$ROOT/data/coal.csv"

# columns: .chain,.iteration,.draw,lp__,accept_stat__,stepsize__,treedepth__,
# n_leapfrog__,divergent__,energy__

begin "hmc warns per chain when transitions hit the maximum tree depth"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$CASE_TMP/coal.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --metric prior --max-depth 2 --chains 2 \
    --warmup 100 --draws 100 --quiet -o "$CASE_TMP/d.csv"
expect_exit 0
# Over 10 seeds all 2000 transitions reached depth 2 (the prior map's trees have
# depth 5 here): a chain with none fails falsely with P < 0.5^100 = 8e-31 even
# if each transition stopped short with probability 1/2.
for c in 1 2; do
    k=$(awk -F, -v c=$c 'NR > 1 && $1 == c && $7 == 2 { k++ } END { print k + 0 }' "$CASE_TMP/d.csv")
    [[ $k -gt 0 ]] || fail "chain $c: no transition at depth 2"
    pct=$(awk -v k="$k" 'BEGIN { printf "%.3g", 100 * k / 100 }')
    expect_stderr "^gmm-infer hmc: warning: chain $c: $k of 100 transitions \($pct%\) hit the maximum tree depth 2 \(3 leapfrog steps\): trajectories cut short explore slowly \(try --metric laplace, or --max-depth 4\)$"
done

begin "hmc warns per chain on an E-BFMI below 0.3, the value computed from energy__"
# no warm-up, one leapfrog step per transition, from the mode of a
# high-count series: the energy drifts towards the typical set far slower
# than the momenta refresh it
awk 'BEGIN { print "x,y"; for (i = 1; i <= 2000; i++) printf "%d,%d\n", i, int(20 * exp(sin(i / 100)) + 0.5) }' \
    > "$CASE_TMP/series.csv"
run "$GMM_INFER" fit "$CASE_TMP/series.csv" --x x --y y --likelihood poisson \
    --kernel 'matern32(variance=1, lengthscale=100)' -o "$CASE_TMP/s.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/s.json" --metric laplace --sampler hmc --steps 1 \
    --warmup 0 --draws 200 --chains 2 --quiet -o "$CASE_TMP/d.csv"
expect_exit 0
# Over 10 seeds the chains' E-BFMI was 0.022-0.034 (sd 0.004): 0.3 is 60 sd off.
for c in 1 2; do
    # sum (E_n - E_{n-1})^2 / sum (E_n - mean E)^2 over the chain's draws
    e=$(awk -F, -v c=$c 'NR > 1 && $1 == c { e[++n] = $10; m += $10 }
        END { m /= n; for (i = 1; i <= n; i++) { d += (e[i] - m)^2; if (i > 1) s += (e[i] - e[i-1])^2 }
              printf "%.3g", s / d }' "$CASE_TMP/d.csv")
    awk -v e="$e" 'BEGIN { exit !(e < 0.3) }' || fail "chain $c: E-BFMI $e, expected below 0.3"
    expect_stderr "^gmm-infer hmc: warning: chain $c: E-BFMI ${e//./\\.} is below 0\.3: the momenta explore the energy distribution slowly \(try a longer --warmup, --metric prior, or reparametrise the model\)$"
done
expect_no_stderr 'tree depth|divergent'

begin "hmc warns on divergent transitions with their count and share"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$CASE_TMP/coal.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --target-accept 0.05 --chains 2 \
    --warmup 100 --draws 100 --quiet -o "$CASE_TMP/d.csv"
expect_exit 0
# Over 10 seeds all 200 transitions diverged: none of 200 is a false failure with
# P < 0.5^200 even if each diverged with probability 1/2 only.
k=$(awk -F, 'NR > 1 { k += $9 } END { print k + 0 }' "$CASE_TMP/d.csv")
[[ $k -gt 0 ]] || fail "no divergent transition at --target-accept 0.05"
pct=$(awk -v k="$k" 'BEGIN { printf "%.3g", 100 * k / 200 }')
expect_stderr "^gmm-infer hmc: warning: $k of 200 transitions \($pct%\) after warm-up were divergent transitions: the draws may be biased \(try --target-accept 0\.95; if that does not remove them, reparametrise the model\)$"

begin "a healthy hmc run prints no warning, quiet or not"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$CASE_TMP/coal.json"
expect_exit 0
# The Laplace map (auto) on these data: over 10 seeds of 2 x 500 draws (52_hmc_metric)
# every tree had depth 3, not 10, E-BFMI 0.96-1.23 per chain (sd 0.08; ~0.1 from the 300
# draws here: 0.3 is 7 sd off),
# and no transition diverged (the whitened Hessian is ~I, the step size ~0.5, 2 would be
# unstable).
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --chains 2 --warmup 300 --draws 300 \
    -o "$CASE_TMP/d.csv"
expect_exit 0
expect_stderr '^gmm-infer hmc: chain 2: step size'
expect_no_stderr 'warning'
run "$GMM_INFER" hmc --model "$CASE_TMP/coal.json" --chains 2 --warmup 300 --draws 300 \
    --quiet -o "$CASE_TMP/d.csv"
expect_exit 0
expect_stderr_empty
