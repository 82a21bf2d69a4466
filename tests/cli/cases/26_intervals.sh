# shellcheck shell=bash
# 26_intervals.sh -- every printed interval has one set of column names
# (lower,upper; rate_lower,rate_upper; prob_lower,prob_upper), the level of
# --level (default 0.9) and a level column; each checked against its own
# computation here (normal quantiles from tables, R's type 7 quantiles of
# the draws in awk).  plot-predict labels the band with the data's level.
# Sourced by tests/cli/run.sh (see there for the helpers).

coal="$ROOT/data/coal.csv"

# Column K of CSV FILE by header NAME, one value a line.
column() { # FILE NAME
    awk -F, -v name="$2" 'NR == 1 { for (k = 1; k <= NF; k++) if ($k == name) c = k; next }
                          c { print $c }' "$1"
}

begin "predict --level: the normal interval, the response mapped through the link, the level"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern12 \
    -o "$CASE_TMP/p.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/p.json" --grid 1851:1962:0.5 --level 0.8
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
# Phi^-1(0.9) = 1.2815515655446004 (tables); rate = E exp(f) = exp(m + v/2)
check=$(awk -F, 'NR == 1 { next }
    function bad(what) { print "row " NR ": " what; exit 1 }
    function near(a, b) { d = a - b; if (d < 0) d = -d; return d <= 1e-12 * (1 + (b < 0 ? -b : b)) }
    { h = 1.2815515655446004 * sqrt($3)
      if (!near($4, $2 - h) || !near($5, $2 + h)) bad("f interval " $4 " " $5)
      if (!near($6, exp($2 + $3 / 2)) || !near($7, exp($4)) || !near($8, exp($5))) bad("rate")
      if ($9 != "0.8") bad("level " $9) }
    END { if (NR != 224) print "rows " NR - 1 }' "$OUT")
[[ -z "$check" ]] || fail "predict --level 0.8: $check"
run "$GMM_INFER" predict --model "$CASE_TMP/p.json"
expect_exit 0
# the default is 0.9: Phi^-1(0.95) = 1.6448536269514722
check=$(awk -F, 'NR > 1 { h = 1.6448536269514722 * sqrt($3); d = $5 - $2 - h
                          if (d * d > 1e-24 * (1 + h * h) || $9 != "0.9") print NR }' "$OUT")
[[ -z "$check" ]] || fail "predict's default level is not 0.9 at rows $check"

begin "predict --level: a bernoulli model's prob columns are the logistic of f's interval"
awk -F, -v OFS=, 'NR == 1 { print "year,hit"; next } { print $1, ($2 > 2) }' "$coal" \
    >"$CASE_TMP/b.csv"
run "$GMM_INFER" fit "$CASE_TMP/b.csv" --likelihood bernoulli --kernel matern12 \
    -o "$CASE_TMP/b.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/b.json" --level 0.5
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,prob,prob_lower,prob_upper,level$'
# Phi^-1(0.75) = 0.6744897501960817
check=$(awk -F, 'NR == 1 { next }
    function near(a, b) { d = a - b; if (d < 0) d = -d; return d <= 1e-12 * (1 + (b < 0 ? -b : b)) }
    { h = 0.6744897501960817 * sqrt($3)
      if (!near($4, $2 - h) || !near($5, $2 + h) || !near($7, 1 / (1 + exp(-$4))) ||
          !near($8, 1 / (1 + exp(-$5))) || !($7 < $6 && $6 < $8) || $9 != "0.5") print NR }' "$OUT")
[[ -z "$check" ]] || fail "bernoulli intervals wrong at rows $check"

begin "--level must be a probability strictly between 0 and 1"
for bad in 0 1 1.5 -0.2 90 nan abc ''; do
    run "$GMM_INFER" predict --model "$ROOT/nonexistent.json" --level "$bad"
    expect_exit 2
    expect_stderr "^gmm-infer predict: --level: '.*' is not a probability in \(0, 1\)$"
    expect_stdout_empty
done
for lv in 0.5 0.9; do
    run "$GMM_INFER" vi "$coal" --likelihood poisson --level $lv -o "$CASE_TMP/v.json"
    expect_exit 2
    expect_stderr 'applies to --posterior'
    expect_no_file "$CASE_TMP/v.json"
done

begin "predict --draws: R's type 7 quantiles at the level, rates draw by draw"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern12 \
    -o "$CASE_TMP/m.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --chains 2 --warmup 100 --draws 50 --quiet \
    --states -o "$CASE_TMP/d.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/d.csv" --level 0.8 \
    -o "$CASE_TMP/pd.csv"
expect_exit 0
expect_file "$CASE_TMP/pd.csv" '^x,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
# f[7] is the row of 1857: its draws, sorted; type 7 at p: x[1 + (N-1) p]
column "$CASE_TMP/d.csv" 'f[7]' | LC_ALL=C sort -g >"$CASE_TMP/f7"
want=$(awk '{ x[NR] = $1; s += $1; r += exp($1) }
    function q(p,   h, lo) { h = (NR - 1) * p; lo = int(h); return x[lo + 1] + (h - lo) * (x[lo + 2] - x[lo + 1]) }
    END { printf "%.17g %.17g %.17g %.17g %.17g %.17g", s / NR, q(0.1), q(0.9), r / NR, exp(q(0.1)), exp(q(0.9)) }' \
    "$CASE_TMP/f7")
got=$(awk -F, '$1 == 1857 { print $2, $4, $5, $6, $7, $8, $9 }' "$CASE_TMP/pd.csv")
check=$(awk -v w="$want" -v g="$got" 'BEGIN {
    n = split(w, a, " "); split(g, b, " ")
    if (n != 6 || b[7] != "0.8") { print "row 1857: " g; exit }
    for (k = 1; k <= 6; k++) { d = a[k] - b[k]; if (d < 0) d = -d
        if (d > 1e-12 * (1 + (a[k] < 0 ? -a[k] : a[k]))) print "field " k ": " b[k] " vs " a[k] } }')
[[ -z "$check" ]] || fail "predict --draws against the draws' own quantiles: $check"

begin "predict --draws --grid has the rate columns; plot-predict draws them with the data's level"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern12 \
    -o "$CASE_TMP/m.json"
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --chains 1 --warmup 100 --draws 40 --states \
    --quiet -o "$CASE_TMP/st.csv"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/st.csv" \
    --grid 1900:1930:10 -o "$CASE_TMP/g.csv"
expect_exit 0
expect_file "$CASE_TMP/g.csv" '^x,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
check=$(awk -F, 'function near(a, b) { d = a - b; return d * d <= 1e-28 * b * b }
    NR > 1 && !(near($7, exp($4)) && near($8, exp($5)) && $7 < $6 && $6 < $8 && $9 == "0.9") { print NR }' \
    "$CASE_TMP/g.csv")
[[ -z "$check" ]] || fail "rate columns of predict --draws --grid wrong at rows $check"
# a stand-in gnuplot keeps the script it is given and writes the image
cat >"$CASE_TMP/gnuplot" <<'EOF'
#!/bin/sh
[ "$1" = -e ] && exit 1
cp "$1" "$GP_KEEP" || exit 1
out=$(sed -n "s/^set output '\(.*\)'\$/\1/p" "$1")
printf 'PNG' >"$out"
EOF
chmod +x "$CASE_TMP/gnuplot"
run env GNUPLOT="$CASE_TMP/gnuplot" GP_KEEP="$CASE_TMP/plot.gp" "$ROOT/scripts/plot-predict" \
    --predict "$CASE_TMP/g.csv" --band rate,rate_lower,rate_upper -o "$CASE_TMP/g.png"
expect_exit 0
expect_file "$CASE_TMP/g.png"
expect_file "$CASE_TMP/plot.gp" "title '90% interval'"
run env GNUPLOT="$CASE_TMP/gnuplot" GP_KEEP="$CASE_TMP/plot.gp" "$ROOT/scripts/plot-predict" \
    --predict "$CASE_TMP/g.csv" --band-label 'interval of the rate' -o "$CASE_TMP/g.png"
expect_exit 0
expect_file "$CASE_TMP/plot.gp" "title '90% interval of the rate'"
# rows of two levels are one band of no level
{ cat "$CASE_TMP/g.csv"; sed 1d "$CASE_TMP/g.csv" | sed 's/,0\.9$/,0.5/'; } >"$CASE_TMP/mixed.csv"
run env GNUPLOT="$CASE_TMP/gnuplot" GP_KEEP="$CASE_TMP/plot.gp" "$ROOT/scripts/plot-predict" \
    --predict "$CASE_TMP/mixed.csv" -o "$CASE_TMP/m.png"
expect_exit 1
expect_stderr 'levels 0\.9 and 0\.5'
expect_no_file "$CASE_TMP/m.png"

begin "vi --posterior is predict's table under q, at the same level"
run "$GMM_INFER" vi "$coal" --likelihood poisson --exposure exposure \
    --kernel 'matern12(variance=0.5, lengthscale=20)' --quiet -o "$CASE_TMP/v.json" \
    --posterior "$CASE_TMP/post.csv" --level 0.7
expect_exit 0
expect_file "$CASE_TMP/post.csv" '^x,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
run "$GMM_INFER" predict --model "$CASE_TMP/v.json" --level 0.7
expect_exit 0
# two computations from the same q (in memory; read back exactly from the q file): within
# 1e-12 of the row's scale (pred_close), not byte for byte
pred_close "$OUT" "$CASE_TMP/post.csv" 1e-12 > "$CASE_TMP/cmp" ||
    fail "vi --posterior differs from predict --model vi.json: $(cat "$CASE_TMP/cmp")"
