# shellcheck shell=bash
# 90_man.sh -- the man page: it lints clean, and it cannot drift from the
# command table or from the options each command's --help lists.
# Sourced by tests/cli/run.sh (see there for the helpers).

page="$ROOT/man/gmm-infer.1"

begin "man page exists and lints clean with groff -ww"
expect_file "$page" '^\.TH GMM-INFER 1 '
if command -v groff >/dev/null 2>&1; then
    run groff -ww -man -z "$page"
    expect_exit 0
    expect_stdout_empty
    expect_stderr_empty
else
    echo "note: groff is not installed; man page lint skipped (apt-get install groff-base)"
fi

begin "every command of the usage has a subsection under COMMANDS, and only those"
run "$GMM_INFER" --help
expect_exit 0
cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)  *.*/\1/p' "$OUT")
[[ -n "$cmds" ]] || fail "no commands found in the usage"
for c in $cmds; do
    expect_file "$page" "^\\.SS $c\$"
done
# The subsections of COMMANDS, up to the next section.
documented=$(sed -n '/^\.SH COMMANDS/,/^\.SH /s/^\.SS \(.*\)$/\1/p' "$page")
for d in $documented; do
    grep -qx -- "$d" <<<"$cmds" || fail "man page documents '$d', which is not a command"
done

begin "every long option of every command's --help is in the man page"
for c in $cmds; do
    [[ "$c" == version ]] && continue
    run "$GMM_INFER" "$c" --help
    expect_exit 0
    for opt in $(grep -oE -- '--[a-z][a-z-]*' "$OUT" | sort -u); do
        # The page writes --max-iter as \-\-max\-iter.
        grep -qF -- "${opt//-/\\-}" "$page" ||
            fail "'$c --help' lists $opt, the man page does not"
    done
done
