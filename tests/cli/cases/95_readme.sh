# shellcheck shell=bash
# 95_readme.sh -- the README's "Using it" examples run exactly as printed,
# from a copy of the checkout's layout (./gmm-infer, data/, scripts/).  The
# plotting example needs gnuplot (scripts/install-deps.sh --demo) and is
# skipped without it.

begin "every README example runs as printed"
mkdir -p "$CASE_TMP/co"
ln -s "$ROOT/data" "$CASE_TMP/co/data"
ln -s "$ROOT/scripts" "$CASE_TMP/co/scripts"
ln -s "$GMM_INFER" "$CASE_TMP/co/gmm-infer"
# the block after "as printed:", continuation lines joined
awk '/examples run from the checkout as printed:/ { on = 1; next }
     on && /^$/ && started { exit }
     on && /^    / { started = 1; sub(/^    /, ""); line = line $0
                     if (line ~ /\\$/) { sub(/\\$/, "", line); next }
                     print line; line = "" }' "$ROOT/README.md" > "$CASE_TMP/examples.sh"
n=$(wc -l < "$CASE_TMP/examples.sh")
if [[ $n -lt 8 ]]; then fail "found only $n examples in README.md"; fi
case_asserts=$((case_asserts + 1))
while IFS= read -r cmdline; do
    if [[ $cmdline == *plot-predict* ]] && ! command -v gnuplot > /dev/null; then continue; fi
    if ! (cd "$CASE_TMP/co" && bash -c "$cmdline" > "$CASE_TMP/ex.out" 2> "$CASE_TMP/ex.err"); then
        fail "README example failed: $cmdline"
        show_output stderr "$CASE_TMP/ex.err"
    fi
done < "$CASE_TMP/examples.sh"
