# shellcheck shell=bash
# 39_count_series.sh -- a long count series with a slow trend (the common
# case: daily counts over years): y ~ Poisson(exp(sin(x / 200))), x =
# 0..1999, a fixed Park-Miller generator so every awk makes the same data.
# On the assembled precision (--factor cholesky) its Laplace log likelihood
# is rough at the lengthscale it fits (~550): gradcheck must say when its
# differences cannot decide.  The square-root form, which --factor auto
# takes there, is smooth enough for gradcheck to confirm every gradient.

count_series() {
    awk 'BEGIN { s = 1; print "x,y"
        for (x = 0; x < 2000; x++) {
            L = exp(-exp(sin(x / 200))); k = 0
            s = (s * 16807) % 2147483647; p = s / 2147483647
            while (p > L) { k++; s = (s * 16807) % 2147483647; p *= s / 2147483647 }
            print x "," k } }' > "$CASE_TMP/series.csv"
}

begin "gradcheck on a rough likelihood is inconclusive (exit 4), never ok"
count_series
run "$GMM_INFER" gradcheck "$CASE_TMP/series.csv" --likelihood poisson \
    --kernel 'matern32(variance=0.859, lengthscale=555)' --intercept -0.0788 --factor cholesky
expect_exit 4
expect_stdout '^0\.matern32\.variance,0\.8589*,.*,inconclusive$'
expect_stderr 'gradients within tolerance 1e-06, [0-9] inconclusive$'
expect_stderr "gradients inconclusive: .*first '0\.matern32\.variance'"
expect_no_stdout ',false$'
# a row whose difference is less certain than the gradient is never ok
check=$(awk -F, 'NR == 1 { next }
    { a = $3 < 0 ? -$3 : $3; n = $4 < 0 ? -$4 : $4; big = a > n ? a : n
      if ($8 == "true" && $5 + 0 > 1e-3 * big && $5 + 0 > $7 - $5) print $1 ": ok with fd_error " $5 }' "$OUT")
[[ -z "$check" ]] || fail "$check"

begin "the square-root form (auto, and forced) makes that likelihood smooth: gradcheck confirms it"
count_series
for f in auto square-root; do
    run "$GMM_INFER" gradcheck "$CASE_TMP/series.csv" --likelihood poisson \
        --kernel 'matern32(variance=0.859, lengthscale=555)' --intercept -0.0788 --factor "$f"
    expect_exit 0
    expect_stderr '3 of 3 gradients within tolerance 1e-06$'
    expect_no_stdout ',(false|inconclusive)$'
    run "$GMM_INFER" loglik "$CASE_TMP/series.csv" --likelihood poisson \
        --kernel 'matern32(variance=0.859, lengthscale=555)' --intercept -0.0788 --factor "$f" \
        --verbose
    expect_exit 0
    expect_stdout '"factorisation": "square-root"'
    expect_stderr "factorisation: square-root form \\(the Cholesky's rounding bound"
done
run "$GMM_INFER" loglik "$CASE_TMP/series.csv" --likelihood poisson \
    --kernel 'matern32(variance=0.859, lengthscale=555)' --intercept -0.0788 --factor cholesky
expect_exit 0
expect_stdout '"factorisation": "cholesky"'

begin "fit of the series converges at the likelihood's noise level and says so"
count_series
run "$GMM_INFER" fit "$CASE_TMP/series.csv" --likelihood poisson --kernel matern32 --verbose \
    -o "$CASE_TMP/m.json"
expect_exit 0
expect_file "$CASE_TMP/m.json" '"converged": true,$'
expect_file "$CASE_TMP/m.json" '^  "stop": "(noise|newton)",$'
expect_stderr '^gmm-infer fit: stop: (noise|newton) after [0-9]+ Newton steps \(decrement '
expect_no_stderr 'not converged'
# the optimum of the data: lengthscale and variance of the slow sine
ell=$(sed -n 's/^ *"0\.matern32\.lengthscale": \([0-9.e+-]*\),*$/\1/p' "$CASE_TMP/m.json")
awk -v l="$ell" 'BEGIN { exit !(l > 300 && l < 1000) }' || fail "lengthscale $ell"
case_asserts=$((case_asserts + 1))

begin "ordinary fits: L-BFGS's stop named, converged by the Newton decrement at the point"
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson --exposure exposure \
    --kernel matern32 --verbose
expect_exit 0
expect_stdout '^  "stop": "newton",$'
expect_stderr '^gmm-infer fit: L-BFGS stopped \(gradient\) after [0-9]+ iterations'
expect_stderr '^gmm-infer fit: stop: newton after 0 Newton steps \(decrement [0-9.e-]+\)$'
dec=$(json_key decrement < "$OUT")
awk -v d="$dec" 'BEGIN { exit !(d != "" && d >= 0 && d <= 1e-8) }' || fail "decrement $dec"

# Weekly counts with a yearly season: a periodic factor in a sum is damped
# (ssm.h, FACTORISATION) and demodulated, so its rows vary with the period;
# the Laplace approximation takes the square-root form with the rows'
# coefficients in its gradient.  On the assembled precision this fit
# stopped on rounding with three gradients off by up to 40%.
seasonal_series() {
    awk 'BEGIN { s = 7; print "t,y"
        for (t = 0; t < 416; t++) {
            L = exp(-exp(1 + 0.8 * sin(2 * 3.14159265 * t / 52) + 0.5 * sin(t / 90))); k = 0
            s = (s * 16807) % 2147483647; p = s / 2147483647
            while (p > L) { k++; s = (s * 16807) % 2147483647; p *= s / 2147483647 }
            print t "," k } }' > "$CASE_TMP/season.csv"
}

begin "a seasonal count series with a damped periodic kernel fits, and gradcheck confirms it"
seasonal_series
run "$GMM_INFER" fit "$CASE_TMP/season.csv" --likelihood poisson \
    --kernel 'matern32 + periodic(period=52)' --verbose -o "$CASE_TMP/s.json"
expect_exit 0
expect_file "$CASE_TMP/s.json" '"converged": true,$'
expect_file "$CASE_TMP/s.json" '"std_errors"'
expect_stderr 'factorisation: square-root form'
run "$GMM_INFER" gradcheck --model "$CASE_TMP/s.json" "$CASE_TMP/season.csv"
expect_exit 0
expect_stderr '6 of 6 gradients within tolerance 1e-06$'
expect_no_stdout ',(false|inconclusive)$'
