# shellcheck shell=bash
# 40_count_series.sh -- a long count series with a slow trend (the common
# case: daily counts over years): y ~ Poisson(exp(sin(x / 200))), x =
# 0..1999, a fixed Park-Miller generator so every awk makes the same data.
# Its Laplace log likelihood is rough at the lengthscale it fits (~550):
# gradcheck must say when its differences cannot decide.

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
    --kernel 'matern32(variance=0.859, lengthscale=555)' --intercept -0.0788
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
