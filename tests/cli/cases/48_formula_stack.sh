# shellcheck shell=bash
# 48_formula_stack.sh -- formulas of several f() terms (one stacked latent, stack.h) against
# the dense computations of scripts/make-stack-fixtures.py (tests/fixtures/stack/): the log
# marginal likelihood of rw1 + iid (centred, and with an intercept and a covariate) and of
# besag + rw1 to 1e-8 relative, the rw1 local level's maximum likelihood against SciPy's
# maximum of the same dense objective; then every command on such a model (the model file
# read back, gradcheck, predict at the data rows, hmc and its draws, score of held-out rows);
# predict --at and score at new rows against scripts/make-stack-predict-fixtures.R's dense
# augmented posteriors (Gaussian rw1 + iid + x1; Poisson besag + rw2 + x1, Laplace),
# --verbose's sizes, and errors that point into the formula (vi: 57_vi_constrained.sh).  Against
# scripts/make-stack-fixtures.R: the cyclic rw1 and rw2 log marginal likelihoods (1e-8) and
# predict --terms of rw1 + iid (the dense constrained posterior); the Laplace --terms of one
# term against predict's rows; cyclic's refusals; a graph precision's parameter names.
# Sourced by tests/cli/run.sh (see there for the helpers).

sfx="$ROOT/tests/fixtures/stack"

stack_expected() { awk -F, -v k="$1" '$1 == k { print $2 }' "$sfx/expected.csv"; }

for c in rw1_iid rw1_iid_x1 besag_rw1; do
    begin "formula stack: loglik of $c equals the dense constrained density"
    run "$GMM_INFER" loglik --model "$sfx/model_$c.json"
    expect_exit 0
    got=$(json_num "$OUT" loglik)
    want=$(stack_expected "$c")
    close_to "$got" "$want" 1e-8 || fail "$c: loglik $got, dense $want"
done

begin "formula stack: the rw1 local level's maximum likelihood is SciPy's"
run "$GMM_INFER" fit --formula 'y ~ f(t, rw1)' "$sfx/data_local_level.csv" \
    -o "$CASE_TMP/ll.json"
expect_exit 0
got=$(json_num "$CASE_TMP/ll.json" loglik)
want=$(stack_expected ml_local_level)
# a maximum: the objective's error is second order in the maximiser's
close_to "$got" "$want" 1e-9 || fail "loglik $got, SciPy $want"
for p in f.t.variance likelihood.variance; do
    got=$(json_num "$CASE_TMP/ll.json" "$p")
    want=$(stack_expected "ml_local_level:$p")
    close_to "$got" "$want" 1e-4 || fail "$p $got, SciPy $want"
done

begin "formula stack: fit -o, then loglik --model gives the fit's value; --verbose sizes"
run "$GMM_INFER" fit --verbose --formula 'y ~ x1 + f(t, rw1) + f(g, iid)' \
    "$sfx/data_rw1_iid.csv" -o "$CASE_TMP/m.json"
expect_exit 0
expect_stderr 'f\.t \(rw1\): [0-9]+ latents, f\.g \(iid\): 5 latents; n = [0-9]+, bandwidth [0-9]+'
expect_stderr '1 constraints'
expect_file "$CASE_TMP/m.json" '"f\.g\.variance"'
fitted=$(json_num "$CASE_TMP/m.json" loglik)
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json"
expect_exit 0
again=$(json_num "$OUT" loglik)
close_to "$again" "$fitted" 1e-12 || fail "loglik --model $again, fit $fitted"
cp "$CASE_TMP/m.json" "$WORK/stack-model.json"

begin "formula stack: gradcheck passes at the fitted model"
run "$GMM_INFER" gradcheck --model "$WORK/stack-model.json"
expect_exit 0
expect_stderr 'gradients within tolerance'

begin "formula stack: predict at the data rows (the missing outcome's row too); --grid refused"
run "$GMM_INFER" predict --model "$WORK/stack-model.json"
expect_exit 0
expect_stdout '^row,mean,var,'
expect_stdout '^18,'
expect_stdout '^48,'
cp "$OUT" "$CASE_TMP/rows.csv"
run "$GMM_INFER" predict --model "$WORK/stack-model.json" --grid 1:2:0.5
expect_exit 2
expect_stderr "a grid has no rows: new rows come from a table \\(each f\\(\\) term's column"
# the data's own rows as new rows: the prediction at the data rows
run "$GMM_INFER" predict --model "$WORK/stack-model.json" --at "$sfx/data_rw1_iid.csv"
expect_exit 0
awk -F, 'NR == FNR { if (FNR > 1) { m[$1] = $2; v[$1] = $3 }; next }
    FNR > 1 { dm = $2 - m[$1]; dv = $3 - v[$1]; if (dm < 0) dm = -dm; if (dv < 0) dv = -dv
        if (!($1 in m) || dm > 1e-9 * sqrt(v[$1]) || dv > 1e-9 * v[$1]) { print "row " $1 ": " $2 " " $3 " data rows " m[$1] " " v[$1]; bad = 1 }
        n++ }
    END { exit bad || n != 48 }' "$CASE_TMP/rows.csv" "$OUT" > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"


begin "formula stack: predict --at new rows of rw1 + iid + x1 is the dense augmented posterior"
# scripts/make-stack-predict-fixtures.R: a data value with a group it never met (a
# pair of latents outside the band), values between, beyond and before the data's,
# new groups; means within 1e-9 sd, variances 1e-9 relative (exact Gaussian)
run "$GMM_INFER" predict --model "$sfx/model_rw1_iid_x1.json" --at "$sfx/predict_new.csv"
expect_exit 0
expect_stdout '^row,mean,var,lower,upper,level$'
rows_match "$OUT" "$sfx/predict_new_expected.csv" 1e-9 > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"

begin "formula stack: score of new rows is log N(y; mean, var + noise) of the dense posterior"
run "$GMM_INFER" score --model "$sfx/model_rw1_iid_x1.json" "$sfx/predict_new.csv" \
    --rows "$CASE_TMP/lpd.csv"
expect_exit 0
expect_stdout '"n": 9'
expect_stdout '"posterior": "exact"'
expect_file "$CASE_TMP/lpd.csv" '^line,row,y,lpd$'
rows_match "$CASE_TMP/lpd.csv" "$sfx/predict_new_expected.csv" 1e-9 lpd > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"
want=$(awk -F, 'FNR > 1 { s += $4 } END { printf "%.17g", s }' "$sfx/predict_new_expected.csv")
close_to "$(json_num "$OUT" lpd)" "$want" 1e-10 || fail "lpd $(json_num "$OUT" lpd), dense $want"

begin "formula stack: Poisson besag + rw2 + x1 at new rows: the dense Laplace predictive"
# the node without data, weeks between, beyond and before the data's; the log
# predictive density against R's integrate(); 1e-8 (the Laplace mode's Newton stop)
run "$GMM_INFER" predict --model "$sfx/model_pois.json" --at "$sfx/predict_pois_new.csv"
expect_exit 0
expect_stdout '^row,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
rows_match "$OUT" "$sfx/predict_pois_expected.csv" 1e-8 > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"
run "$GMM_INFER" score --model "$sfx/model_pois.json" "$sfx/predict_pois_new.csv" \
    --rows "$CASE_TMP/lpd.csv"
expect_exit 0
expect_stdout '"posterior": "laplace"'
rows_match "$CASE_TMP/lpd.csv" "$sfx/predict_pois_expected.csv" 1e-8 lpd > "$CASE_TMP/cmp" ||
    fail "$(cat "$CASE_TMP/cmp")"

begin "formula stack: a node off a besag term's graph is refused with its file and line"
printf 'node,week,x1,n\n1,2.5,0,1\n9,3,0.1,2\n' > "$CASE_TMP/off.csv"
run "$GMM_INFER" score --model "$sfx/model_pois.json" "$CASE_TMP/off.csv"
expect_exit 1
expect_stderr "off\\.csv:3: column 'node': '9' is not a node of the graph of f\\(node, besag\\)"
run "$GMM_INFER" predict --model "$sfx/model_pois.json" --at "$CASE_TMP/off.csv"
expect_exit 1
expect_stderr "off\\.csv:3: column 'node'"

begin "formula stack: hmc's draws of f[row], read back by predict and score"
run "$GMM_INFER" hmc --model "$WORK/stack-model.json" --warmup 40 --draws 20 --chains 2 \
    -o "$CASE_TMP/d.csv"
expect_exit 0
expect_file "$CASE_TMP/d.csv" 'f\[48\]'
run "$GMM_INFER" predict --model "$WORK/stack-model.json" --draws "$CASE_TMP/d.csv"
expect_exit 0
expect_stdout '^48,'

begin "formula stack: score --draws of new rows needs the states; with them it runs"
awk -F, 'NR == 1 || NR == 5 || NR == 20' "$sfx/data_rw1_iid.csv" > "$CASE_TMP/test.csv"
run "$GMM_INFER" score --model "$WORK/stack-model.json" "$CASE_TMP/test.csv"
expect_exit 0
expect_stdout '"n": 2'
printf 't,g,x1,y\n99,g1,0,1\n' > "$CASE_TMP/other.csv"
run "$GMM_INFER" hmc --model "$WORK/stack-model.json" --warmup 40 --draws 20 --chains 1 \
    --states -o "$CASE_TMP/ds.csv"
expect_exit 0
run "$GMM_INFER" score --model "$WORK/stack-model.json" "$CASE_TMP/other.csv" \
    --draws "$CASE_TMP/ds.csv"
expect_exit 0
run "$GMM_INFER" hmc --model "$WORK/stack-model.json" --warmup 20 --draws 10 --chains 1 \
    -o "$CASE_TMP/dn.csv"
expect_exit 0
run "$GMM_INFER" score --model "$WORK/stack-model.json" "$CASE_TMP/other.csv" \
    --draws "$CASE_TMP/dn.csv"
expect_exit 1
expect_stderr 'has no latent states x\[1\.\.[0-9]+\]'
run "$GMM_INFER" score --model "$WORK/stack-model.json" "$CASE_TMP/other.csv" \
    --draws "$CASE_TMP/ds.csv"
expect_exit 0
expect_stdout '"posterior": "draws"'
run "$GMM_INFER" predict --model "$WORK/stack-model.json" --at "$CASE_TMP/other.csv" \
    --draws "$CASE_TMP/ds.csv"
expect_exit 0
expect_stdout '^1,'

begin "formula stack: score --loo leaves each data row out"
run "$GMM_INFER" score --loo --model "$WORK/stack-model.json"
expect_exit 0
expect_stdout '"n": 47'

begin "formula stack: a kernel spec on a column of labels, a missing graph, a shared column"
run "$GMM_INFER" loglik --formula "y ~ f(t, rw1) + f(g, 'matern32')" "$sfx/data_rw1_iid.csv"
expect_exit 1
expect_stderr "column 'g'"
run "$GMM_INFER" loglik --formula 'y ~ f(t, rw1) + f(g, besag)' "$sfx/data_rw1_iid.csv"
expect_exit 1
expect_stderr 'needs graph=EDGES.csv'
run "$GMM_INFER" loglik --formula 'y ~ f(t, rw1) + f(t, iid)' "$sfx/data_rw1_iid.csv"
expect_exit 1
expect_stderr "two f\(\) terms on column 't'"

begin "formula stack: Poisson bym2 + rw2 runs the Laplace approximation; gradcheck passes"
awk -F, 'NR == 1 { print "node,week,n"; next } { printf "%s,%s,%d\n", $1, $2, ($3 > 0 ? int($3 * 3) : 0) }' \
    "$sfx/data_besag_rw1.csv" > "$CASE_TMP/counts.csv"
run "$GMM_INFER" gradcheck --formula \
    'n ~ f(node, bym2, graph=tests/fixtures/stack/edges.csv) + f(week, rw2)' \
    --likelihood poisson "$CASE_TMP/counts.csv"
expect_exit 0
expect_stderr 'gradients within tolerance'

# cyclic walks: scripts/make-cyclic-fixtures.R's dense constrained densities
for c in rw2_period rw1_default rw2_default; do
    begin "formula stack: loglik of the cyclic $c equals the dense constrained density"
    run "$GMM_INFER" loglik --model "$sfx/cyclic_model_$c.json"
    expect_exit 0
    got=$(json_num "$OUT" loglik)
    want=$(awk -F, -v k="$c" '$1 == k { print $2 }' "$sfx/cyclic_expected.csv")
    close_to "$got" "$want" 1e-8 || fail "cyclic $c: loglik $got, dense $want"
done

begin "formula stack: cyclic=true is the flag, cyclic=false the open walk; period without cyclic"
cp "$sfx/cyclic_data.csv" "$CASE_TMP/"
sed 's/cyclic, period/cyclic=true, period/' "$sfx/cyclic_model_rw2_period.json" \
    > "$CASE_TMP/m.json"
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json"
expect_exit 0
grep -q 'cyclic=true' "$CASE_TMP/m.json" || fail 'the model file does not say cyclic=true'
got=$(json_num "$OUT" loglik)
want=$(awk -F, '$1 == "rw2_period" { print $2 }' "$sfx/cyclic_expected.csv")
close_to "$got" "$want" 1e-8 || fail "cyclic=true: loglik $got, dense $want"
run "$GMM_INFER" loglik --formula 'y ~ f(v, rw1, cyclic=false) + f(week, iid)' \
    --verbose "$sfx/cyclic_data.csv"
expect_exit 0
expect_stderr 'f\.v \(rw1\)'
run "$GMM_INFER" loglik --formula 'y ~ f(week, rw2, period=20)' "$sfx/cyclic_data.csv"
expect_exit 1
expect_stderr 'period applies to a cyclic walk'
run "$GMM_INFER" loglik --formula 'y ~ f(week, rw2, cyclic, period=-3)' "$sfx/cyclic_data.csv"
expect_exit 1
expect_stderr 'period must be a positive number'
run "$GMM_INFER" loglik --formula 'y ~ f(week, rw2, cyclic=maybe)' "$sfx/cyclic_data.csv"
expect_exit 1
expect_stderr 'cyclic is a flag'

begin "formula stack: cyclic on iid, besag, bym2, a kernel or a graph precision is refused"
for t in 'f(week, iid, cyclic)' 'f(week, iid, cyclic) + f(v, rw1)' \
    'f(week, besag, graph=tests/fixtures/stack/edges.csv, cyclic)' \
    'f(week, bym2, graph=tests/fixtures/stack/edges.csv, period=3)' \
    "f(week, 'matern32', cyclic)" \
    "f(week, 'edge-ou', graph=tests/fixtures/stack/edges.csv, cyclic)"; do
    run "$GMM_INFER" loglik --formula "y ~ $t" "$sfx/cyclic_data.csv"
    expect_exit 1
    expect_stderr "applies to rw1 and rw2 only"
    expect_no_stderr 'read [0-9]+ rows'
done
run "$GMM_INFER" loglik --formula "y ~ f(week, rw2, graph)" "$sfx/cyclic_data.csv"
expect_exit 1
expect_stderr "key 'graph' needs a value"

begin "formula stack: a graph precision's parameters are named as in a one-term formula"
run "$GMM_INFER" fit --formula \
    "y ~ f(node, 'edge-ou + iid + edge-ou', graph=tests/fixtures/stack/edges.csv) + f(week, rw1)" \
    --fix f.node.edge-ou.2.lengthscale "$sfx/data_besag_rw1.csv" -o "$CASE_TMP/g.json"
expect_exit 0
for p in f.node.edge-ou.variance f.node.edge-ou.lengthscale f.node.iid.variance \
    f.node.edge-ou.2.variance f.week.variance; do
    expect_file "$CASE_TMP/g.json" "\"$p\""
done
expect_no_file_match() { ! grep -Eq -- "$2" "$1" || fail "$1 matches /$2/"; }
expect_no_file_match "$CASE_TMP/g.json" '"f\.node\.[0-9]'
fitted=$(json_num "$CASE_TMP/g.json" loglik)
run "$GMM_INFER" loglik --model "$CASE_TMP/g.json"
expect_exit 0
expect_stdout '"f\.node\.edge-ou\.2\.lengthscale"'
again=$(json_num "$OUT" loglik)
close_to "$again" "$fitted" 1e-12 || fail "loglik --model $again, fit $fitted"

begin "formula stack: predict --terms is the dense constrained posterior of rw1 + iid"
run "$GMM_INFER" predict --terms --model "$sfx/model_rw1_iid.json"
expect_exit 0
expect_stdout '^term,level,mean,sd$'
# each dense row found, mean within 1e-8 posterior sd, sd within 1e-8 relative
# (the intercept's row is the file's centre: a model written before the intercept of a
# Gaussian formula was estimated, read back at that value)
c=$(json_num "$sfx/model_rw1_iid.json" center)
b=$(awk -F, '$1 == "intercept" { print $3 }' "$OUT")
close_to "$b" "$c" 1e-15 || fail "intercept row '$b', the file's centre $c"
awk -F, 'NR == FNR { if (FNR > 1) { k = $1 "," ($1 == "f.t" ? $2 + 0 : $2); m[k] = $3; s[k] = $4; n++ }; next }
    FNR > 1 && $1 != "intercept" { k = $1 "," ($1 == "f.t" ? $2 + 0 : $2)
        if (!(k in m)) { print "no dense row " k; bad = 1; next }
        dm = $3 - m[k]; ds = $4 - s[k]; if (dm < 0) dm = -dm; if (ds < 0) ds = -ds
        if (dm > 1e-8 * s[k] || ds > 1e-8 * s[k]) { print k ": " $3 " " $4 " dense " m[k] " " s[k]; bad = 1 }
        seen++ }
    END { if (seen != n) { print seen " rows, dense " n; bad = 1 }; exit bad }' \
    "$sfx/terms_rw1_iid.csv" "$OUT" > "$CASE_TMP/cmp" || fail "$(cat "$CASE_TMP/cmp")"

begin "formula stack: predict --terms of bym2 + cyclic rw2: b and u per district, x per week"
awk -F, 'NR == 1 { print "node,week,n"; next } { printf "%s,%s,%d\n", $1, $2, ($3 > 0 ? int($3 * 3) : 0) }' \
    "$sfx/data_besag_rw1.csv" > "$CASE_TMP/counts.csv"
run "$GMM_INFER" fit --formula \
    'n ~ f(node, bym2, graph=tests/fixtures/stack/edges.csv) + f(week, rw2, cyclic)' \
    --likelihood poisson "$CASE_TMP/counts.csv" -o "$CASE_TMP/p.json"
expect_exit 0
run "$GMM_INFER" predict --terms --model "$CASE_TMP/p.json"
expect_exit 0
expect_stdout '^intercept,,'
rows=$(awk -F, '{ c[$1]++ } END { printf "%d %d %d", c["f.node"], c["f.node.u"], c["f.week"] }' "$OUT")
[[ "$rows" == "7 7 6" ]] || fail "rows of f.node, f.node.u, f.week: $rows, expected 7 7 6"
# the constraint: the structured part u and the cyclic walk each sum to zero
awk -F, '$1 == "f.node.u" { u += $3 } $1 == "f.week" { w += $3 }
    END { exit !(u < 1e-9 && u > -1e-9 && w < 1e-9 && w > -1e-9) }' "$OUT" ||
    fail "u or the walk does not sum to zero"

begin "formula stack: Laplace predict --terms of one term is predict's rows less the intercept"
awk -F, 'NR == 1 { print "node,week,n"; next } { printf "%s,%s,%d\n", $1, $2, ($3 > 0 ? int($3 * 3) : 0) }' \
    "$sfx/data_besag_rw1.csv" > "$CASE_TMP/counts.csv"
for f in 'f(week, rw2, cyclic)' 'f(node, bym2, graph=tests/fixtures/stack/edges.csv)'; do
    col=${f#f(}; col=${col%%,*}
    run "$GMM_INFER" fit --formula "n ~ $f" --likelihood poisson "$CASE_TMP/counts.csv" \
        -o "$CASE_TMP/p.json"
    expect_exit 0
    "$GMM_INFER" predict --model "$CASE_TMP/p.json" > "$CASE_TMP/rows.csv"
    run "$GMM_INFER" predict --terms --model "$CASE_TMP/p.json"
    expect_exit 0
    # row r reads the level in column col of the data: mean b + m, var sd^2
    awk -F, -v c="$col" -v t="f.$col" '
        FILENAME ~ /counts/ { if (FNR == 1) { for (k = 1; k <= NF; k++) if ($k == c) ci = k; next }
                              lev[FNR - 1] = $ci + 0; next }
        FILENAME ~ /rows/ { if (FNR > 1) { pm[$1] = $2; pv[$1] = $3; nr++ }; next }
        $1 == "intercept" { b = $3 } $1 == t { m[$2 + 0] = $3; s[$2 + 0] = $4 }
        END { for (r = 1; r <= nr; r++) { l = lev[r]
                  dm = pm[r] - b - m[l]; dv = pv[r] - s[l] * s[l]; if (dm < 0) dm = -dm; if (dv < 0) dv = -dv
                  if (!(l in m) || dm > 1e-9 || dv > 1e-9 * pv[r]) { print "row " r ": " pm[r] " " pv[r] " terms " b " + " m[l] " " s[l]; bad = 1 } }
              exit bad || nr != 42 }' "$CASE_TMP/counts.csv" "$CASE_TMP/rows.csv" "$OUT" \
        > "$CASE_TMP/cmp" || fail "$f: $(cat "$CASE_TMP/cmp")"
done

begin "formula stack: new rows with a factor level or an index value the model cannot read"
run "$GMM_INFER" fit --formula 'y ~ factor(g) + f(t, rw1)' "$sfx/data_rw1_iid.csv" \
    -o "$CASE_TMP/f.json"
expect_exit 0
printf 't,g\n3,g1\n4,g7\n' > "$CASE_TMP/lev.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/f.json" --at "$CASE_TMP/lev.csv"
expect_exit 1
expect_stderr "lev\.csv:3: column 'g': level 'g7' of factor\(g\) is not one of the model's data"
printf 't,g\n3,g1\nabc,g2\n' > "$CASE_TMP/val.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/f.json" --at "$CASE_TMP/val.csv"
expect_exit 1
expect_stderr "val\.csv:3: column 't': 'abc' is not a number"
printf 't,g\n3,g1\n-4.5,g2\n' > "$CASE_TMP/ok.csv"
run "$GMM_INFER" predict --model "$CASE_TMP/f.json" --at "$CASE_TMP/ok.csv"
expect_exit 0
expect_stdout '^2,'

begin "formula stack: a centred model's score of new rows is log N(y; mean, var + noise)"
# rw1 alone on Gaussian data is centred: the centre leaves y and the mean alike
run "$GMM_INFER" fit --formula 'y ~ f(t, rw1)' "$sfx/data_local_level.csv" -o "$CASE_TMP/ll.json"
expect_exit 0
awk -F, 'NR == 1 || NR % 7 == 0 { print $1 "," $2 }' "$sfx/data_local_level.csv" > "$CASE_TMP/ho.csv"
"$GMM_INFER" predict --model "$CASE_TMP/ll.json" --at "$CASE_TMP/ho.csv" > "$CASE_TMP/p.csv"
run "$GMM_INFER" score --model "$CASE_TMP/ll.json" "$CASE_TMP/ho.csv"
expect_exit 0
noise=$(json_num "$CASE_TMP/ll.json" likelihood.variance)
want=$(awk -F, -v s2="$noise" 'NR == FNR { if (FNR > 1) y[FNR - 1] = $2; next }
    FNR > 1 { v = $3 + s2; d = y[$1] - $2; s += -0.5 * log(2 * 3.14159265358979324 * v) - d * d / (2 * v) }
    END { printf "%.17g", s }' "$CASE_TMP/ho.csv" "$CASE_TMP/p.csv")
close_to "$(json_num "$OUT" lpd)" "$want" 1e-12 || fail "lpd $(json_num "$OUT" lpd), from predict $want"
