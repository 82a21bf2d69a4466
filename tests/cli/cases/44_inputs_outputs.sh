# shellcheck shell=bash
# 44_inputs_outputs.sh -- what a command reads and writes is safe to name:
#   - no output (-o, --posterior, --summary, --pointwise, --rows, --perm, the
#     FILE.json / FILE.q.csv written beside one, cmdstan chain files, .partial
#     names) replaces one of the command's inputs (data, --model and the data,
#     edge list, graph= files and q file it names, --graph, --at, --draws and
#     their sidecars, --init and its q, test files, draws files), through
#     symbolic and hard links, a FIFO included; nor is one output another:
#     exit 2 before anything is read or computed, every file as it was;
#   - a run that fails writes no file: several outputs are committed together;
#   - predict works on a model whose data have one distinct input (against
#     the closed-form posterior of one state);
#   - a formula's graph= file is recorded absolute: the model works from
#     another directory;
#   - an option that takes a value, given twice, is a usage error naming it;
#     the repeatable ones (--fix, --draws, --prior) still accumulate.
# Sourced by tests/cli/run.sh (see there for the helpers).

io_coal="$ROOT/data/coal.csv"
io_mrf="$ROOT/tests/fixtures/mrf"

# io_full DIR: a full device to write to (a node of our own when root, so
# that a bug renaming over it cannot replace the system's /dev/full).
io_full() {
    if [[ $(id -u) -eq 0 ]] && mknod "$1/full" c 1 7 2>/dev/null; then
        echo "$1/full"
    else
        echo /dev/full
    fi
}

# io_refused RE: the last run was refused as a usage error whose message
# matches RE, before any data were read.
io_refused() {
    expect_exit 2
    expect_stderr "$1"
    expect_stderr '\(an output never replaces an input\)$|are the same file \(each output needs a file of its own\)$'
    expect_no_stderr 'read [0-9]+ rows'
}

# io_same FILE: FILE is byte for byte its copy FILE.orig.
io_same() {
    case_asserts=$((case_asserts + 1))
    cmp -s "$1" "$1.orig" || fail "$1 was changed"
}

# io_keep FILE...: remember FILE's bytes (for io_same and io_restore).
io_kept=()
io_keep() { local f; for f in "$@"; do cp "$f" "$f.orig"; io_kept+=("$f"); done; }

# io_restore: the shared inputs as io_keep saw them, whatever an earlier case
# (run with a binary that replaced them) did, so that each case fails or
# passes on its own.
io_restore() { local f; for f in "${io_kept[@]}"; do cp "$f.orig" "$f"; done; }

# io_no_temporaries DIR: no temporary, old link or .partial left in DIR.
io_no_temporaries() {
    case_asserts=$((case_asserts + 1))
    local left
    left=$(find "$1" -name '.*.tmp*' -o -name '.*.old*' -o -name '*.partial' | head -n 3)
    [[ -z "$left" ]] || fail "left behind: $left"
}

# ---- the inputs shared by the cases below -----------------------------------

begin "the shared inputs: a count model, its draws, a vi result, a graph model, a formula model"
io=$CASE_TMP
cp "$io_coal" "$io/coal.csv"
cp "$io_mrf/gauss.csv" "$io_mrf/edges.csv" "$io/"
run "$GMM_INFER" fit "$io/coal.csv" --likelihood poisson --kernel matern12 -o "$io/m.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$io/m.json" --chains 2 --warmup 30 --draws 10 --quiet --log-lik \
    --states -o "$io/d.csv"
expect_exit 0
run "$GMM_INFER" hmc --model "$io/m.json" --chains 2 --chain-id 3 --warmup 30 --draws 10 \
    --quiet --log-lik --states -o "$io/e.csv"
expect_exit 0
run "$GMM_INFER" vi --model "$io/m.json" --quiet -o "$io/v.json"
expect_exit 0
run "$GMM_INFER" fit "$io/gauss.csv" --graph "$io/edges.csv" --node region \
    --y y --precision 'edge-ou(variance=1, lengthscale=2)' -o "$io/g.json"
expect_exit 0
run "$GMM_INFER" fit "$io/gauss.csv" --formula "y ~ x + f(region, besag, graph=$io/edges.csv)" \
    -o "$io/f.json"
expect_exit 0
printf 'year\n1900.5\n1901.5\n' >"$io/at.csv"
io_keep "$io/coal.csv" "$io/m.json" "$io/d.csv" "$io/d.csv.json" "$io/e.csv" "$io/e.csv.json" \
    "$io/v.json" "$io/v.q.csv" \
    "$io/edges.csv" "$io/gauss.csv" "$io/g.json" "$io/f.json" "$io/at.csv"

# ---- no output replaces an input ------------------------------------------------

begin "fit -o onto its data file, directly or through a symbolic or hard link: refused, data kept"
io_restore
run "$GMM_INFER" fit "$io/coal.csv" --likelihood poisson -o "$io/coal.csv"
io_refused "^gmm-infer fit: -o $io/coal\.csv is the data file $io/coal\.csv "
io_same "$io/coal.csv"
ln -s coal.csv "$io/soft.csv"
ln "$io/coal.csv" "$io/hard.csv"
run "$GMM_INFER" fit "$io/coal.csv" --likelihood poisson -o "$io/soft.csv"
io_refused "^gmm-infer fit: -o $io/soft\.csv is the data file $io/coal\.csv "
run "$GMM_INFER" fit "$io/hard.csv" --likelihood poisson -o "$io/coal.csv"
io_refused "^gmm-infer fit: -o $io/coal\.csv is the data file $io/hard\.csv "
io_same "$io/coal.csv"
[[ -L "$io/soft.csv" ]] || fail "the symbolic link was replaced"
io_no_temporaries "$io"
# stdin and stdout are never a file of the command's
run bash -c 'exec "$GMM_INFER" fit - --likelihood poisson --kernel matern12 -o - <"$1"' x \
    "$io/coal.csv"
expect_exit 0
expect_stdout '"likelihood": "poisson"'

begin "fit -o onto --graph's edge list or a formula's graph= file: refused"
io_restore
run "$GMM_INFER" fit "$io/gauss.csv" --graph "$io/edges.csv" --node region \
    --y y --precision 'edge-ou(variance=1, lengthscale=2)' -o "$io/edges.csv"
io_refused "^gmm-infer fit: -o $io/edges\.csv is the edge list $io/edges\.csv "
run "$GMM_INFER" fit "$io/gauss.csv" --formula "y ~ x + f(region, besag, graph=$io/edges.csv)" \
    -o "$io/edges.csv"
io_refused "is the edge list of f\(region, besag\) $io/edges\.csv "
io_same "$io/edges.csv"
io_same "$io/gauss.csv"

begin "predict -o onto the model, the files it names, DATA.csv, --at, --draws or a sidecar: refused"
io_restore
run "$GMM_INFER" predict --model "$io/m.json" -o "$io/m.json"
io_refused "^gmm-infer predict: -o $io/m\.json is the model file $io/m\.json "
run "$GMM_INFER" predict --model "$io/m.json" -o "$io/coal.csv"
io_refused "^gmm-infer predict: -o $io/coal\.csv is the model's data file "
run "$GMM_INFER" predict --model "$io/m.json" "$io/gauss.csv" -o "$io/gauss.csv"
io_refused "is the data file $io/gauss\.csv "
run "$GMM_INFER" predict --model "$io/g.json" -o "$io/edges.csv"
io_refused "is the model's edge list "
run "$GMM_INFER" predict --model "$io/f.json" -o "$io/edges.csv"
io_refused "is the edge list of f\(region, besag\) in the model "
run "$GMM_INFER" predict --model "$io/m.json" --at "$io/at.csv" -o "$io/at.csv"
io_refused "is the --at file "
run "$GMM_INFER" predict --model "$io/m.json" --draws "$io/d.csv" -o "$io/d.csv"
io_refused "is the draws file "
run "$GMM_INFER" predict --model "$io/m.json" --draws "$io/d.csv" -o "$io/d.csv.json"
io_refused "is the draws' sidecar "
run "$GMM_INFER" predict --model "$io/v.json" -o "$io/v.q.csv"
io_refused "is the model's q file "
for f in m.json coal.csv gauss.csv edges.csv f.json at.csv d.csv d.csv.json v.q.csv; do
    io_same "$io/$f"
done
# a new file is no input
run "$GMM_INFER" predict --model "$io/m.json" --at "$io/at.csv" -o "$io/p.csv"
expect_exit 0
expect_file "$io/p.csv" '^1900\.5,'

begin "a FIFO that is both an input and the output is refused without being opened"
io_restore
mkfifo "$CASE_TMP/fifo"
# the binary before the fix blocks reading the FIFO: a short limit
GMM_CLI_TIMEOUT=10 run "$GMM_INFER" predict --model "$io/m.json" --at "$CASE_TMP/fifo" \
    -o "$CASE_TMP/fifo"
io_refused "^gmm-infer predict: -o $CASE_TMP/fifo is the --at file $CASE_TMP/fifo "
[[ -p "$CASE_TMP/fifo" ]] || fail "the FIFO is no longer a FIFO"

begin "hmc: the draws, FILE.json, chain files, .partial names and --summary never replace an input"
io_restore
h=(--chains 2 --warmup 30 --draws 10 --quiet)
run "$GMM_INFER" hmc --model "$io/m.json" "${h[@]}" -o "$io/m.json"
io_refused "^gmm-infer hmc: -o $io/m\.json is the model file "
run "$GMM_INFER" hmc "$io/coal.csv" --likelihood poisson --kernel matern12 "${h[@]}" \
    -o "$io/coal.csv"
io_refused "^gmm-infer hmc: -o $io/coal\.csv is the data file "
# -o M writes M.json beside the draws
run "$GMM_INFER" hmc --model "$io/m.json" "${h[@]}" -o "$io/m"
io_refused "^gmm-infer hmc: $io/m\.json \(written with -o $io/m\) is the model file "
run "$GMM_INFER" hmc --model "$io/m.json" "${h[@]}" --summary "$io/coal.csv"
io_refused "^gmm-infer hmc: --summary $io/coal\.csv is the model's data file "
# --format cmdstan -o P writes P_1.csv, P_2.csv; interrupted, P_1.csv.partial
cp "$io/coal.csv" "$CASE_TMP/P_2.csv"
cp "$io/coal.csv" "$CASE_TMP/Q_1.csv.partial"
run "$GMM_INFER" hmc "$CASE_TMP/P_2.csv" --likelihood poisson "${h[@]}" --format cmdstan \
    -o "$CASE_TMP/P"
io_refused "$CASE_TMP/P_2\.csv \(written with -o $CASE_TMP/P\) is the data file "
run "$GMM_INFER" hmc "$CASE_TMP/Q_1.csv.partial" --likelihood poisson "${h[@]}" \
    --format cmdstan -o "$CASE_TMP/Q"
io_refused "Q_1\.csv\.partial \(written with -o $CASE_TMP/Q\) is the data file "
# --init and its q
run "$GMM_INFER" hmc --model "$io/m.json" "${h[@]}" --init "$io/v.json" -o "$io/v.json"
io_refused "^gmm-infer hmc: -o $io/v\.json is the --init file "
run "$GMM_INFER" hmc --model "$io/m.json" "${h[@]}" --init "$io/v.json" --summary "$io/v.q.csv"
io_refused "^gmm-infer hmc: --summary $io/v\.q\.csv is the q file of --init "
for f in m.json coal.csv v.json v.q.csv; do io_same "$io/$f"; done
expect_no_file "$CASE_TMP/P_1.csv"
io_no_temporaries "$io"

begin "vi: the model, its q file and --posterior never replace an input"
io_restore
run "$GMM_INFER" vi --model "$io/m.json" --quiet -o "$io/m.json"
io_refused "^gmm-infer vi: -o $io/m\.json is the model file "
# -o O.json writes O.q.csv beside it
cp "$io/coal.csv" "$CASE_TMP/o.q.csv"
run "$GMM_INFER" vi "$CASE_TMP/o.q.csv" --likelihood poisson --quiet -o "$CASE_TMP/o.json"
io_refused "^gmm-infer vi: $CASE_TMP/o\.q\.csv \(written with -o $CASE_TMP/o\.json\) is the data file "
run "$GMM_INFER" vi --model "$io/m.json" --quiet -o "$CASE_TMP/w.json" --posterior "$io/coal.csv"
io_refused "^gmm-infer vi: --posterior $io/coal\.csv is the model's data file "
run "$GMM_INFER" vi --model "$io/v.json" --quiet -o "$CASE_TMP/w.json" --posterior "$io/v.q.csv"
io_refused "is the model's q file "
run "$GMM_INFER" vi --model "$io/m.json" --init "$io/v.json" --quiet -o "$io/v.json"
io_refused "^gmm-infer vi: -o $io/v\.json is the --init file "
run "$GMM_INFER" vi --model "$io/m.json" --init "$io/v.json" --quiet -o "$CASE_TMP/w.json" \
    --posterior "$io/v.q.csv"
io_refused "is the q file of --init "
for f in m.json coal.csv v.json v.q.csv; do io_same "$io/$f"; done
expect_no_file "$CASE_TMP/w.json"
expect_no_file "$CASE_TMP/o.json"

begin "score --rows never replaces the model, its data, the test file or the draws"
io_restore
run "$GMM_INFER" score --model "$io/m.json" "$io/at.csv" --rows "$io/m.json"
io_refused "^gmm-infer score: --rows $io/m\.json is the model file "
cp "$io/coal.csv" "$CASE_TMP/test.csv"
run "$GMM_INFER" score --model "$io/m.json" "$CASE_TMP/test.csv" --rows "$CASE_TMP/test.csv"
io_refused "^gmm-infer score: --rows $CASE_TMP/test\.csv is the test file "
run "$GMM_INFER" score --model "$io/m.json" --loo --rows "$io/coal.csv"
io_refused "is the model's data file "
run "$GMM_INFER" score --model "$io/m.json" "$CASE_TMP/test.csv" --draws "$io/d.csv" \
    --rows "$io/d.csv"
io_refused "is the draws file "
for f in m.json coal.csv d.csv; do io_same "$io/$f"; done
cmp -s "$CASE_TMP/test.csv" "$io/coal.csv" || fail "the test file was changed"

begin "summary -o, loo -o and --pointwise, order --perm never replace what they read"
io_restore
run "$GMM_INFER" summary "$io/d.csv" -o "$io/d.csv"
io_refused "^gmm-infer summary: -o $io/d\.csv is the draws file "
run "$GMM_INFER" summary "$io/d.csv" -o "$io/d.csv.json"
io_refused "^gmm-infer summary: -o $io/d\.csv\.json is the draws' sidecar "
run "$GMM_INFER" loo "$io/d.csv" -o "$io/d.csv"
io_refused "^gmm-infer loo: -o $io/d\.csv is the draws file "
run "$GMM_INFER" loo "$io/d.csv" "$io/e.csv" --pointwise "$io/e.csv"
io_refused "^gmm-infer loo: --pointwise $io/e\.csv is the draws file "
run "$GMM_INFER" order --perm "$io/edges.csv" "$io/edges.csv"
io_refused "^gmm-infer order: --perm $io/edges\.csv is the edge list "
for f in d.csv d.csv.json edges.csv; do io_same "$io/$f"; done

begin "two outputs of one run that are one file are refused"
io_restore
run "$GMM_INFER" hmc --model "$io/m.json" --chains 2 --warmup 30 --draws 10 --quiet \
    -o "$CASE_TMP/s.csv" --summary "$CASE_TMP/s.csv"
io_refused "^gmm-infer hmc: --summary $CASE_TMP/s\.csv and -o $CASE_TMP/s\.csv are the same file"
run "$GMM_INFER" vi --model "$io/m.json" --quiet -o "$CASE_TMP/w.json" \
    --posterior "$CASE_TMP/w.q.csv"
io_refused "^gmm-infer vi: --posterior $CASE_TMP/w\.q\.csv and $CASE_TMP/w\.q\.csv \(written with -o $CASE_TMP/w\.json\) are the same file"
run "$GMM_INFER" loo "$io/d.csv" -o "$CASE_TMP/l.json" --pointwise "$CASE_TMP/./l.json"
io_refused "are the same file"
expect_no_file "$CASE_TMP/s.csv"
expect_no_file "$CASE_TMP/w.json"
expect_no_file "$CASE_TMP/l.json"
# a device written in place twice replaces nothing
run "$GMM_INFER" loo "$io/d.csv" -o /dev/null --pointwise /dev/null
expect_exit 0
[[ -c /dev/null ]] || fail "/dev/null is no longer a character device"

# ---- a failed run writes no file ----------------------------------------------

begin "hmc: --summary that cannot be written leaves no draws, no FILE.json; an old FILE is kept"
io_restore
full=$(io_full "$CASE_TMP")
echo old >"$CASE_TMP/d.csv"
run "$GMM_INFER" hmc --model "$io/m.json" --chains 2 --warmup 30 --draws 10 --quiet \
    -o "$CASE_TMP/d.csv" --summary "$full"
expect_exit 1
expect_stderr "$full: write error: No space left on device"
expect_file "$CASE_TMP/d.csv" '^old$'
expect_no_file "$CASE_TMP/d.csv.json"
run "$GMM_INFER" hmc --model "$io/m.json" --chains 2 --warmup 30 --draws 10 --quiet \
    --format cmdstan -o "$CASE_TMP/c" --summary "$full"
expect_exit 1
expect_no_file "$CASE_TMP/c_1.csv"
expect_no_file "$CASE_TMP/c_2.csv"
expect_no_file "$CASE_TMP/c.json"
# the draws on a full stdout: no summary
run bash -c 'exec "$@" >"$0"' "$full" "$GMM_INFER" hmc --model "$io/m.json" --chains 2 \
    --warmup 30 --draws 10 --quiet --summary "$CASE_TMP/s.csv"
expect_exit 1
expect_no_file "$CASE_TMP/s.csv"
io_no_temporaries "$CASE_TMP"

begin "vi: --posterior that cannot be written leaves no model and no q file"
io_restore
full=$(io_full "$CASE_TMP")
run "$GMM_INFER" vi --model "$io/m.json" --quiet -o "$CASE_TMP/v.json" --posterior "$full"
expect_exit 1
expect_stderr "$full: write error: No space left on device"
expect_no_file "$CASE_TMP/v.json"
expect_no_file "$CASE_TMP/v.q.csv"
io_no_temporaries "$CASE_TMP"

begin "loo, score, order: one output that cannot be written leaves none of the others"
io_restore
full=$(io_full "$CASE_TMP")
run "$GMM_INFER" loo "$io/d.csv" -o "$full" --pointwise "$CASE_TMP/pw.csv"
expect_exit 1
expect_no_file "$CASE_TMP/pw.csv"
run bash -c 'exec "$@" >"$0"' "$full" "$GMM_INFER" score --model "$io/m.json" "$io/coal.csv" \
    --rows "$CASE_TMP/rows.csv"
expect_exit 1
expect_stderr '<stdout>: write error: No space left on device'
expect_no_file "$CASE_TMP/rows.csv"
run bash -c 'exec "$@" >"$0"' "$full" "$GMM_INFER" order --perm "$CASE_TMP/perm.csv" \
    "$io/edges.csv"
expect_exit 1
expect_no_file "$CASE_TMP/perm.csv"
io_no_temporaries "$CASE_TMP"

# ---- predict with one distinct input ----------------------------------------------

# io_one_input CSV: the posterior of f at x = 0, 0.5, ..., 2 given Gaussian
# outcomes all at x = 1 (CSV x,y), f ~ GP(0, matern32(variance 2, lengthscale
# 0.5)), noise variance 0.1, not centred: f(1) ~ N(mu, 1/P) with P = 1/2 +
# m/0.1, mu = (sum y / 0.1) / P; at x, with r = k(x, 1)/2, mean r mu and
# variance 2 (1 - r^2) + r^2 / P.  Prints x,mean,var.
io_one_input() {
    awk -F, 'NR > 1 { s += $2; m++ }
        END { P = 0.5 + m / 0.1; mu = (s / 0.1) / P; print "x,mean,var"
              for (i = 0; i <= 4; i++) { x = i / 2; d = x - 1; if (d < 0) d = -d
                  a = sqrt(3) * d / 0.5; r = (1 + a) * exp(-a)
                  printf "%.17g,%.17g,%.17g\n", x, r * mu, 2 * (1 - r * r) + r * r / P } }' "$1"
}

begin "predict on a model whose data have one distinct input: the closed-form posterior"
io_restore
printf 'x,y\n1,0.5\n1,0.7\n' >"$CASE_TMP/two.csv"
printf 'x,y\n1,0.6\n' >"$CASE_TMP/one.csv"
run "$GMM_INFER" fit "$CASE_TMP/two.csv" --kernel 'matern32(variance=2, lengthscale=0.5)' \
    --noise 0.1 --no-center --fix 0.matern32.variance --fix 0.matern32.lengthscale \
    --fix likelihood.variance -o "$CASE_TMP/two.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/two.json" --grid 0:2:0.5
expect_exit 0
io_one_input "$CASE_TMP/two.csv" >"$CASE_TMP/want2.csv"
rows_match "$OUT" "$CASE_TMP/want2.csv" 1e-9 || fail "two rows at x = 1: not the closed form"
# one row, given as the data of the same model
run "$GMM_INFER" predict --model "$CASE_TMP/two.json" "$CASE_TMP/one.csv" --grid 0:2:0.5
expect_exit 0
io_one_input "$CASE_TMP/one.csv" >"$CASE_TMP/want1.csv"
rows_match "$OUT" "$CASE_TMP/want1.csv" 1e-9 || fail "one row: not the closed form"
# --observed adds the noise variance
run "$GMM_INFER" predict --model "$CASE_TMP/two.json" --grid 0:0:1 --observed
expect_exit 0
awk -F, 'NR == FNR { if (FNR == 2) v = $3; next } FNR == 2 { d = $3 - (v + 0.1)
    exit !(d < 1e-12 && d > -1e-12) }' "$CASE_TMP/want2.csv" "$OUT" ||
    fail "--observed: the variance is not f's plus 0.1"

begin "predict on a Poisson model with one distinct input: the one-state Laplace posterior"
io_restore
printf 'x,y\n1,3\n1,5\n' >"$CASE_TMP/c.csv"
run "$GMM_INFER" fit "$CASE_TMP/c.csv" --likelihood poisson \
    --kernel 'matern32(variance=2, lengthscale=0.5)' --intercept 1 --fix intercept \
    --fix 0.matern32.variance --fix 0.matern32.lengthscale -o "$CASE_TMP/c.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/c.json" --grid 0:2:0.5
expect_exit 0
# the mode of sum_i (y_i (1 + f) - e^(1 + f)) - f^2 / 4 by Newton, its
# curvature P; then at x as above, the mean 1 + r f_hat
awk -F, 'NR > 1 { s += $2; m++ }
    END { f = 0; for (it = 0; it < 100; it++) { e = exp(1 + f)
              f -= (s - m * e - f / 2) / (-m * e - 0.5) }
          P = m * exp(1 + f) + 0.5; print "x,mean,var"
          for (i = 0; i <= 4; i++) { x = i / 2; d = x - 1; if (d < 0) d = -d
              a = sqrt(3) * d / 0.5; r = (1 + a) * exp(-a)
              printf "%.17g,%.17g,%.17g\n", x, 1 + r * f, 2 * (1 - r * r) + r * r / P } }' \
    "$CASE_TMP/c.csv" >"$CASE_TMP/wantc.csv"
rows_match "$OUT" "$CASE_TMP/wantc.csv" 1e-8 || fail "not the one-state Laplace posterior"

# ---- a formula's graph= file from another directory ------------------------------

begin "a formula's graph= file is recorded absolute: the model predicts from another directory"
io_restore
mkdir -p "$CASE_TMP/A (1)" "$CASE_TMP/B"
cp "$io_mrf/gauss.csv" "$io_mrf/edges.csv" "$CASE_TMP/A (1)/"
run bash -c 'cd "$0" && exec "$GMM_INFER" fit gauss.csv -o m.json \
    --formula "y ~ x + f(region, besag, graph=edges.csv)"' "$CASE_TMP/A (1)"
expect_exit 0
a=$(cd "$CASE_TMP/A (1)" && pwd -P)
# the path has a ')' in it: quoted so that the formula reads back
grep -qF "graph='$a/edges.csv')" "$CASE_TMP/A (1)/m.json" ||
    fail "the model does not record graph='$a/edges.csv': $(grep formula "$CASE_TMP/A (1)/m.json")"
run bash -c 'cd "$0" && exec "$GMM_INFER" predict --model m.json' "$CASE_TMP/A (1)"
expect_exit 0
cp "$OUT" "$CASE_TMP/here.csv"
run bash -c 'cd "$0" && exec "$GMM_INFER" predict --model "../A (1)/m.json"' "$CASE_TMP/B"
expect_exit 0
# one model and its data read from another directory: the same computation, the same bytes
cmp -s "$OUT" "$CASE_TMP/here.csv" || fail "predict from another directory differs"
run bash -c 'cd "$0" && exec "$GMM_INFER" loglik --model "../A (1)/m.json"' "$CASE_TMP/B"
expect_exit 0
expect_stdout '"loglik": '

# ---- options given twice --------------------------------------------------------

# io_twice CMD NAME ARGS...: gmm-infer CMD ARGS is refused naming NAME.
io_twice() {
    local cmd=$1 name=$2
    shift 2
    run "$GMM_INFER" "$cmd" "$@"
    expect_exit 2
    expect_stderr "^gmm-infer $cmd: $name given twice\$"
}

begin "an option that takes a value, given twice, is refused by every command, naming it; --fix, --draws and --prior accumulate"
io_restore
t=$CASE_TMP
io_twice fit '-o/--output' "$io/coal.csv" --likelihood poisson -o "$t/a.json" --output "$t/b.json"
io_twice fit --restarts "$io/coal.csv" --likelihood poisson --restarts 1 --restarts 2
io_twice loglik --model --model "$io/m.json" --model "$io/m.json"
io_twice gradcheck --tol "$io/coal.csv" --likelihood poisson --tol 1e-6 --tol 1e-5
io_twice predict --model --model "$io/m.json" --model "$io/v.json"
io_twice predict --level --model "$io/m.json" --level 0.5 --level 0.6
io_twice predict --grid --model "$io/m.json" --grid 1:2:1 --grid 1:3:1
io_twice predict --at --model "$io/m.json" --at "$io/at.csv" --at "$io/at.csv"
io_twice predict '-o/--output' --model "$io/m.json" -o "$t/a.csv" -o "$t/b.csv"
io_twice hmc --chains --model "$io/m.json" --chains 1 --chains 2
io_twice hmc --summary --model "$io/m.json" --summary "$t/a.csv" --summary "$t/b.csv"
io_twice vi --bandwidth --model "$io/m.json" -o "$t/a.json" --bandwidth 1 --bandwidth 2
io_twice vi --level --model "$io/m.json" -o "$t/a.json" --posterior "$t/p.csv" --level 0.5 \
    --level 0.6
io_twice score --rows --model "$io/m.json" "$io/coal.csv" --rows "$t/a.csv" --rows "$t/b.csv"
io_twice score --model --model "$io/m.json" --model "$io/m.json" "$io/coal.csv"
io_twice summary '-o/--output' -o "$t/a.csv" -o "$t/b.csv" "$io/d.csv"
io_twice loo '-p/--pointwise' --pointwise "$t/a.csv" -p "$t/b.csv" "$io/d.csv"
io_twice order --perm --perm "$t/a.csv" --perm "$t/b.csv" "$io/edges.csv"
io_twice order --edge-cols --edge-cols i,j --edge-cols i,j "$io/edges.csv"
# the model options' own wording, as before
io_twice loglik --kernel "$io/coal.csv" --kernel matern12 --kernel matern32
run "$GMM_INFER" hmc --model "$io/m.json" --quiet --sample-hyper \
    --prior '0.matern12.variance=lognormal(0,1)' --prior '0.matern12.variance=lognormal(0,2)'
expect_exit 2
expect_stderr '^gmm-infer hmc: --prior: 0\.matern12\.variance given twice$'
for f in a.json b.json a.csv b.csv p.csv; do expect_no_file "$t/$f"; done
# the repeatable options still accumulate, and flags may repeat
run "$GMM_INFER" predict --model "$io/m.json" --draws "$io/d.csv" --draws "$io/e.csv" \
    --grid 1900:1901:1 --level 0.5
expect_exit 0
expect_stdout '^1900,'
run "$GMM_INFER" score --model "$io/m.json" "$io/coal.csv" --draws "$io/d.csv" --draws "$io/e.csv"
expect_exit 0
expect_stdout '"posterior": "draws"'
run "$GMM_INFER" hmc --model "$io/m.json" --chains 1 --warmup 20 --draws 5 --quiet \
    --sample-hyper --prior '0.matern12.variance=lognormal(0,1)' \
    --prior '0.matern12.lengthscale=lognormal(2,1)' -o "$CASE_TMP/h.csv"
expect_exit 0
expect_file "$CASE_TMP/h.csv.json" 'lognormal'
run "$GMM_INFER" loglik "$io/coal.csv" --likelihood poisson --kernel matern12 --verbose \
    --verbose --fix intercept --fix 0.matern12.variance
expect_exit 0
expect_stdout '"loglik": '
