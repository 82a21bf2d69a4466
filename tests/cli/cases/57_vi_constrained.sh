# shellcheck shell=bash
# 57_vi_constrained.sh -- vi on formulas whose terms carry sum-to-zero constraints (rw1, rw2,
# cyclic, besag with two components, bym2), q conditioned on them.  Gaussian: the ELBO at q's
# optimum is the constrained log marginal likelihood, against the dense computations of
# scripts/make-stack-fixtures.py (tests/fixtures/stack/expected.csv) and against loglik and
# fit (the exact path) on data made here, with q's predictions those of the exact posterior;
# --learn-hyper reaches fit's maximum.  Poisson: the constrained means under q sum to zero,
# --posterior is predict's, score and --init read q back.
# Sourced by tests/cli/run.sh (see there for the helpers).

vsfx="$ROOT/tests/fixtures/stack"


# Eight districts (a ring of five with a chord, a path of three: besag's two components), a
# cyclic season of 6 weeks over 3 years, a covariate; Gaussian y and Poisson n from a fixed
# generator (PM_RAND).
vc_data() {
    printf 'i,j\n0,1\n1,2\n2,3\n3,4\n4,0\n1,3\n5,6\n6,7\n' > "$1/edges.csv"
    awk "$PM_RAND"' BEGIN {
        pm_seed(7); print "district,week,t,x1,y,n"
        for (t = 1; t <= 18; t++) for (d = 0; d < 8; d++) {
            w = (t - 1) % 6 + 1; x = pm_rand() - 0.5
            s = 0.4 * sin(6.2832 * w / 6) + 0.3 * (d % 3) - 0.02 * t + 0.5 * x
            y = s + 0.3 * (pm_rand() + pm_rand() + pm_rand() - 1.5)
            n = int(exp(0.8 + s + 0.3 * pm_rand()))
            if (t == 5 && d == 2) y = ""
            printf "%d,%d,%d,%.4f,%s,%d\n", d, w, t, x, y, n }
    }' > "$1/data.csv"
}

for c in rw1_iid besag_rw1; do
    begin "vi, constrained: the Gaussian ELBO of $c is the dense constrained density"
    run "$GMM_INFER" vi --model "$vsfx/model_$c.json" --quiet -o "$CASE_TMP/v.json"
    expect_exit 0
    expect_file "$CASE_TMP/v.json" '"converged": true'
    got=$(json_num "$CASE_TMP/v.json" elbo)
    want=$(awk -F, -v k="$c" '$1 == k { print $2 }' "$vsfx/expected.csv")
    close_to "$got" "$want" 1e-10 || fail "$c: ELBO $got, dense $want"
done

begin "vi, constrained: Gaussian bym2 + cyclic rw2 + rw1 + covariate equals fit's exact posterior"
vc_data "$CASE_TMP"
f="y ~ x1 + f(district, bym2, graph=$CASE_TMP/edges.csv) + f(week, rw2, cyclic) + f(t, rw1)"
# phi held inside (0, 1): these data's maximum is at phi -> 1, where q over bym2's (b, u) is
# nearly singular and vi stops at the ELBO's resolution, ~1e-8 relative below the exact value
run "$GMM_INFER" fit --formula "$f" --fix f.district.phi "$CASE_TMP/data.csv" -o "$CASE_TMP/fit.json"
expect_exit 0
# the terms' constants alias (Q + H'H / noise singular off the subspace): q starts pinned and
# climbs; --tol 0 runs to the gradient test (tol's 1e-9 change of the ELBO leaves q's
# variances ~1e-5 off, its error being second order in them)
run "$GMM_INFER" vi --model "$CASE_TMP/fit.json" --tol 0 --quiet -o "$CASE_TMP/v.json"
expect_exit 0
got=$(json_num "$CASE_TMP/v.json" elbo)
want=$(json_num "$CASE_TMP/fit.json" loglik)
close_to "$got" "$want" 1e-9 || fail "ELBO $got, fit's log likelihood $want"
run "$GMM_INFER" loglik --model "$CASE_TMP/v.json"
expect_exit 0
again=$(json_num "$OUT" loglik)
close_to "$got" "$again" 1e-9 || fail "ELBO $got, loglik at vi's parameters $again"
"$GMM_INFER" predict --model "$CASE_TMP/fit.json" > "$CASE_TMP/exact.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
# every row (the missing outcome's too): mean within 1e-5 sd, var within 1e-5 relative
awk -F, 'NR == FNR { if (FNR > 1) { m[$1] = $2; v[$1] = $3; n++ }; next }
    FNR > 1 { dm = $2 - m[$1]; dv = $3 - v[$1]; if (dm < 0) dm = -dm; if (dv < 0) dv = -dv
        if (!($1 in m) || dm > 1e-5 * sqrt(v[$1]) || dv > 1e-5 * v[$1]) {
            print "row " $1 ": " $2 " " $3 " exact " m[$1] " " v[$1]; bad = 1 }
        seen++ }
    END { if (seen != n || n != 144) { print seen " rows, exact " n; bad = 1 }; exit bad }' \
    "$CASE_TMP/exact.csv" "$OUT" > "$CASE_TMP/cmp" || fail "$(cat "$CASE_TMP/cmp")"

begin "vi, constrained: --learn-hyper on a Gaussian besag + rw1 reaches fit's maximum likelihood"
vc_data "$CASE_TMP"
f="y ~ f(district, besag, graph=$CASE_TMP/edges.csv) + f(t, rw1)"
run "$GMM_INFER" fit --formula "$f" "$CASE_TMP/data.csv" -o "$CASE_TMP/fit.json"
expect_exit 0
# q jointly with the variances and the intercept the formula estimates: 2198 iterations
# to the gradient test here, past the default limit of 2000
run "$GMM_INFER" vi --formula "$f" "$CASE_TMP/data.csv" --learn-hyper --tol 0 --quiet \
    --max-iter 5000 -o "$CASE_TMP/v.json"
expect_exit 0
got=$(json_num "$CASE_TMP/v.json" elbo)
want=$(json_num "$CASE_TMP/fit.json" loglik)
# a maximum over q and theta of a bound that touches the objective: second order in both
close_to "$got" "$want" 1e-8 || fail "ELBO $got, fit's maximum $want"
for p in f.district.variance f.t.variance likelihood.variance; do
    a=$(json_num "$CASE_TMP/v.json" "$p")
    b=$(json_num "$CASE_TMP/fit.json" "$p")
    close_to "$a" "$b" 1e-3 || fail "$p: vi $a, fit $b"
done

begin "vi, constrained: Poisson bym2 + cyclic rw2; q's terms sum to zero, predict, score, --init"
vc_data "$CASE_TMP"
f="n ~ f(district, bym2, graph=$CASE_TMP/edges.csv) + f(week, rw2, cyclic)"
run "$GMM_INFER" vi --formula "$f" --likelihood poisson "$CASE_TMP/data.csv" --quiet \
    -o "$CASE_TMP/v.json" --posterior "$CASE_TMP/post.csv"
expect_exit 0
expect_file "$CASE_TMP/v.json" '"converged": true'
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
# two computations from the same q (vi's in memory, predict's read back from v.q.csv, exactly):
# they differ in the last digits (2e-14 relative measured), so within 1e-12 of the row's scale
pred_close "$OUT" "$CASE_TMP/post.csv" 1e-12 > "$CASE_TMP/cmp" ||
    fail "predict under q differs from vi's --posterior: $(cat "$CASE_TMP/cmp")"
run "$GMM_INFER" predict --terms --model "$CASE_TMP/v.json"
expect_exit 0
rows=$(awk -F, '{ c[$1]++ }
    END { printf "%d %d %d", c["f.district"], c["f.district.u"], c["f.week"] }' "$OUT")
[[ "$rows" == "8 8 6" ]] || fail "rows of f.district, f.district.u, f.week: $rows, expected 8 8 6"
# bym2's u sums to zero on each component (districts 0-4, 5-7), the cyclic walk over its weeks
awk -F, '$1 == "f.district.u" { if ($2 < 5) a += $3; else b += $3 } $1 == "f.week" { w += $3 }
    END { e = 1e-9; exit !(a < e && a > -e && b < e && b > -e && w < e && w > -e) }' "$OUT" ||
    fail "a constrained term's means under q do not sum to zero"
awk -F, 'NR == 1 || $3 > 15' "$CASE_TMP/data.csv" > "$CASE_TMP/late.csv"
run "$GMM_INFER" score --model "$CASE_TMP/v.json" "$CASE_TMP/late.csv"
expect_exit 0
expect_stdout '"posterior": "vi"'
expect_stdout '"n": 24'
e1=$(json_num "$CASE_TMP/v.json" elbo)
run "$GMM_INFER" vi --model "$CASE_TMP/v.json" --init "$CASE_TMP/v.json" --quiet \
    -o "$CASE_TMP/v2.json"
expect_exit 0
e2=$(json_num "$CASE_TMP/v2.json" elbo)
close_to "$e2" "$e1" 1e-9 || fail "resumed ELBO $e2, first $e1"
