# shellcheck shell=bash
# 96_docs.sh -- the documentation's shape: a README that is a user guide,
# the design, accuracy and benchmark pages it points to, a design diagram
# that shows every command, measured tables that say where they were
# measured, and no file that narrates how the tree was made (that is what
# the commit messages are for).

readme="$ROOT/README.md"

begin "README.md is a user guide of at most 250 lines that links the docs/ pages"
expect_file "$readme"
n=$(wc -l < "$readme")
[[ $n -le 250 ]] || fail "README.md has $n lines (at most 250)"
case_asserts=$((case_asserts + 1))
for f in design accuracy benchmarks; do
    expect_file "$ROOT/docs/$f.md" '^# '
    expect_file "$readme" "\\(docs/$f\\.md\\)"
done
for s in '^## Set up' '^## Data formats' '^## Exit codes' '^## Limitations' \
         'check\.names = FALSE'; do
    expect_file "$readme" "$s"
done

begin "the design diagram shows every command of the usage"
run "$GMM_INFER" --help
expect_exit 0
cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)  *.*/\1/p' "$OUT")
[[ -n "$cmds" ]] || fail "no commands found in the usage"
# the first fenced block of docs/design.md
diagram=$(awk '/^```/ { if (on) exit; on = 1; next } on' "$ROOT/docs/design.md")
[[ -n "$diagram" ]] || fail "docs/design.md has no diagram"
for c in $cmds; do
    grep -qw -- "$c" <<<"$diagram" || fail "the design diagram does not show '$c'"
done

begin "every measured table in docs/ names its machine, date and command"
for f in "$ROOT/docs/accuracy.md" "$ROOT/docs/benchmarks.md"; do
    expect_file "$f" 'EPYC-2'
    # The paragraph just before each table must carry the label.
    awk -v file="${f##*/}" '
        /^\|/ { if (!intable && (para !~ /EPYC-2/ ||
                                 para !~ /20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]/ ||
                                 para !~ /`[^`]+`/))
                    print file ":" NR ": a table without machine, date and command before it"
                intable = 1; next }
        /^$/ { blank = 1; intable = 0; next }
        { para = blank ? $0 : para " " $0; blank = 0; intable = 0 }' "$f" > "$CASE_TMP/unlabelled"
    case_asserts=$((case_asserts + 1))
    while IFS= read -r line; do fail "$line"; done < "$CASE_TMP/unlabelled"
done

begin "no file narrates its own making"
# Tracked text outside the data and the fixtures.  Each pattern starts with
# a one-letter bracket class, so that this file does not match itself.
re='\b([s]tage|[s]ession)s? [0-9]|\b[i]ssue #?[0-9]|\b([t]ried|[w]ritten) and (dropped|measured)|\b[u]sed to be\b|\b[w]as tried\b'
(cd "$ROOT" && grep -rnIiE --exclude-dir=fixtures -e "$re" \
     README.md docs man src include scripts tests Makefile .ci 2>/dev/null) > "$CASE_TMP/narration"
case_asserts=$((case_asserts + 1))
while IFS= read -r line; do fail "narration: $line"; done < "$CASE_TMP/narration"
