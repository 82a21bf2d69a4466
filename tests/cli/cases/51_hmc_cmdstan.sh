# shellcheck shell=bash
# 51_hmc_cmdstan.sh -- hmc --format cmdstan: CmdStan's output CSV, one file
# per chain, read back by a parser of the format written here (CmdStan
# guide, "Stan CSV File Format"): configuration comments, the header with
# CmdStan's names, the adaptation comments (step size, the diagonal inverse
# metric), the draws, the timing comments; the values are those of the
# csv layout for the same seed.  Where ArviZ or CmdStanPy is installed,
# scripts/check-cmdstan-readers reads the files with them (not run here).

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
