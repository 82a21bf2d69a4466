# shellcheck shell=bash
# 95_readme.sh -- the README's examples run exactly as printed, in order, in
# one copy of the checkout's layout (./gmm-infer, data/, scripts/), and each
# prints the first line the README shows under it.  An example is an
# indented line "    $ COMMAND" (continued by lines ending in a backslash);
# the indented lines after it, up to the next command or the end of the
# block, are its output.  The R example needs Rscript with the posterior
# package and is skipped without them.

begin "every README example runs as printed and prints what the README shows first"
mkdir -p "$CASE_TMP/co"
ln -s "$ROOT/data" "$CASE_TMP/co/data"
ln -s "$ROOT/scripts" "$CASE_TMP/co/scripts"
ln -s "$GMM_INFER" "$CASE_TMP/co/gmm-infer"
# One record per example: the command (continuations joined), a tab, the
# first output line shown (empty when none).
awk '
    function flush() { if (cmd != "") print cmd "\t" first; cmd = ""; first = "" }
    /^    \$ / { flush(); line = substr($0, 7); cont = 1 }
    cont && !/^    \$ / { line = line " " substr($0, 5) }
    cont { if (line ~ /\\$/) { sub(/[ ]*\\$/, "", line); next }
           cmd = line; cont = 0; got = 0; next }
    cmd != "" && /^    / && !got { first = substr($0, 5); got = 1; next }
    cmd != "" && !/^    / && !/^$/ { flush() }
    END { flush() }' "$ROOT/README.md" > "$CASE_TMP/examples.tsv"
n=$(wc -l < "$CASE_TMP/examples.tsv")
if [[ $n -lt 10 ]]; then fail "found only $n examples in README.md"; fi
case_asserts=$((case_asserts + 1))
while IFS=$'\t' read -r cmdline first; do
    if [[ $cmdline == Rscript* ]] &&
       ! Rscript -e 'library(posterior)' > /dev/null 2>&1; then
        echo "note: Rscript with the posterior package not installed; README's R example skipped"
        continue
    fi
    if ! (cd "$CASE_TMP/co" && bash -c "$cmdline" > "$CASE_TMP/ex.out" 2>&1); then
        fail "README example failed: $cmdline"
        show_output "output" "$CASE_TMP/ex.out"
    elif [[ -n $first ]] && ! grep -qxF -- "$first" "$CASE_TMP/ex.out"; then
        fail "README example does not print '$first': $cmdline"
        show_output "output" "$CASE_TMP/ex.out"
    fi
done < "$CASE_TMP/examples.tsv"
