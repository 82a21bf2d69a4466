# shellcheck shell=bash
# 22_factor.sh -- --factor: the two factorisations of the posterior
# precision give the same log likelihood where both are accurate, the
# automatic choice is reported, a bad value is a usage error, and inputs
# closer than the Cholesky's limit are refused only when it is forced (the
# square-root form's gradient has the square-root form's limit).

grid_csv() { # N points spaced H apart
    awk -v n="$1" -v h="$2" 'BEGIN { print "t,y"; for (i = 0; i < n; i++) printf "%.12g,%.6f\n", 10 + i * h, sin(10 + i * h) + 0.05 * cos(37 * i) }' > "$CASE_TMP/g.csv"
}

begin "cholesky and square-root agree on well-spaced data; auto takes the Cholesky"
grid_csv 80 0.1
for f in cholesky square-root auto; do
    run "$GMM_INFER" loglik "$CASE_TMP/g.csv" --kernel 'matern32(variance=1, lengthscale=1)' --noise 0.01 --factor "$f"
    expect_exit 0
    sed -n 's/^ *"loglik": \(.*\),$/\1/p' "$OUT" > "$CASE_TMP/ll.$f"
done
expect_stdout '"factorisation": "cholesky"'
awk 'NR == FNR { a = $1; next } { d = a - $1; if (d < 0) d = -d; if (d > 1e-9 * (a < 0 ? -a : a)) { print "differ", a, $1; exit 1 } }' \
    "$CASE_TMP/ll.cholesky" "$CASE_TMP/ll.square-root" || fail "the two factorisations disagree"

begin "inputs closer than the Cholesky's limit: auto takes the square-root form, with its gradient; cholesky is refused"
grid_csv 200 0.005
run "$GMM_INFER" loglik "$CASE_TMP/g.csv" --kernel 'matern52(variance=1, lengthscale=1)' --noise 0.01 --verbose
expect_exit 0
expect_stdout '"factorisation": "square-root"'
expect_stdout '"0.matern52.lengthscale": 7.10549'
expect_stdout '"loglik": [0-9]'
expect_stderr 'factorisation: square-root form'
run "$GMM_INFER" gradcheck "$CASE_TMP/g.csv" --kernel 'matern52(variance=1, lengthscale=1)' --noise 0.01
expect_exit 0
expect_stderr '3 of 3 gradients within tolerance'
run "$GMM_INFER" loglik "$CASE_TMP/g.csv" --kernel 'matern52(variance=1, lengthscale=1)' --noise 0.01 --factor cholesky
expect_exit 1
expect_stderr 'below the accuracy limit'

begin "--factor with a bad value is a usage error"
grid_csv 10 0.1
run "$GMM_INFER" loglik "$CASE_TMP/g.csv" --factor qr
expect_exit 2
expect_stderr "factor: 'qr' is not auto, cholesky or square-root"
