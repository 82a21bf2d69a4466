# shellcheck shell=bash
# 47_formula.sh -- --formula: fits of covariates, factors and an iid group effect against lme4
# 1.1-31 on the committed fixtures (scripts/make-lme4-fixtures.R: glmer's Laplace for Poisson
# and binomial with trials, lmer's exact maximum likelihood for the Gaussian): the maximised
# log likelihood within 2e-4, coefficients and the group variance within 1e-3 relative,
# standard errors within 1e-2 relative.  Then the formula read back from the model file,
# the formula's kernel and graph terms equal to the shorthand options, errors that point
# into the formula, predictions at the data rows and at new rows (their covariates, factor
# levels and f() index).
# Sourced by tests/cli/run.sh (see there for the helpers).

fx="$ROOT/tests/fixtures/lme4"

# json_num (run.sh) inside the "std_errors" object.
json_se() { sed -n '/"std_errors"/,/}/p' "$1" | json_key "$2"; }

# Compare the fitted model $1 with the reference table $2.
against_lme4() {
    local name value got
    while IFS=, read -r name value; do
        case $name in
        name) ;;
        loglik)
            got=$(json_num "$1" loglik)
            close_to "$got" "$value" 2e-4 abs || fail "$2: loglik $got, lme4 $value" ;;
        se:*)
            got=$(json_se "$1" "${name#se:}")
            close_to "$got" "$value" 1e-2 || fail "$2: se of ${name#se:} $got, lme4 $value" ;;
        *)
            got=$(json_num "$1" "$name")
            close_to "$got" "$value" 1e-3 || fail "$2: $name $got, lme4 $value" ;;
        esac
    done < "$2"
}

begin "Poisson + three covariates + f(g, iid) equals glmer (nAGQ = 1)"
run "$GMM_INFER" fit --formula 'y ~ x1 + x2 + x3 + f(g, iid)' --likelihood poisson \
    -o "$CASE_TMP/m.json" "$fx/pois.csv"
expect_exit 0
against_lme4 "$CASE_TMP/m.json" "$fx/pois_ref.csv"

begin "binomial with trials + factor(period) + f(g, iid) equals glmer; numeric levels in order"
run "$GMM_INFER" fit --formula 'k ~ x1 + factor(period) + f(g, iid)' --likelihood binomial \
    --trials n -o "$CASE_TMP/m.json" "$fx/binom.csv"
expect_exit 0
against_lme4 "$CASE_TMP/m.json" "$fx/binom_ref.csv"
# levels 2, 3, 7, 10: 2 is the reference, and 10 comes after 7
expect_file "$CASE_TMP/m.json" '"coef.period\[10\]"'
grep -q '"coef.period\[2\]"' "$CASE_TMP/m.json" && fail "the reference level has a coefficient"

begin "Gaussian + factor + f(g, iid): the exact marginal likelihood maximised as lmer (ML)"
run "$GMM_INFER" fit --formula 'y ~ x1 + factor(period) + f(g, iid)' -o "$CASE_TMP/m.json" \
    "$fx/gauss.csv"
expect_exit 0
against_lme4 "$CASE_TMP/m.json" "$fx/gauss_ref.csv"
expect_file "$CASE_TMP/m.json" '"center": null'

begin "the formula is read back from the model file: loglik --model gives the fit's value"
run "$GMM_INFER" fit --formula 'k ~ x1 + factor(period) + f(g, iid)' --likelihood binomial \
    --trials n -o "$CASE_TMP/m.json" "$fx/binom.csv"
expect_exit 0
expect_file "$CASE_TMP/m.json" '"formula": "k ~ x1 \+ factor\(period\) \+ f\(g, iid\)"'
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$(json_num "$CASE_TMP/m.json" loglik)" 1e-9 abs ||
    fail "loglik --model $(json_num "$OUT" loglik) != fit's $(json_num "$CASE_TMP/m.json" loglik)"
run "$GMM_INFER" gradcheck --model "$CASE_TMP/m.json"
expect_exit 0

begin "--fix takes coefficient names; gradcheck passes with covariates on a kernel term"
awk "$PM_RAND"' BEGIN { pm_seed(7); print "t,z,y"
    for (i = 1; i <= 80; i++) { z = pm_rand(); printf "%d,%.4f,%d\n", i, z,
        int(3 * exp(sin(i / 9) + z) * pm_rand() + 0.5) } }' > "$CASE_TMP/s.csv"
run "$GMM_INFER" gradcheck --formula 'y ~ z + f(t, "matern32(variance=0.5, lengthscale=8)")' \
    --likelihood poisson "$CASE_TMP/s.csv"
expect_exit 0
expect_stdout 'coef\.z'
run "$GMM_INFER" fit --formula 'y ~ z + f(t, matern32)' --likelihood poisson \
    --fix coef.z --fix intercept --intercept 0.25 -o "$CASE_TMP/m.json" "$CASE_TMP/s.csv"
expect_exit 0
# held by --fix: the given values written back, exactly
close_to "$(json_num "$CASE_TMP/m.json" intercept)" 0.25 0 abs || fail "intercept moved"
close_to "$(json_num "$CASE_TMP/m.json" coef.z)" 0 0 abs || fail "coef.z moved" 

begin "parameter names follow the term: --fix, --prior and the draws' columns; old names read"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid)' --fix f.g.variance -o "$CASE_TMP/m.json" \
    "$fx/gauss.csv"
expect_exit 0
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid)' --fix 0.iid.variance "$fx/gauss.csv"
expect_exit 2
expect_stderr '^  f\.g\.variance$'
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --sample-hyper --prior 'f.g.variance=lognormal(0,1)' \
    --draws 20 --warmup 20 -o "$CASE_TMP/d.csv"
expect_exit 0
head -1 "$CASE_TMP/d.csv" | grep -q ',f\.g\.variance,' || fail "draws: no column f.g.variance"
# a formula model file written with the spec's own name still reads
sed 's/"f\.g\.variance"/"0.iid.variance"/' "$CASE_TMP/m.json" > "$CASE_TMP/old.json"
run "$GMM_INFER" loglik --model "$CASE_TMP/old.json"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$(json_num "$CASE_TMP/m.json" loglik)" 1e-9 abs ||
    fail "old names: loglik $(json_num "$OUT" loglik)"
awk "$PM_RAND"' BEGIN { pm_seed(7); print "t,z,y"
    for (i = 1; i <= 80; i++) { z = pm_rand(); printf "%d,%.4f,%d\n", i, z,
        int(3 * exp(sin(i / 9) + z) * pm_rand() + 0.5) } }' > "$CASE_TMP/s.csv"
run "$GMM_INFER" fit --formula "y ~ f(t, 'matern32 + periodic(period=20)')" --likelihood poisson \
    -o "$CASE_TMP/k.json" "$CASE_TMP/s.csv"
expect_exit 0
expect_file "$CASE_TMP/k.json" '"f\.t\.matern32\.lengthscale"'
expect_file "$CASE_TMP/k.json" '"f\.t\.periodic\.period"'
run "$GMM_INFER" fit --kernel matern32 --x t --y y --likelihood poisson -o "$CASE_TMP/k.json" \
    "$CASE_TMP/s.csv"
expect_exit 0
expect_file "$CASE_TMP/k.json" '"0\.matern32\.lengthscale"'

begin "f(t, KERNEL) and f(node, PRECISION, graph=...) give the shorthand options' loglik"
awk "$PM_RAND"' BEGIN { pm_seed(7); print "t,z,y"
    for (i = 1; i <= 80; i++) { z = pm_rand(); printf "%d,%.4f,%d\n", i, z,
        int(3 * exp(sin(i / 9) + z) * pm_rand() + 0.5) } }' > "$CASE_TMP/s.csv"
run "$GMM_INFER" loglik --likelihood poisson --x t --y y \
    --kernel 'matern32(variance=0.5, lengthscale=8)' "$CASE_TMP/s.csv"
expect_exit 0
a=$(json_num "$OUT" loglik)
run "$GMM_INFER" loglik --likelihood poisson \
    --formula 'y ~ f(t, "matern32(variance=0.5, lengthscale=8)")' "$CASE_TMP/s.csv"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$a" 1e-12 abs || fail "kernel term $(json_num "$OUT" loglik) != $a"
printf 'i,j\n1,2\n2,3\n3,4\n4,5\n' > "$CASE_TMP/e.csv"
printf 'node,y\n1,2\n2,0\n3,4\n4,1\n5,3\n1,1\n' > "$CASE_TMP/g.csv"
run "$GMM_INFER" loglik --likelihood poisson --graph "$CASE_TMP/e.csv" --node node --y y \
    --precision 'edge-ou(variance=1, lengthscale=2)' "$CASE_TMP/g.csv"
expect_exit 0
a=$(json_num "$OUT" loglik)
run "$GMM_INFER" loglik --likelihood poisson \
    --formula "y ~ f(node, 'edge-ou(variance=1, lengthscale=2)', graph=$CASE_TMP/e.csv)" \
    "$CASE_TMP/g.csv"
expect_exit 0
close_to "$(json_num "$OUT" loglik)" "$a" 1e-12 abs || fail "graph term $(json_num "$OUT" loglik) != $a"

begin "formula errors point at the character; terms that cannot be built say why"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, rw2)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "gauss\.csv:2: column 'g': 'c17' is not a number"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid) + f(g, rw1)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "two f\(\) terms on column 'g'"
expect_stderr '^ {25}\^$'
run "$GMM_INFER" fit --formula 'y ~ x1 + f(t, "matern32(varianc=1)")' "$fx/gauss.csv"
expect_exit 1
expect_stderr "unknown parameter 'varianc'"
expect_stderr '^                          \^$'
run "$GMM_INFER" fit --formula 'y x1 + f(g, iid)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "expected 'RESPONSE ~ TERMS'"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid)' --kernel matern32 "$fx/gauss.csv"
expect_exit 2
expect_stderr '--formula replaces --kernel'
run "$GMM_INFER" fit --formula 'y ~ x9 + f(g, iid)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "no column 'x9'"

begin "f(g, iid) with covariates: predict and hmc at the data rows, score --loo, --grid refused"
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid)' -o "$CASE_TMP/m.json" "$fx/gauss.csv"
expect_exit 0
expect_file "$CASE_TMP/m.json" '"f\.g\.variance"'
# one row per data row, labelled by its group; the first data row's group is c17
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
expect_stdout '^node,mean,'
expect_stdout '^c17,'
[[ $(wc -l < "$OUT") -eq 301 ]] || fail "predict: $(wc -l < "$OUT") lines, expected 301"
cp "$OUT" "$CASE_TMP/rows.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --grid 1:2:1
expect_exit 2
expect_stderr "a grid has no nodes: new rows come from a table \(column 'g'"
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --draws 10 --warmup 10 -o "$CASE_TMP/d.csv"
expect_exit 0
head -1 "$CASE_TMP/d.csv" | grep -q 'f\[300\]' || fail "hmc: no f[300] column (f at the data rows)"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/d.csv"
expect_exit 0
[[ $(wc -l < "$OUT") -eq 301 ]] || fail "predict --draws: $(wc -l < "$OUT") lines, expected 301"
# at the data rows the covariates are known: leave-one-out works
run "$GMM_INFER" score --model "$CASE_TMP/m.json" --loo
expect_exit 0
expect_stdout '"n": 300'
run "$GMM_INFER" fit --formula 'y ~ f(g, iid)' --likelihood poisson -o "$CASE_TMP/m.json" \
    "$fx/pois.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
expect_stdout '^grp01,'

begin "new rows: predict --at and score with covariates, factors and iid levels old and new"
run "$GMM_INFER" fit --formula 'y ~ x1 + factor(period) + f(g, iid)' -o "$CASE_TMP/m.json" \
    "$fx/gauss.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
cp "$OUT" "$CASE_TMP/rows.csv"
# data rows 1-3 as new rows, and a group the data do not have
{ head -4 "$fx/gauss.csv"; echo "0.5,0.3,b,newgroup"; } > "$CASE_TMP/new.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --at "$CASE_TMP/new.csv"
expect_exit 0
# a data row predicted as a new row: the same numbers as at the data
for r in 2 3 4; do
    close_to "$(sed -n "${r}p" "$OUT" | cut -d, -f2)" "$(sed -n "${r}p" "$CASE_TMP/rows.csv" | cut -d, -f2)" 1e-12 abs ||
        fail "row $r: mean $(sed -n "${r}p" "$OUT" | cut -d, -f2) != at the data $(sed -n "${r}p" "$CASE_TMP/rows.csv" | cut -d, -f2)"
    close_to "$(sed -n "${r}p" "$OUT" | cut -d, -f3)" "$(sed -n "${r}p" "$CASE_TMP/rows.csv" | cut -d, -f3)" 1e-12 abs ||
        fail "row $r: var differs from the data row's"
done
# the new group: X beta and the prior variance of the group effects
want=$(awk -v b="$(json_num "$CASE_TMP/m.json" intercept)" -v x="$(json_num "$CASE_TMP/m.json" coef.x1)" \
    -v p="$(json_num "$CASE_TMP/m.json" 'coef.period[b]')" 'BEGIN { printf "%.17g", b + 0.3 * x + p }')
close_to "$(sed -n 5p "$OUT" | cut -d, -f2)" "$want" 1e-12 abs || fail "new group mean $(sed -n 5p "$OUT" | cut -d, -f2), X beta $want"
close_to "$(sed -n 5p "$OUT" | cut -d, -f3)" "$(json_num "$CASE_TMP/m.json" f.g.variance)" 1e-12 ||
    fail "new group var $(sed -n 5p "$OUT" | cut -d, -f3) != f.g.variance"
expect_stdout '^newgroup,'
run "$GMM_INFER" score --model "$CASE_TMP/m.json" "$CASE_TMP/new.csv"
expect_exit 0
expect_stdout '"n": 4'
# an unseen factor level: file, line, column and level
{ head -3 "$fx/gauss.csv"; echo "0.5,0.3,q,c17"; } > "$CASE_TMP/bad.csv"
run "$GMM_INFER" score --model "$CASE_TMP/m.json" "$CASE_TMP/bad.csv"
expect_exit 1
expect_stderr "bad\.csv:4: column 'period': level 'q' of factor\(period\) is not one of the model's data"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --at "$CASE_TMP/bad.csv"
expect_exit 1
expect_stderr "bad\.csv:4: column 'period': level 'q'"
# predict --terms: the coefficients with fit's standard errors, then each group's effect
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --terms
expect_exit 0
expect_stdout '^term,level,mean,sd$'
expect_stdout '^f\.g,c17,'
for name in intercept coef.x1 'coef.period[b]' 'coef.period[c]'; do
    line=$(grep -F "$name,," "$OUT") || fail "--terms: no row $name"
    close_to "${line##*,}" "$(json_se "$CASE_TMP/m.json" "$name")" 1e-9 ||
        fail "--terms: $name sd ${line##*,} != fit's std_error"
    # the model file's number printed again (17 digits both): exact
    close_to "$(echo "$line" | cut -d, -f3)" "$(json_num "$CASE_TMP/m.json" "$name")" 0 abs ||
        fail "--terms: $name estimate differs from the model file"
done
[[ $(grep -c '^f\.g,' "$OUT") -eq $(cut -d, -f4 "$fx/gauss.csv" | tail -n +2 | sort -u | wc -l) ]] ||
    fail "--terms: not one row per group"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --terms --grid 1:2:1
expect_exit 2
expect_stderr '--terms excludes'
# draws: with the latent states, held-out rows score under them
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --draws 100 --warmup 100 --states \
    -o "$CASE_TMP/d.csv"
expect_exit 0
run "$GMM_INFER" score --model "$CASE_TMP/m.json" --draws "$CASE_TMP/d.csv" "$CASE_TMP/new.csv"
expect_exit 0
expect_stdout '"posterior": "draws"'
# predict --draws --at: a data row as a new row is X beta + its group's state in each draw,
# which is hmc's own f[ROW]: the same summaries as at the data rows
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/d.csv"
expect_exit 0
cp "$OUT" "$CASE_TMP/drows.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/d.csv" --at "$CASE_TMP/new.csv"
expect_exit 0
for r in 2 3 4; do
    for c in 2 3 4 5; do
        close_to "$(sed -n "${r}p" "$OUT" | cut -d, -f$c)" "$(sed -n "${r}p" "$CASE_TMP/drows.csv" | cut -d, -f$c)" 1e-9 abs ||
            fail "draws at new row $r col $c: $(sed -n "${r}p" "$OUT" | cut -d, -f$c) != at the data row"
    done
done
# the new group: X beta (the model's, not sampled) + N(0, f.g.variance) drawn afresh per draw;
# 400 independent normals, mean within 6 sd / sqrt(400): a false failure 2 Q(6) = 2.0e-9
sdv=$(awk -v v="$(json_num "$CASE_TMP/m.json" f.g.variance)" 'BEGIN { printf "%.17g", 6 * sqrt(v / 400) }')
close_to "$(sed -n 5p "$OUT" | cut -d, -f2)" "$want" "$sdv" abs ||
    fail "draws: new group mean $(sed -n 5p "$OUT" | cut -d, -f2), X beta $want (+- $sdv)"
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --draws 10 --warmup 10 -o "$CASE_TMP/d2.csv"
expect_exit 0
run "$GMM_INFER" score --model "$CASE_TMP/m.json" --draws "$CASE_TMP/d2.csv" "$CASE_TMP/new.csv"
expect_exit 1
expect_stderr 'has no latent states x\[1\.\.'
# vi: the same rows under q
run "$GMM_INFER" vi --model "$CASE_TMP/m.json" -o "$CASE_TMP/v.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
cp "$OUT" "$CASE_TMP/vrows.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/v.json" --at "$CASE_TMP/new.csv"
expect_exit 0
expect_stdout '^newgroup,'
for r in 2 3 4; do
    close_to "$(sed -n "${r}p" "$OUT" | cut -d, -f2)" "$(sed -n "${r}p" "$CASE_TMP/vrows.csv" | cut -d, -f2)" 1e-12 abs ||
        fail "vi: new row $r mean differs from the data row's"
done
# Laplace (Poisson): data rows given as new rows give the data rows' predictions
run "$GMM_INFER" fit --formula 'y ~ x1 + x2 + x3 + f(g, iid)' --likelihood poisson \
    -o "$CASE_TMP/p.json" "$fx/pois.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/p.json"
expect_exit 0
cp "$OUT" "$CASE_TMP/prows.csv"
head -4 "$fx/pois.csv" > "$CASE_TMP/pnew.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/p.json" --at "$CASE_TMP/pnew.csv"
expect_exit 0
for r in 2 3 4; do
    for c in 2 3 6; do
        close_to "$(sed -n "${r}p" "$OUT" | cut -d, -f$c)" "$(sed -n "${r}p" "$CASE_TMP/prows.csv" | cut -d, -f$c)" 1e-12 ||
            fail "Poisson: new row $r col $c differs from the data row's"
    done
done

begin "a graph term with a covariate: rows at the data, new rows at nodes, an unknown node refused"
printf 'i,j\n1,2\n2,3\n3,4\n4,5\n' > "$CASE_TMP/e.csv"
awk 'BEGIN { print "node,z,y"; for (i = 0; i < 30; i++) printf "%d,%.3f,%d\n", i % 5 + 1,
    sin(i), int(2 + 1.5 * sin(i) + (i % 5) / 2) }' > "$CASE_TMP/g.csv"
run "$GMM_INFER" fit --likelihood poisson -o "$CASE_TMP/m.json" \
    --formula "y ~ z + f(node, 'edge-ou(lengthscale=2)', graph=$CASE_TMP/e.csv)" "$CASE_TMP/g.csv"
expect_exit 0
expect_file "$CASE_TMP/m.json" '"f\.node\.edge-ou\.lengthscale"'
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
cp "$OUT" "$CASE_TMP/rows.csv"
head -3 "$CASE_TMP/g.csv" > "$CASE_TMP/at.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --at "$CASE_TMP/at.csv"
expect_exit 0
for r in 2 3; do
    [[ "$(sed -n "${r}p" "$OUT" | cut -d, -f1)" == "$(sed -n "${r}p" "$CASE_TMP/rows.csv" | cut -d, -f1)" ]] ||
        fail "graph: new row $r has another node"
    for c in 2 3; do
        close_to "$(sed -n "${r}p" "$OUT" | cut -d, -f$c)" "$(sed -n "${r}p" "$CASE_TMP/rows.csv" | cut -d, -f$c)" 1e-12 ||
            fail "graph: new row $r col $c differs from the data row's"
    done
done
printf 'node,z,y\n9,0.1,2\n' > "$CASE_TMP/bad.csv"
run "$GMM_INFER" score --model "$CASE_TMP/m.json" "$CASE_TMP/bad.csv"
expect_exit 1
expect_stderr "bad\.csv:2: column 'node': node '9' is not a node of the model's graph"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --terms
expect_exit 0
[[ $(grep -c '^f\.node,' "$OUT") -eq 5 ]] || fail "--terms: not one row per node"

begin "a kernel term with a covariate: predict at the data rows, vi, hmc, score --loo"
awk "$PM_RAND"' BEGIN { pm_seed(7); print "t,z,y"
    for (i = 1; i <= 80; i++) { z = pm_rand(); printf "%d,%.4f,%d\n", i, z,
        int(3 * exp(sin(i / 9) + z) * pm_rand() + 0.5) } }' > "$CASE_TMP/s.csv"
run "$GMM_INFER" fit --formula 'y ~ z + f(t, matern32)' --likelihood poisson \
    -o "$CASE_TMP/m.json" "$CASE_TMP/s.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json"
expect_exit 0
expect_stdout '^1,'
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --grid 1:3:0.5
expect_exit 2
expect_stderr 'a grid has no covariate values'
printf 't,z\n2.5,0.4\n90,0.1\n' > "$CASE_TMP/at.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --at "$CASE_TMP/at.csv"
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,rate,'
expect_stdout '^90,'
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --terms
expect_exit 0
expect_stdout '^coef\.z,,'
[[ $(grep -c '^f\.t,' "$OUT") -eq 80 ]] || fail "--terms: not one row per data input"
expect_stdout '^f\.t,80,'

run "$GMM_INFER" vi --model "$CASE_TMP/m.json" -o "$CASE_TMP/v.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --draws 100 --warmup 100 -o "$CASE_TMP/d.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/d.csv"
expect_exit 0
run "$GMM_INFER" score --model "$CASE_TMP/m.json" --loo
expect_exit 0
expect_stdout '"elpd_loo"'
# held-out rows under draws: from the latent states (the bridge at each row's input) plus
# X beta; at data inputs that is hmc's own f[ROW], so the Poisson lpd follows from those columns
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --draws 50 --warmup 50 --states -o "$CASE_TMP/ds.csv"
expect_exit 0
head -4 "$CASE_TMP/s.csv" > "$CASE_TMP/new.csv"
run "$GMM_INFER" score --model "$CASE_TMP/m.json" --draws "$CASE_TMP/ds.csv" "$CASE_TMP/new.csv"
expect_exit 0
want=$(awk -F, -v ys="$(tail -n +2 "$CASE_TMP/new.csv" | cut -d, -f3 | paste -sd,)" '
    NR == 1 { for (c = 1; c <= NF; c++) for (r = 1; r <= 3; r++) if ($c == "f[" r "]") col[r] = c
              split(ys, y, ","); next }
    { n++; for (r = 1; r <= 3; r++) { f = $col[r]; lf = 0; for (k = 2; k <= y[r]; k++) lf += log(k)
          l[r, n] = y[r] * f - exp(f) - lf } }
    END { tot = 0; for (r = 1; r <= 3; r++) { mx = -1e300
              for (k = 1; k <= n; k++) if (l[r, k] > mx) mx = l[r, k]
              s = 0; for (k = 1; k <= n; k++) s += exp(l[r, k] - mx); tot += mx + log(s / n) }
          printf "%.17g", tot }' "$CASE_TMP/ds.csv")
close_to "$(json_num "$OUT" lpd)" "$want" 1e-9 || fail "score --draws new rows: lpd $(json_num "$OUT" lpd), from f[ROW] $want"
