# shellcheck shell=bash
# 72_factor_sparse.sh -- --factor band|sparse: the two storages of the
# posterior precision give the same log likelihood, gradient, predictions,
# terms and scores (the band's exact Gaussian marginal likelihood against the
# sparse path's Laplace evaluation, exact for it; a Poisson random walk with
# its sum-to-zero constraint), gradcheck passes on the sparse path, a model
# file records the choice, auto takes the band on a narrow series and the
# sparse factor on crossed effects whose band is wide (--verbose says why),
# hmc runs on the sparse path with either metric (the prior's with
# constraints), and it is refused where it does not apply: a state-space
# kernel (nothing written), vi, and hmc --sample-hyper.

SLEEP=(--formula 'Reaction ~ Days + f(Subject, iid) + f(Days, iid)')
COAL=(--formula 'count ~ f(year, rw1)' --likelihood poisson)

# loglik of $1's JSON against $2's, and every gradient entry, within 1e-8.
same_loglik() {
    local k a b
    close_to "$(json_num "$1" loglik)" "$(json_num "$2" loglik)" 1e-8 ||
        fail "loglik $(json_num "$1" loglik) / $(json_num "$2" loglik)"
    for k in $(sed -n '/"gradient"/,/}/s/^ *"\([^"]*\)": .*/\1/p' "$2"); do
        a=$(sed -n '/"gradient"/,/}/p' "$1" | json_key "$k")
        b=$(sed -n '/"gradient"/,/}/p' "$2" | json_key "$k")
        close_to "$a" "$b" 1e-8 || close_to "$a" "$b" 1e-8 1e-8 || fail "gradient $k: $a / $b"
    done
}

begin "loglik: band and sparse agree (Gaussian crossed iid effects; Poisson rw1 with its constraint)"
for f in band sparse; do
    run "$GMM_INFER" loglik "$ROOT/data/sleepstudy.csv" "${SLEEP[@]}" --factor "$f"
    expect_exit 0
    cp "$OUT" "$CASE_TMP/g.$f"
    run "$GMM_INFER" loglik "$ROOT/data/coal.csv" "${COAL[@]}" --exposure exposure --factor "$f"
    expect_exit 0
    cp "$OUT" "$CASE_TMP/p.$f"
done
expect_stdout '"factorisation": "sparse"'
grep -q '"approximation": "exact"' "$CASE_TMP/g.band" || fail "the band's Gaussian is not exact"
same_loglik "$CASE_TMP/g.sparse" "$CASE_TMP/g.band"
same_loglik "$CASE_TMP/p.sparse" "$CASE_TMP/p.band"

begin "gradcheck passes on the sparse path"
run "$GMM_INFER" gradcheck "$ROOT/data/sleepstudy.csv" "${SLEEP[@]}" --factor sparse
expect_exit 0
expect_stderr '5 of 5 gradients within tolerance'
run "$GMM_INFER" gradcheck "$ROOT/data/coal.csv" "${COAL[@]}" --factor sparse
expect_exit 0
expect_stderr 'gradients within tolerance'

begin "fit: the same maximum; the file records the choice; predict, --terms and score agree"
for f in band sparse; do
    run "$GMM_INFER" fit "$ROOT/data/sleepstudy.csv" "${SLEEP[@]}" --factor "$f" -o "$CASE_TMP/$f.json"
    expect_exit 0
done
grep -q '"factor": "sparse"' "$CASE_TMP/sparse.json" || fail "the model file does not record sparse"
close_to "$(json_num "$CASE_TMP/sparse.json" loglik)" "$(json_num "$CASE_TMP/band.json" loglik)" 1e-8 ||
    fail "fit's loglik differs"
# one model, both storages
for f in band sparse; do
    run "$GMM_INFER" predict --model "$CASE_TMP/band.json" --factor "$f" -o "$CASE_TMP/pr.$f"
    expect_exit 0
    run "$GMM_INFER" predict --model "$CASE_TMP/band.json" --terms --factor "$f" -o "$CASE_TMP/tm.$f"
    expect_exit 0
    run "$GMM_INFER" score --model "$CASE_TMP/band.json" "$ROOT/data/sleepstudy.csv" --factor "$f"
    expect_exit 0
    cp "$OUT" "$CASE_TMP/sc.$f"
done
pred_close "$CASE_TMP/pr.sparse" "$CASE_TMP/pr.band" 1e-8 || fail "predict differs"
awk -F, 'NR == FNR { m[FNR] = $3; s[FNR] = $4; next }
    { d = $3 - m[FNR]; e = $4 - s[FNR]; if (d < 0) d = -d; if (e < 0) e = -e
      if (d > 1e-8 * (1 + (m[FNR] < 0 ? -m[FNR] : m[FNR])) || e > 1e-8 * s[FNR]) { print FNR; exit 1 } }
    END { exit FNR < 20 }' "$CASE_TMP/tm.band" "$CASE_TMP/tm.sparse" || fail "predict --terms differs"
close_to "$(json_num "$CASE_TMP/sc.sparse" lpd)" "$(json_num "$CASE_TMP/sc.band" lpd)" 1e-8 ||
    fail "score differs"
run "$GMM_INFER" predict --model "$CASE_TMP/sparse.json" --verbose -o "$CASE_TMP/pr.file"
expect_exit 0
expect_stderr 'factor: sparse \(asked for\)'
# vi refuses the sparse path; hmc runs on it with the Laplace metric
run "$GMM_INFER" vi --model "$CASE_TMP/sparse.json" -o "$CASE_TMP/v.json"
expect_exit 1
expect_stderr 'variational inference needs the band factorisation'
expect_stderr 'run vi with --factor band'
expect_no_file "$CASE_TMP/v.json"
run "$GMM_INFER" hmc --model "$CASE_TMP/sparse.json" --metric laplace --chains 1 --threads 1 --warmup 30 --draws 20 --seed 1 --quiet -o "$CASE_TMP/h.csv"
expect_exit 0
expect_file "$CASE_TMP/h.csv" '^1,20,20,'
# the prior's whitening by a sparse factor; auto takes the Laplace metric
# without constraints and the prior's with them; --sample-hyper refused
run "$GMM_INFER" hmc --model "$CASE_TMP/sparse.json" --metric prior --chains 1 --threads 1 --warmup 30 --draws 20 --seed 1 --quiet -o "$CASE_TMP/hp.csv"
expect_exit 0
expect_file "$CASE_TMP/hp.csv" '^1,20,20,'
run "$GMM_INFER" hmc --model "$CASE_TMP/sparse.json" --chains 1 --threads 1 --warmup 30 --draws 20 --seed 1 -o "$CASE_TMP/ha.csv"
expect_exit 0
expect_stderr 'metric: laplace \(auto: on the sparse factorisation'
run "$GMM_INFER" hmc "$ROOT/data/coal.csv" "${COAL[@]}" --factor sparse --chains 1 --threads 1 --warmup 30 --draws 20 --seed 1 -o "$CASE_TMP/hc.csv"
expect_exit 0
expect_stderr 'metric: prior \(auto: the latent has linear constraints'
expect_file "$CASE_TMP/hc.csv" '^1,20,20,'
run "$GMM_INFER" hmc "$ROOT/data/coal.csv" "${COAL[@]}" --factor sparse --sample-hyper --chains 1 --threads 1 --warmup 30 --draws 20 --seed 1 -o "$CASE_TMP/hs.csv"
expect_exit 2
expect_stderr 'sample-hyper differentiates the prior.s whitening .* run it with --factor band'
expect_no_file "$CASE_TMP/hs.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/band.json" --factor qr
expect_exit 2
expect_stderr "factor: 'qr' is not auto, band or sparse"

begin "auto: the band on a narrow series, the sparse factor on crossed effects whose band is wide"
run "$GMM_INFER" loglik "$ROOT/data/coal.csv" "${COAL[@]}" --verbose
expect_exit 0
expect_stderr 'factor: band \(the band.s flops are below 1e8\): sparse \(CHOLMOD, [A-Z]+\): .* flops, .* MB; band \(bandwidth 1\): .* flops'
# 500 x 10 levels, every pair observed: a band as wide as the latents
awk 'BEGIN { print "y,x,a,b"; for (i = 0; i < 500; i++) for (j = 0; j < 10; j++) { r = i * 10 + j
    printf "%.6f,%.4f,%d,%d\n", sin(0.37 * i) + 0.5 * cos(1.3 * j) + 0.3 * sin(2.1 * r), sin(0.11 * r), i, j } }' \
    > "$CASE_TMP/crossed.csv"
CROSSED=(--formula 'y ~ x + f(a, iid) + f(b, iid)')
run "$GMM_INFER" loglik "$CASE_TMP/crossed.csv" "${CROSSED[@]}" --verbose
expect_exit 0
expect_stderr 'factor: sparse \(below half the band.s flops\): sparse \(CHOLMOD, [A-Z]+\): .* flops, .* MB; band \(bandwidth [0-9]{3}\): .* flops'
cp "$OUT" "$CASE_TMP/c.auto"
run "$GMM_INFER" loglik "$CASE_TMP/crossed.csv" "${CROSSED[@]}" --factor band
expect_exit 0
same_loglik "$CASE_TMP/c.auto" "$OUT"

begin "the sparse path is refused for a state-space kernel (nothing written)"
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson --kernel matern32 --factor sparse -o "$CASE_TMP/k.json"
expect_exit 1
expect_stderr 'the sparse factorisation needs the latent.s precision in sparse storage, which the state-space latent model does not have'
expect_no_file "$CASE_TMP/k.json"
