# shellcheck shell=bash
# 43_binomial_studentt.sh -- binomial counts with trials and Student-t noise from the command
# line: the data are drawn here (awk, fixed seeds of PM_RAND), so no number below was tuned on them.  At a
# latent variance of 1e-12 the Laplace log likelihood is the plain sum of log densities at the
# intercept (an awk reference: log C(n, k) as R's dbinom, the t density with its scale); at
# ordinary variances gradcheck passes; with gross outliers a Gaussian fit is pulled and a
# Student-t fit is not.

# k successes of n trials (n in 1..20) at p = logit^-1(sin(t / 8)); seed $1
binomial_data() {
    awk -v seed="$1" "$PM_RAND"' BEGIN { pm_seed(seed); print "t,k,n"
        for (i = 1; i <= 60; i++) { n = 1 + int(pm_rand() * 20); p = 1 / (1 + exp(-sin(i / 8)))
            k = 0; for (j = 0; j < n; j++) if (pm_rand() < p) k++
            print i "," k "," n } }'
}

# y = sin(x / 10) + 0.2 N(0, 1) at x = 1..80, with y += 8 at x = 40 and 41 when $2 is 1
series_data() {
    awk -v seed="$1" -v out="$2" "$PM_RAND"' BEGIN { pm_seed(seed); print "x,y"
        for (i = 1; i <= 80; i++) { u = pm_rand(); v = pm_rand()
            y = sin(i / 10) + 0.2 * sqrt(-2 * log(u)) * cos(6.283185307179586 * v)
            if (out && (i == 40 || i == 41)) y += 8
            printf "%d,%.6f\n", i, y } }'
}

loglik_of() { sed -n 's/^  "loglik": \(.*\),$/\1/p' "$1"; }


begin "binomial with trials at a latent variance of 1e-12: the sum of log dbinom at the intercept"
binomial_data 101 > "$CASE_TMP/b.csv"
run "$GMM_INFER" loglik "$CASE_TMP/b.csv" --y k --likelihood binomial --trials n \
    --kernel 'matern32(variance=1e-12, lengthscale=1)' --intercept 0.3
expect_exit 0
ref=$(awk -F, -v b=0.3 'NR > 1 { k = $2; n = $3; lc = 0
        for (j = 1; j <= k; j++) lc += log((n - k + j) / j)
        s += lc - k * log(1 + exp(-b)) - (n - k) * log(1 + exp(b)) }
    END { printf "%.12f", s }' "$CASE_TMP/b.csv")
close_to "$(loglik_of "$OUT")" "$ref" 1e-6 abs || fail "loglik $(loglik_of "$OUT") != reference $ref"

begin "Student-t at a latent variance of 1e-12: the sum of log t densities with their scale"
series_data 102 1 > "$CASE_TMP/t.csv"
run "$GMM_INFER" loglik "$CASE_TMP/t.csv" --likelihood 'studentt(df=5, scale=0.4)' \
    --kernel 'matern32(variance=1e-12, lengthscale=1)' --intercept -0.2
expect_exit 0
# lgamma at integers and half-integers by its recurrence; df = 5
ref=$(awk -F, -v b=-0.2 -v nu=5 -v s=0.4 '
    function lg(x,   r) { r = 0; while (x > 1.25) { x--; r += log(x) }
        return x == 1 ? r : r + 0.5 * log(3.141592653589793) }
    NR > 1 { z = ($2 - b) / s
        t += lg((nu + 1) / 2) - lg(nu / 2) - 0.5 * log(nu * 3.141592653589793) - log(s) \
             - (nu + 1) / 2 * log(1 + z * z / nu) }
    END { printf "%.12f", t }' "$CASE_TMP/t.csv")
close_to "$(loglik_of "$OUT")" "$ref" 1e-6 abs || fail "loglik $(loglik_of "$OUT") != reference $ref"

begin "gradcheck passes for binomial with trials and for Student-t at ordinary variances"
binomial_data 103 > "$CASE_TMP/b.csv"
run "$GMM_INFER" gradcheck "$CASE_TMP/b.csv" --y k --likelihood binomial --trials n \
    --kernel 'matern32(variance=0.8, lengthscale=6)'
expect_exit 0
expect_stdout '^intercept,.*,true$'
series_data 104 1 > "$CASE_TMP/t.csv"
run "$GMM_INFER" gradcheck "$CASE_TMP/t.csv" --likelihood 'studentt(df=3, scale=0.3)' \
    --kernel 'matern32(variance=1, lengthscale=10)'
expect_exit 0
expect_stdout '^likelihood\.df,3,.*,true$'
expect_stdout '^likelihood\.scale,.*,true$'

begin "binomial: fit records data.trials; predict gives probabilities; bernoulli is one trial"
binomial_data 105 > "$CASE_TMP/b.csv"
run "$GMM_INFER" fit "$CASE_TMP/b.csv" --y k --likelihood binomial --trials n --kernel matern32 \
    -o "$CASE_TMP/b.json"
expect_exit 0
expect_file "$CASE_TMP/b.json" '"trials": "n"'
expect_file "$CASE_TMP/b.json" '"likelihood": "binomial"'
run "$GMM_INFER" predict --model "$CASE_TMP/b.json"
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,prob,prob_lower,prob_upper,level$'
printf 'x,y\n1,0\n2,1\n3,1\n4,0\n5,1\n6,1\n7,1\n8,0\n' > "$CASE_TMP/01.csv"
run "$GMM_INFER" loglik "$CASE_TMP/01.csv" --likelihood bernoulli --kernel matern12
cp "$OUT" "$CASE_TMP/bern.out"
run "$GMM_INFER" loglik "$CASE_TMP/01.csv" --likelihood binomial --kernel matern12
expect_exit 0
# the two families evaluate the same expressions, binomial adding log C(1, k) = 0: to rounding
close_to "$(loglik_of "$OUT")" "$(loglik_of "$CASE_TMP/bern.out")" 1e-12 ||
    fail "binomial without --trials: loglik $(loglik_of "$OUT") is not bernoulli's"

begin "--trials and --exposure only for the families that read them"
binomial_data 106 > "$CASE_TMP/b.csv"
run "$GMM_INFER" loglik "$CASE_TMP/b.csv" --y k --likelihood poisson --trials n
expect_exit 2
expect_stderr 'trials: the poisson likelihood has no trials'
run "$GMM_INFER" loglik "$CASE_TMP/b.csv" --y k --likelihood binomial --exposure n
expect_exit 2
expect_stderr 'exposure: the binomial likelihood has no exposure'
run "$GMM_INFER" loglik "$CASE_TMP/b.csv" --y k --trials n
expect_exit 2
run "$GMM_INFER" loglik "$CASE_TMP/b.csv" --y k --likelihood binomial --trials n --trials n
expect_exit 2
expect_stderr 'given twice'

begin "bad binomial rows name file, line and the column at fault"
printf 't,k,n\n1,2,3\n2,4,3\n' > "$CASE_TMP/over.csv"
run "$GMM_INFER" loglik "$CASE_TMP/over.csv" --y k --likelihood binomial --trials n
expect_exit 1
expect_stderr "over\.csv:3: column 'k': y = 4 exceeds trials = 3"
printf 't,k,n\n1,2,3\n2,0,0\n' > "$CASE_TMP/n0.csv"
run "$GMM_INFER" loglik "$CASE_TMP/n0.csv" --y k --likelihood binomial --trials n
expect_exit 1
expect_stderr "n0\.csv:3: column 'n': trials = 0"
printf 't,k,n\n1,2,3\n2,1,2.5\n' > "$CASE_TMP/nfrac.csv"
run "$GMM_INFER" loglik "$CASE_TMP/nfrac.csv" --y k --likelihood binomial --trials n
expect_exit 1
expect_stderr "nfrac\.csv:3: column 'n': trials = 2\.5"
printf 't,k,n\n1,2,3\n2,1.5,3\n' > "$CASE_TMP/kfrac.csv"
run "$GMM_INFER" loglik "$CASE_TMP/kfrac.csv" --y k --likelihood binomial --trials n
expect_exit 1
expect_stderr "kfrac\.csv:3: column 'k': y = 1\.5"
printf 't,k,n\n1,2,3\n2,1,\n' > "$CASE_TMP/nmiss.csv"
run "$GMM_INFER" loglik "$CASE_TMP/nmiss.csv" --y k --likelihood binomial --trials n
expect_exit 1
expect_stderr "nmiss\.csv:3: column 'n': missing trials"

begin "gross outliers pull a Gaussian fit; a Student-t fit (df, scale fitted) is not pulled"
series_data 107 1 > "$CASE_TMP/t.csv"
run "$GMM_INFER" fit "$CASE_TMP/t.csv" --kernel matern32 -o "$CASE_TMP/g.json"
run "$GMM_INFER" fit "$CASE_TMP/t.csv" --kernel matern32 --likelihood studentt -o "$CASE_TMP/t.json"
expect_exit 0
expect_file "$CASE_TMP/t.json" '"likelihood\.df": '
expect_file "$CASE_TMP/t.json" '"likelihood\.scale": '
# the latent mean at the outliers and half-way to their neighbours, against sin(x / 10)
for m in g t; do
    run "$GMM_INFER" predict --model "$CASE_TMP/$m.json" --grid 39.5:41.5:0.5
    expect_exit 0
    cp "$OUT" "$CASE_TMP/$m.pred"
done
awk -F, 'NR > 1 && $1 != "" { d = $2 - sin($1 / 10); if (d < 2) bad++ } END { exit bad > 0 }' \
    "$CASE_TMP/g.pred" || fail "the Gaussian fit is not pulled by the outliers: $(cat "$CASE_TMP/g.pred")"
awk -F, 'NR > 1 { d = $2 - sin($1 / 10); if (d < 0) d = -d; if (d > 0.3) bad++; n++ }
    END { exit !(n == 5 && bad == 0) }' "$CASE_TMP/t.pred" ||
    fail "the Student-t fit is pulled: $(cat "$CASE_TMP/t.pred")"

begin "Student-t: predict has no response columns; score, hmc and vi run; --observed is refused"
series_data 108 1 > "$CASE_TMP/t.csv"
run "$GMM_INFER" fit "$CASE_TMP/t.csv" --kernel matern32 --likelihood studentt --fix likelihood.df \
    -o "$CASE_TMP/t.json"
expect_exit 0
expect_file "$CASE_TMP/t.json" '"likelihood\.df": 4'
run "$GMM_INFER" predict --model "$CASE_TMP/t.json"
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,level$'
run "$GMM_INFER" predict --model "$CASE_TMP/t.json" --observed
expect_exit 2
expect_stderr 'studentt'
run "$GMM_INFER" score --model "$CASE_TMP/t.json" "$CASE_TMP/t.csv"
expect_exit 0
expect_stdout '"lpd": '
run "$GMM_INFER" hmc --model "$CASE_TMP/t.json" --chains 1 --warmup 30 --draws 20 \
    -o "$CASE_TMP/d.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/t.json" --draws "$CASE_TMP/d.csv"
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,level$'
run "$GMM_INFER" vi --model "$CASE_TMP/t.json" -o "$CASE_TMP/v.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,level$'

begin "studentt with a damped periodic factor: the assembled precision is used, and said so"
awk 'BEGIN { s = 3; print "t,y"
    for (t = 0; t < 300; t++) {
        s = (s * 16807) % 2147483647
        y = sin(2 * 3.14159265 * t / 52) + 0.3 * sin(t / 40) + 0.3 * (s / 2147483647 - 0.5)
        if (t % 37 == 5) y += 4
        print t "," y } }' > "$CASE_TMP/stt.csv"
spec='matern32(variance=0.1, lengthscale=30) + periodic(period=52, variance=0.5, lengthscale=1)'
run "$GMM_INFER" loglik "$CASE_TMP/stt.csv" --likelihood 'studentt(df=4, scale=0.2)' --kernel "$spec"
expect_exit 0
expect_stdout '"factorisation": "cholesky"'
expect_stderr 'warning: the likelihood is not log-concave, .*rounding bound there is [0-9.e-]+ of'
# a log-concave likelihood on the same kernel takes the square-root form, silently
run "$GMM_INFER" loglik "$CASE_TMP/stt.csv" --likelihood gaussian --kernel "$spec"
expect_exit 0
expect_no_stderr 'warning'
