# shellcheck shell=bash
# 49_formula_stack_kernel.sh -- a kernel spec stacked with other f() terms (stack.h, KERNEL)
# against scripts/make-stack-kernel-fixtures.py's dense Gaussian process
# (tests/fixtures/stack_kernel/): loglik of matern32 + iid + x1 and of the sum matern32 + matern52
# + iid + x1 (1e-8 relative), the Poisson matern32 + iid Laplace value against Rasmussen &
# Williams' Algorithm 3.1; fit and its model file, gradcheck (Gaussian and Laplace), predict at
# the data rows, at new rows (--at) and per term (--terms), score of new rows and --loo, vi's
# Gaussian ELBO (the dense value), hmc's draws read back by predict (within their Monte Carlo
# error of the dense posterior); --verbose's sizes and the rounding bound; a damped periodic summand
# in the square-root form, also beside an intrinsic rw1 (loglik, gradcheck, predict at the rows
# and new rows, score, fit, hmc with the prior metric, vi; the Laplace metric refused with the
# reason); inputs below the Cholesky's spacing limit refused.
# Sourced by tests/cli/run.sh (see there for the helpers).

skx="$ROOT/tests/fixtures/stack_kernel"

sk_expected() { awk -F, -v k="$1" '$1 == k { print $2 }' "$skx/expected.csv"; }

# predict --terms' rows of f() terms ($OUT) against the dense term,level,mean,sd file $1:
# means and sds within 1e-8 sd; every dense row seen.
sk_terms_match() {
    awk -F, 'NR == FNR { if (FNR > 1) { k = $1 "," ($1 == "f.t" ? $2 + 0 : $2); m[k] = $3; s[k] = $4; n++ }; next }
        FNR > 1 && $1 ~ /^f\./ { k = $1 "," ($1 == "f.t" ? $2 + 0 : $2)
            if (!(k in m)) { print "no dense row " k; bad = 1; next }
            dm = $3 - m[k]; ds = $4 - s[k]; if (dm < 0) dm = -dm; if (ds < 0) ds = -ds
            if (dm > 1e-8 * s[k] || ds > 1e-8 * s[k]) { print k ": " $3 " " $4 " dense " m[k] " " s[k]; bad = 1 }
            seen++ }
        END { if (seen != n) { print seen " rows, dense " n; bad = 1 }; exit bad }' \
        "$1" "$OUT" > "$CASE_TMP/cmp" || fail "$(cat "$CASE_TMP/cmp")"
}
# predict --draws' means ($OUT) of 1000 draws (summary $2) within Monte Carlo error of the
# dense posterior rows in $1: mc_means with K = 6.5, a false failure 40 x 3e-9 = 1.2e-7
sk_draws_match() {
    mc_means "$2" "$1" 6.5 1000 "$OUT" > "$CASE_TMP/cmp" || fail "$(cat "$CASE_TMP/cmp")"
    [[ $(wc -l < "$OUT") -eq 41 ]] || fail "predict --draws: $(wc -l < "$OUT") lines, expected 41"
}

for c in m32 sum pois; do
    begin "formula stack kernel: loglik of $c equals the dense GP's"
    run "$GMM_INFER" loglik --model "$skx/model_$c.json"
    expect_exit 0
    got=$(json_num "$OUT" loglik)
    want=$(sk_expected "$c")
    close_to "$got" "$want" 1e-8 || fail "$c: loglik $got, dense $want"
done

begin "formula stack kernel: --verbose gives the sizes and the Cholesky's rounding bound"
run "$GMM_INFER" loglik --verbose --model "$skx/model_sum.json"
expect_exit 0
expect_stderr 'f\.t \(kernel\): 190 latents, f\.g \(iid\): 4 latents; n = 194'
expect_stderr "factorisation: Cholesky \\(the Cholesky's rounding bound at these parameters"

begin "formula stack kernel: fit names the kernel's parameters as a one-term formula does"
run "$GMM_INFER" fit --formula "y ~ x1 + f(t, 'matern32') + f(g, iid)" "$skx/data.csv" \
    -o "$CASE_TMP/m.json"
expect_exit 0
for p in f.t.matern32.variance f.t.matern32.lengthscale f.g.variance likelihood.variance \
    intercept coef.x1; do
    expect_file "$CASE_TMP/m.json" "\"$p\""
done
fitted=$(json_num "$CASE_TMP/m.json" loglik)
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$fitted" 1e-12 || fail "loglik --model, fit $fitted"
# the maximum is above the value at the fixture's parameters
awk -v a="$fitted" -v b="$(sk_expected m32)" 'BEGIN { exit !(a >= b) }' ||
    fail "fit's maximum $fitted below the value $(sk_expected m32) at the fixture's parameters"

begin "formula stack kernel: gradcheck passes (exact Gaussian, and Poisson's Laplace)"
run "$GMM_INFER" gradcheck --model "$skx/model_m32.json"
expect_exit 0
expect_stderr 'gradients within tolerance'
run "$GMM_INFER" gradcheck --model "$skx/model_pois.json"
expect_exit 0
expect_stderr 'gradients within tolerance'

begin "formula stack kernel: predict at the data rows is the dense posterior"
run "$GMM_INFER" predict --model "$skx/model_m32.json"
expect_exit 0
rows_match "$OUT" "$skx/rows_expected.csv" 1e-8 > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"

begin "formula stack kernel: predict --at new rows is the dense augmented posterior"
# values before, between, on and after the data's, and a group the data never met
run "$GMM_INFER" predict --model "$skx/model_m32.json" --at "$skx/new.csv"
expect_exit 0
rows_match "$OUT" "$skx/new_expected.csv" 1e-8 > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"

begin "formula stack kernel: score of new rows is log N(y; mean, var + noise) of the dense posterior"
run "$GMM_INFER" score --model "$skx/model_m32.json" "$skx/new.csv" --rows "$CASE_TMP/lpd.csv"
expect_exit 0
expect_stdout '"n": 6'
rows_match "$CASE_TMP/lpd.csv" "$skx/new_expected.csv" 1e-8 lpd > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"

begin "formula stack kernel: score --loo is the dense exact leave-one-out density"
run "$GMM_INFER" score --loo --model "$skx/model_m32.json"
expect_exit 0
expect_stdout '"n": 40'
close_to "$(json_num "$OUT" elpd_loo)" "$(sk_expected loo_m32)" 1e-8 ||
    fail "elpd_loo $(json_num "$OUT" elpd_loo), dense $(sk_expected loo_m32)"

begin "formula stack kernel: predict --terms is the dense posterior of f(t) and of the groups"
run "$GMM_INFER" predict --terms --model "$skx/model_m32.json"
expect_exit 0
sk_terms_match "$skx/terms_m32.csv"

begin "formula stack kernel: vi's Gaussian ELBO is the dense log marginal likelihood"
run "$GMM_INFER" vi --model "$skx/model_m32.json" --quiet -o "$CASE_TMP/v.json"
expect_exit 0
expect_file "$CASE_TMP/v.json" '"converged": true'
close_to "$(json_num "$CASE_TMP/v.json" elbo)" "$(sk_expected m32)" 1e-10 ||
    fail "ELBO $(json_num "$CASE_TMP/v.json" elbo), dense $(sk_expected m32)"
run "$GMM_INFER" vi --model "$skx/model_pois.json" --quiet -o "$CASE_TMP/vp.json"
expect_exit 0
expect_file "$CASE_TMP/vp.json" '"converged": true'

begin "formula stack kernel: hmc's draws, read back by predict, match the dense posterior"
run "$GMM_INFER" hmc --model "$skx/model_m32.json" --warmup 200 --draws 500 --chains 2 \
    -o "$CASE_TMP/d.csv" --summary "$CASE_TMP/s.csv"
expect_exit 0
expect_file "$CASE_TMP/d.csv" 'f\[40\]'
run "$GMM_INFER" predict --model "$skx/model_m32.json" --draws "$CASE_TMP/d.csv"
expect_exit 0
sk_draws_match "$skx/rows_expected.csv" "$CASE_TMP/s.csv"

begin "formula stack kernel: a damped periodic summand takes the square-root form"
# expected_damped.csv: the dense GP with the damped periodic series (the script's kper)
dexp() { awk -F, -v k="$1" '$1 == k { print $2 }' "$skx/expected_damped.csv"; }
for m in per per_pois per_rw1 per_rw1_pois; do
    model="$skx/model_$m.json"
    run "$GMM_INFER" loglik --model "$model" --verbose
    expect_exit 0
    expect_stdout '"factorisation": "square-root"'
    expect_stderr 'square-root form \(a damped kernel\)$'
    got=$(json_num "$OUT" loglik)
    awk -v a="$got" -v b="$(dexp $m)" 'BEGIN { d = a - b; if (d < 0) d = -d
        r = b < 0 ? -b : b; exit !(d <= 1e-8 * r) }' ||
        fail "$m: loglik $got, dense $(dexp $m)"
    run "$GMM_INFER" gradcheck --model "$model"
    expect_exit 0
    expect_no_stdout ',(false|inconclusive)$'
done
run "$GMM_INFER" predict --model "$skx/model_per.json"
expect_exit 0
rows_match "$OUT" "$skx/rows_damped.csv" 1e-8 > "$CASE_TMP/cmp" || fail "$(cat "$CASE_TMP/cmp")"
run "$GMM_INFER" score --loo --model "$skx/model_per.json"
expect_exit 0
got=$(json_num "$OUT" elpd_loo)
awk -v a="$got" -v b="$(dexp loo_per)" 'BEGIN { d = a - b; if (d < 0) d = -d
    r = b < 0 ? -b : b; exit !(d <= 1e-8 * r) }' || fail "loo_per: $got, dense $(dexp loo_per)"
# new rows: h(t) of the demodulated periodic at each value, bridged between states
run "$GMM_INFER" predict --model "$skx/model_per.json" --at "$skx/new.csv"
expect_exit 0
rows_match "$OUT" "$skx/new_damped.csv" 1e-8 > "$CASE_TMP/cmp" || fail "$(cat "$CASE_TMP/cmp")"
# the Poisson one's: the Laplace posterior, which the square-root form's fold holds
run "$GMM_INFER" predict --model "$skx/model_per_pois.json" --at "$skx/new.csv"
expect_exit 0
rows_match "$OUT" "$skx/new_damped_pois.csv" 1e-8 > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"
run "$GMM_INFER" score --model "$skx/model_per.json" "$skx/new.csv" --rows "$CASE_TMP/lpd.csv"
expect_exit 0
rows_match "$CASE_TMP/lpd.csv" "$skx/new_damped.csv" 1e-8 lpd > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"
run "$GMM_INFER" fit --formula "n ~ f(t, 'matern32 + periodic(period=5)') + f(g, iid)" \
    --likelihood poisson "$skx/data.csv" -o "$CASE_TMP/per.json"
expect_exit 0
expect_file "$CASE_TMP/per.json" '"converged": true,$'

begin "formula stack kernel: hmc on a damped periodic summand whitens by the prior per component"
run "$GMM_INFER" hmc --model "$skx/model_per.json" --warmup 150 --draws 500 --chains 2 \
    -o "$CASE_TMP/d.csv" --summary "$CASE_TMP/s.csv"
expect_exit 0
expect_stderr 'metric: prior \(auto: the latent.s precision exists only in the square-root form'
run "$GMM_INFER" predict --model "$skx/model_per.json" --draws "$CASE_TMP/d.csv"
expect_exit 0
sk_draws_match "$skx/rows_damped.csv" "$CASE_TMP/s.csv"
# beside an intrinsic rw1: the assembled stacks' constrained whitening on the other components
run "$GMM_INFER" predict --model "$skx/model_per_rw1.json"
expect_exit 0
rows_match "$OUT" "$skx/rows_damped_rw1.csv" 1e-8 > "$CASE_TMP/cmp" || fail "$(cat "$CASE_TMP/cmp")"
run "$GMM_INFER" hmc --model "$skx/model_per_rw1.json" --warmup 150 --draws 500 --chains 2 \
    -o "$CASE_TMP/d3.csv" --summary "$CASE_TMP/s3.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$skx/model_per_rw1.json" --draws "$CASE_TMP/d3.csv"
expect_exit 0
sk_draws_match "$skx/rows_damped_rw1.csv" "$CASE_TMP/s3.csv"
run "$GMM_INFER" hmc --model "$skx/model_per.json" --metric laplace --warmup 10 --draws 10 \
    -o "$CASE_TMP/d2.csv"
expect_exit 1
expect_stderr 'square-root form \(HMC whitens by the prior, the prior metric; VI goes through the prior.s square root\)$'
[[ ! -e "$CASE_TMP/d2.csv" ]] || fail "hmc left a draws file"

begin "formula stack kernel: vi on a damped periodic summand through the prior's square root"
# Gaussian: q at full band is the exact posterior, its ELBO the dense log likelihood
run "$GMM_INFER" vi --model "$skx/model_per.json" -o "$CASE_TMP/v.json"
expect_exit 0
expect_stderr "KL through the prior's square root"
got=$(json_num "$CASE_TMP/v.json" elbo)
awk -v a="$got" -v b="$(dexp per)" 'BEGIN { d = a - b; if (d < 0) d = -d
    r = b < 0 ? -b : b; exit !(d <= 1e-8 * r) }' || fail "vi per: ELBO $got, dense $(dexp per)"
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
rows_match "$OUT" "$skx/rows_damped.csv" 1e-6 > "$CASE_TMP/cmp" || fail "$(cat "$CASE_TMP/cmp")"

# beside the rw1: q conditioned on the constraint, its ELBO a lower bound within 1e-4 of the
# dense constrained log likelihood (vi's tolerance; 2.3e-6 below it, measured)
run "$GMM_INFER" vi --model "$skx/model_per_rw1.json" -o "$CASE_TMP/v2.json"
expect_exit 0
got=$(json_num "$CASE_TMP/v2.json" elbo)
awk -v a="$got" -v b="$(dexp per_rw1)" 'BEGIN { exit !(a <= b + 1e-9 && a >= b - 1e-4) }' ||
    fail "vi per_rw1: ELBO $got, dense log likelihood $(dexp per_rw1)"

begin "formula stack kernel: a damped kernel with a likelihood that is not log-concave says why not"
run "$GMM_INFER" loglik --formula "y ~ x1 + f(t, 'matern32 + periodic(period=5)') + f(g, iid)" \
    --likelihood 'studentt(df=4, scale=0.3)' "$skx/data.csv"
expect_exit 1
expect_stderr 'studentt likelihood is not log-concave, so its Laplace approximation needs the'

begin "formula stack kernel: inputs below the Cholesky's spacing limit are refused with the rule"
printf 't,g,y\n0,a,1\n1e-9,b,2\n1,a,0.5\n2,b,0.3\n3,a,1.2\n' > "$CASE_TMP/close.csv"
run "$GMM_INFER" loglik --formula "y ~ f(t, 'matern32(lengthscale=1)') + f(g, iid)" \
    "$CASE_TMP/close.csv"
expect_exit 1
expect_stderr 'only 1e-09 apart, below the accuracy limit .* Cholesky factorisation'

# --merge-tol on a kernel term (tests/fixtures/stack_merge/, scripts/make-stack-merge-fixtures.py):
# five near-ties within 0.01 of a value share its state, the model the dense GP over the merged
# inputs.
smx="$ROOT/tests/fixtures/stack_merge"
sm_expected() { awk -F, -v k="$1" '$1 == k { print $2 }' "$smx/expected.csv"; }

begin "formula stack kernel: --merge-tol's near-ties share a state (loglik of the dense GP over the merged inputs)"
run "$GMM_INFER" loglik --model "$smx/model.json"
expect_exit 0
expect_stderr 'warning: f\.t: 5 distinct inputs within merge_tol 0\.01 of another were merged into one state'
close_to "$(json_num "$OUT" loglik)" "$(sm_expected merged)" 1e-8 ||
    fail "loglik $(json_num "$OUT" loglik), dense over the merged inputs $(sm_expected merged)"
run "$GMM_INFER" loglik --verbose --model "$smx/model.json"
expect_stderr 'f\.t \(kernel\): 50 latents'
# without the model's merge_tol, the inputs stay apart: the unmerged dense value
awk '/"merge_tol"/ { sub(/,$/, "", prev); next } NR > 1 { print prev } { prev = $0 }
    END { print prev }' "$smx/model.json" > "$CASE_TMP/raw.json"
cp "$smx/data.csv" "$CASE_TMP/"
run "$GMM_INFER" loglik --model "$CASE_TMP/raw.json"
expect_exit 0
expect_no_stderr 'merged'
close_to "$(json_num "$OUT" loglik)" "$(sm_expected unmerged)" 1e-8 ||
    fail "unmerged loglik $(json_num "$OUT" loglik), dense $(sm_expected unmerged)"

begin "formula stack kernel: --merge-tol: predict at the rows, at new values near a state and per term is the dense posterior"
run "$GMM_INFER" predict --model "$smx/model.json"
expect_exit 0
rows_match "$OUT" "$smx/rows_expected.csv" 1e-8 > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"
# within merge_tol above and below a state, on a merged data value: that state's
run "$GMM_INFER" predict --model "$smx/model.json" --at "$smx/new.csv"
expect_exit 0
rows_match "$OUT" "$smx/new_expected.csv" 1e-8 > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"
run "$GMM_INFER" predict --terms --model "$smx/model.json"
expect_exit 0
sk_terms_match "$smx/terms.csv"

begin "formula stack kernel: fit --merge-tol warns, records merge_tol, and the model reloads with it"
run "$GMM_INFER" fit --merge-tol 0.01 --formula "y ~ x1 + f(t, 'matern32') + f(g, iid)" \
    "$smx/data.csv" -o "$CASE_TMP/m.json"
expect_exit 0
expect_stderr 'warning: f\.t: 5 distinct inputs within merge_tol 0\.01 of another were merged'
expect_file "$CASE_TMP/m.json" '"merge_tol": 0\.01'
fitted=$(json_num "$CASE_TMP/m.json" loglik)
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$fitted" 1e-12 || fail "loglik --model, fit $fitted"
awk -v a="$fitted" -v b="$(sm_expected merged)" 'BEGIN { exit !(a >= b) }' ||
    fail "fit's maximum $fitted below the value $(sm_expected merged) at the fixture's parameters"

begin "formula stack kernel: --merge-tol without a kernel term is a usage error"
run "$GMM_INFER" loglik --merge-tol 0.01 --formula "y ~ f(t, rw1) + f(g, iid)" "$smx/data.csv"
expect_exit 2
expect_stderr 'merge-tol applies to state-space models'
