# shellcheck shell=bash
# 54_hmc_cmdstan.sh -- hmc --format cmdstan: CmdStan's output CSV, one file
# per chain, read back by a parser of the format written here (CmdStan
# guide, "Stan CSV File Format"): configuration comments, the header with
# CmdStan's names, the adaptation comments (step size, the diagonal inverse
# metric), the draws, the timing comments; the values are those of the
# csv layout for the same seed.  Where ArviZ or CmdStanPy is installed,
# scripts/check-cmdstan-readers reads the files with them (not run here).
#
# Byte-for-byte comparisons here compare one computation with itself: the two
# layouts come from the same seeded run (--format changes only how the rows
# are written, both with 17 digits), and what reads them merges the chains by
# id into the same array, bit for bit (draws.h), before the same computation.

coal="$ROOT/data/coal.csv"
kern='matern12(variance=0.5, lengthscale=20)'

# stan_csv FILE: parse a Stan CSV file; print "ok" and the facts found, or
# "bad: reason".  Independent of the writer: a line-by-line state machine.
stan_csv() {
    awk -F, '
        function bad(msg) { print "bad: " msg " (line " NR ")"; failed = 1; exit }
        state == 0 && /^#/ {
            line = $0; sub(/^# */, "", line)
            if (split(line, kv, " = ") == 2) { key = kv[1]; sub(/^ +/, "", key); conf[key] = kv[2] }
            next
        }
        state == 0 {
            header = $0; ncol = NF; state = 1; next
        }
        state == 1 {
            if ($0 != "# Adaptation terminated") bad("no adaptation after the header")
            state = 2; next
        }
        state == 2 {
            if ($0 !~ /^# Step size = /) bad("no step size")
            step = $0; sub(/^# Step size = /, "", step); state = 3; next
        }
        state == 3 {
            if ($0 != "# Diagonal elements of inverse mass matrix:") bad("no metric")
            state = 4; next
        }
        state == 4 {
            line = $0; sub(/^# /, "", line)
            nmetric = split(line, m, ", ")
            for (i = 1; i <= nmetric; i++) if (!(m[i] + 0 > 0)) bad("metric entry " m[i])
            state = 5; next
        }
        state == 5 && /^#/ { state = 6 }
        state == 5 {
            if (NF != ncol) bad("row of " NF " fields, header " ncol)
            if ($3 != step) bad("stepsize__ " $3 " is not the adapted " step)
            ndraw++; next
        }
        state == 6 {
            if ($0 ~ /^#  Elapsed Time: [0-9.]+ seconds \(Warm-up\)$/) timing++
            if ($0 ~ /^# +[0-9.]+ seconds \(Total\)$/) timing++
            if ($0 !~ /^#/) bad("data after the timing")
            next
        }
        END {
            if (failed) exit 1
            if (state < 6 || timing != 2) { print "bad: incomplete (state " state ")"; exit 1 }
            print "ok"
            print "header " header
            print "draws " ndraw
            print "metric " nmetric
            print "step " step
            print "id " conf["id"]
            print "method " conf["method"]
            print "num_samples " conf["num_samples"]
            print "num_warmup " conf["num_warmup"]
            print "save_warmup " conf["save_warmup"]
            print "engine " conf["engine"]
            print "metric_kind " conf["metric"]
            print "seed " conf["seed"]
        }' "$1"
}

begin "hmc --format cmdstan: one Stan CSV per chain, the csv layout's values"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --chains 2 --warmup 60 \
    --draws 15 --seed 5 --quiet --format cmdstan -o "$CASE_TMP/d.csv"
expect_exit 0
expect_stdout_empty
expect_no_file "$CASE_TMP/d.csv"
expect_file "$CASE_TMP/d.csv.json" '"format": "cmdstan"'
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --chains 2 --warmup 60 \
    --draws 15 --seed 5 --quiet -o "$CASE_TMP/ref.csv"
expect_exit 0
want_header="lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__"
for i in $(seq 112); do want_header+=",f.$i"; done
for c in 1 2; do
    f="$CASE_TMP/d_$c.csv"
    expect_file "$f"
    [[ -f "$f" ]] || continue
    stan_csv "$f" >"$CASE_TMP/facts"
    head -n 1 "$CASE_TMP/facts" | grep -qx ok || fail "chain $c: $(head -n 1 "$CASE_TMP/facts")"
    fact() { sed -n "s/^$1 //p" "$CASE_TMP/facts"; }
    [[ $(fact header) == "$want_header" ]] || fail "chain $c: header $(fact header | cut -c 1-120)..."
    [[ $(fact draws) == 15 && $(fact num_samples) == 15 ]] ||
        fail "chain $c: $(fact draws) draws, num_samples $(fact num_samples), expected 15"
    [[ $(fact num_warmup) == 60 && $(fact save_warmup) == 0 ]] || fail "chain $c: warm-up settings"
    [[ $(fact id) == "$c" && $(fact method) == sample && $(fact seed) == 5 ]] ||
        fail "chain $c: id $(fact id), method $(fact method), seed $(fact seed)"
    [[ $(fact engine) == nuts && $(fact metric_kind) == diag_e ]] || fail "chain $c: engine/metric"
    # the metric is the whitened latent's: one entry per state (matern12: 112)
    [[ $(fact metric) == 112 ]] || fail "chain $c: $(fact metric) metric entries, expected 112"
    # the step size is the one FILE.json records for the chain
    want_step=$(tr -d ' \n' <"$CASE_TMP/ref.csv.json" |
        sed -n 's/.*"step_size":\[\([^]]*\)\].*/\1/p' | cut -d, -f "$c")
    awk -v a="$(fact step)" -v b="$want_step" 'BEGIN { exit !(a + 0 == b + 0) }' ||
        fail "chain $c: step size $(fact step), FILE.json of the csv run has $want_step"
    # the draws: the csv layout's rows of chain c without .chain,.iteration,.draw
    grep -v '^#' "$f" | tail -n +2 >"$CASE_TMP/rows-cmdstan"
    awk -F, -v c="$c" 'NR > 1 && $1 == c' "$CASE_TMP/ref.csv" | cut -d, -f 4- >"$CASE_TMP/rows-csv"
    cmp -s "$CASE_TMP/rows-cmdstan" "$CASE_TMP/rows-csv" ||
        fail "chain $c: the draws differ from the csv layout's of the same seed"
done

begin "hmc --format cmdstan: sampled parameters get Stan names, graph nodes their positions"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --chains 1 --warmup 40 \
    --draws 5 --quiet --sample-hyper --latent-subset 1-2 --states --format cmdstan \
    -o "$CASE_TMP/h"
expect_exit 0
expect_file "$CASE_TMP/h_1.csv" '^lp__,.*,energy__,0_matern12_variance,0_matern12_lengthscale,intercept,f\.1,f\.2,x\.1,x\.2,'
# the metric covers the sampled parameters too: 112 states + 3
expect_file "$CASE_TMP/h_1.csv" '^# Diagonal elements of inverse mass matrix:$'
n=$(grep -A 1 '^# Diagonal' "$CASE_TMP/h_1.csv" | tail -n 1 | tr ',' '\n' | wc -l)
[[ $n -eq 115 ]] || fail "$n metric entries, expected 115"
run "$GMM_INFER" hmc "$ROOT/data/flu_even.csv" --graph "$ROOT/data/flu_bybw_edges.csv" \
    --node node --y count --exposure population_2001 --likelihood poisson \
    --precision 'edge-ou(variance=1, lengthscale=300)' --chains 1 --warmup 20 --draws 3 --quiet \
    --format cmdstan -o "$CASE_TMP/g.csv"
expect_exit 0
expect_file "$CASE_TMP/g_1.csv" '^lp__,.*,energy__,f\.1,f\.2,f\.3,'

begin "hmc --format: usage errors"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --format json
expect_exit 2
expect_stderr "format: 'json' is not csv or cmdstan"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --format cmdstan
expect_exit 2
expect_stderr 'give -o FILE'
mkfifo "$CASE_TMP/fifo"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --format cmdstan -o "$CASE_TMP/fifo"
expect_exit 2
expect_stderr 'not a device or FIFO'

begin "summary, loo, predict and score read the cmdstan files as the csv layout of the same seed"
"$GMM_INFER" fit "$coal" --likelihood poisson --kernel "$kern" -o "$CASE_TMP/m.json" 2>/dev/null ||
    fail "fit failed"
for fmt in cmdstan csv; do
    run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --chains 2 --warmup 60 --draws 15 --seed 9 \
        --quiet --sample-hyper --states --log-lik --format "$fmt" -o "$CASE_TMP/$fmt.csv"
    expect_exit 0
done
stan=("$CASE_TMP/cmdstan_1.csv" "$CASE_TMP/cmdstan_2.csv")
# the parameters' own names (from the set's sidecar), f[row], x[i], log_lik[row]
run "$GMM_INFER" summary "${stan[@]}"
expect_exit 0
expect_stdout '^0\.matern12\.lengthscale,'
expect_stdout '^log_lik\[112\],'
"$GMM_INFER" summary "$CASE_TMP/csv.csv" >"$CASE_TMP/s-csv" 2>/dev/null
cmp -s "$OUT" "$CASE_TMP/s-csv" || fail "summary of the cmdstan files differs from the csv layout's"
# the chains' ids are their '# id = ' lines: any file order gives the same
"$GMM_INFER" summary "${stan[1]}" "${stan[0]}" 2>/dev/null | cmp -s - "$CASE_TMP/s-csv" ||
    fail "summary of the files in reverse order differs"
# without '# id = ' lines the file order is the chain order
for c in 1 2; do grep -v '^# id = ' "${stan[c - 1]}" >"$CASE_TMP/noid_$c.csv"; done
"$GMM_INFER" summary "$CASE_TMP/noid_1.csv" "$CASE_TMP/noid_2.csv" 2>/dev/null >"$CASE_TMP/s-noid"
# (without their sidecar noid.csv.json the parameters keep CmdStan's names)
grep -q '^0_matern12_lengthscale,' "$CASE_TMP/s-noid" || fail "no 0_matern12_lengthscale"
cp "$CASE_TMP/cmdstan.csv.json" "$CASE_TMP/noid.csv.json"
"$GMM_INFER" summary "$CASE_TMP/noid_1.csv" "$CASE_TMP/noid_2.csv" 2>/dev/null |
    cmp -s - "$CASE_TMP/s-csv" || fail "summary of the files without ids differs"
run "$GMM_INFER" loo "${stan[@]}"
expect_exit 0
"$GMM_INFER" loo "$CASE_TMP/csv.csv" 2>/dev/null | cmp -s - "$OUT" ||
    fail "loo of the cmdstan files differs from the csv layout's"
# predict and score find the set's sidecar (cmdstan.csv.json): no warning
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "${stan[0]}" --draws "${stan[1]}" \
    --grid 1850:1963:0.5
expect_exit 0
expect_stderr_empty
"$GMM_INFER" predict --model "$CASE_TMP/m.json" --draws "$CASE_TMP/csv.csv" --grid 1850:1963:0.5 \
    2>/dev/null | cmp -s - "$OUT" || fail "predict --draws --grid differs from the csv layout's"
run "$GMM_INFER" score --model "$CASE_TMP/m.json" "$coal" --draws "${stan[0]}" --draws "${stan[1]}"
expect_exit 0
expect_stderr_empty
"$GMM_INFER" score --model "$CASE_TMP/m.json" "$coal" --draws "$CASE_TMP/csv.csv" 2>/dev/null |
    cmp -s - "$OUT" || fail "score --draws differs from the csv layout's"
# the sidecar ties the files to their model as the csv layout's does
"$GMM_INFER" fit "$coal" --likelihood poisson --kernel matern32 -o "$CASE_TMP/m2.json" 2>/dev/null ||
    fail "fit failed"
run "$GMM_INFER" predict --model "$CASE_TMP/m2.json" --draws "${stan[0]}" --draws "${stan[1]}"
expect_exit 1
expect_stderr 'cmdstan_1\.csv: draws of another model \(another number of latents\)'

begin "a graph's f.K is its K-th node: predict and score read them as the csv layout's f[label]"
graph=(--graph "$ROOT/data/flu_bybw_edges.csv" --node node --y count --exposure population_2001
    --likelihood poisson --precision 'edge-ou(variance=1, lengthscale=300)')
"$GMM_INFER" fit "$ROOT/data/flu_even.csv" "${graph[@]}" -o "$CASE_TMP/g.json" 2>/dev/null ||
    fail "fit failed"
for fmt in cmdstan csv; do
    run "$GMM_INFER" hmc --model "$CASE_TMP/g.json" --chains 2 --warmup 30 --draws 10 --seed 3 \
        --quiet --format "$fmt" -o "$CASE_TMP/$fmt.csv"
    expect_exit 0
done
# the node labels are 0..139, positions 1..140: f.1 is node 0
for cmd in predict score; do
    args=(--model "$CASE_TMP/g.json")
    [[ $cmd == score ]] && args+=("$ROOT/data/flu_even.csv")
    run "$GMM_INFER" "$cmd" "${args[@]}" --draws "$CASE_TMP/cmdstan_1.csv" \
        --draws "$CASE_TMP/cmdstan_2.csv"
    expect_exit 0
    "$GMM_INFER" "$cmd" "${args[@]}" --draws "$CASE_TMP/csv.csv" 2>/dev/null |
        cmp -s - "$OUT" || fail "$cmd --draws differs from the csv layout's"
done
# summary has no model: it names them by position
run "$GMM_INFER" summary "$CASE_TMP/cmdstan_1.csv" "$CASE_TMP/cmdstan_2.csv"
expect_exit 0
expect_stdout '^f\[140\],'

begin "malformed cmdstan files: errors name file, line and column"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel "$kern" --chains 2 --warmup 20 \
    --draws 5 --seed 5 --quiet --format cmdstan -o "$CASE_TMP/d.csv"
expect_exit 0
hl=$(grep -n '^lp__' "$CASE_TMP/d_1.csv" | cut -d: -f1)
bad=$((hl + 5))  # the first draw, after the 4 adaptation lines
awk -F, -v OFS=, -v n="$bad" 'NR == n { $9 = "q" } { print }' "$CASE_TMP/d_1.csv" >"$CASE_TMP/b_1.csv"
run "$GMM_INFER" summary "$CASE_TMP/b_1.csv" "$CASE_TMP/d_2.csv"
expect_exit 1
expect_stderr "b_1\.csv:$bad: column 'f\.2': 'q' is not a number"
awk -v n="$bad" 'NR == n { $0 = "1,2" } { print }' "$CASE_TMP/d_1.csv" >"$CASE_TMP/b_1.csv"
run "$GMM_INFER" loo "$CASE_TMP/b_1.csv" "$CASE_TMP/d_2.csv"
expect_exit 1
expect_stderr "b_1\.csv:$bad: expected 119 fields, found 2"
run "$GMM_INFER" summary "$CASE_TMP/d_1.csv" "$CASE_TMP/d_1.csv"
expect_exit 1
expect_stderr "d_1\.csv:$bad: chain 1 is also in .*d_1\.csv"
