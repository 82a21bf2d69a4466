# shellcheck shell=bash
# 97_blas_kernels.sh -- what the commands evaluate without random numbers
# does not depend on OpenBLAS's kernels beyond rounding: the README's
# deterministic examples (fit, predict, vi, score, order; loo of given
# draws) run under OPENBLAS_CORETYPE=Prescott (generic SSE3) and =Haswell
# (AVX2, skipped without it) give every number of their output and of the
# model files they write within 1e-8 relative (or 1e-12 absolute) of each
# other.  Iteration and evaluation counts and timings are not compared.
# vi's model file is compared at 1e-6: the graph's variance and lengthscale
# are flat directions of the ELBO, where the gradient's rounding noise
# (~3e-7 on q's scale) leaves them 2e-7 relative apart between kernels
# (measured); its held-out score, which depends on them smoothly, stays
# within 1e-8 (4.6e-9 measured).

begin "README's deterministic examples agree under two OpenBLAS kernels (1e-8 relative)"
kernels=(Prescott Haswell)
grep -qw avx2 /proc/cpuinfo 2>/dev/null || {
    echo "note: no AVX2 here: 97_blas_kernels compares Prescott with the native kernels"
    kernels=(Prescott native)
}
bk_cmds="$CASE_TMP/cmds.txt"
awk '
    function flush() { if (cmd != "") print cmd; cmd = "" }
    /^    \$ / { flush(); line = substr($0, 7); cont = 1 }
    cont && !/^    \$ / { line = line " " substr($0, 5) }
    cont { if (line ~ /\\$/) { sub(/[ ]*\\$/, "", line); next }
           cmd = line; cont = 0; next }
    END { flush() }' "$ROOT/README.md" |
    grep -Ev '^(\./gmm-infer (hmc|summary)|Rscript)' > "$bk_cmds"
echo "./gmm-infer loo tests/fixtures/loo/draws_normal.csv" >> "$bk_cmds"
case_asserts=$((case_asserts + 1))
nb=$(wc -l < "$bk_cmds")
[[ $nb -ge 8 ]] || fail "only $nb deterministic README examples found"
for k in "${kernels[@]}"; do
    d="$CASE_TMP/$k"
    mkdir -p "$d/tests/fixtures"
    ln -s "$ROOT/data" "$d/data"
    ln -s "$ROOT/tests/fixtures/loo" "$d/tests/fixtures/loo"
    ln -s "$GMM_INFER" "$d/gmm-infer"
    i=0
    while IFS= read -r c; do
        i=$((i + 1))
        if [[ $k == native ]]; then
            (cd "$d" && env -u OPENBLAS_CORETYPE bash -c "$c") > "$d/out.$i" 2> "$d/err.$i"
        else
            (cd "$d" && OPENBLAS_CORETYPE=$k bash -c "$c") > "$d/out.$i" 2> "$d/err.$i"
        fi || fail "$k: README example failed: $c ($(head -c 300 "$d/err.$i"))"
    done < "$bk_cmds"
done
# Every number of a's files against b's, in order; JSON keys that count or time
# are skipped with their value.
bk_compare() {
    awk -v A="$1" -v B="$2" -v tol="$3" '
        function nums(f, arr,   n, line, s) {
            n = 0
            while ((getline line < f) > 0) {
                if (line ~ /"(iterations|evaluations|restarts|[a-z_]*seconds)":/) continue
                while (match(line, /-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/)) {
                    arr[++n] = substr(line, RSTART, RLENGTH)
                    line = substr(line, RSTART + RLENGTH)
                }
            }
            close(f)
            return n
        }
        BEGIN {
            na = nums(A, a); nb = nums(B, b)
            if (na != nb) { print A ": " na " numbers, " B ": " nb; exit 1 }
            for (i = 1; i <= na; i++) {
                x = a[i] + 0; y = b[i] + 0; d = x - y; if (d < 0) d = -d
                s = x < 0 ? -x : x; t = y < 0 ? -y : y; if (t > s) s = t
                if (d > tol * s && d > 1e-12) {
                    print A ": number " i ": " a[i] " against " b[i]; exit 1 }
            }
        }'
}
a=${kernels[0]}
b=${kernels[1]}
for f in "$CASE_TMP/$a"/out.* "$CASE_TMP/$a"/*.json; do
    g="$CASE_TMP/$b/${f#"$CASE_TMP/$a/"}"
    if [[ ! -f $g ]]; then fail "$g missing"; continue; fi
    tol=1e-8
    [[ $f == *-vi.json ]] && tol=1e-6
    r=$(bk_compare "$f" "$g" "$tol") || fail "$a against $b: $r"
done
njson=$(ls "$CASE_TMP/$a"/*.json 2> /dev/null | wc -l)
[[ $njson -ge 4 ]] || fail "only $njson model files written"
