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

# help_options CMD: the options CMD --help defines (its option lines, not
# its usage line or prose), one per line, -h/--help left out (the page
# documents them once, for every command).
help_options() {
    "$GMM_INFER" "$1" --help | grep -E '^ {1,4}-' |
        grep -oE '(^|[ ,(])(--[a-z]([a-z-]*[a-z])?|-[a-zA-Z])([^[:alnum:]-]|$)' |
        sed -E 's/^[ ,(]//; s/[^a-z]$//' | grep -vxE -- '-h|--help' | sort -u
}
# man_options SECTION-RE: the options of the .TP items of the man page's
# subsections or sections whose header matches SECTION-RE (up to the next
# header of the same or a higher level).
man_options() {
    awk -v re="$1" '
        /^\.SH / { on = ($0 ~ re); lvl = "SH"; next }
        /^\.SS / { if (!(on && lvl == "SH")) { on = ($0 ~ re); lvl = "SS" }; next }
        on && prev == ".TP" { print }
        { prev = $0 }' "$page" |
        sed 's/\\-/-/g' |
        grep -oE '(^|[ ,(])(--[a-z]([a-z-]*[a-z])?|-[a-zA-Z])([^[:alnum:]-]|$)' |
        sed -E 's/^[ ,(]//; s/[^a-z]$//' | grep -vxE -- '-h|--help' | sort -u
}

begin "each command's --help options are the options its man page section lists, both ways"
run "$GMM_INFER" --help
cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)  *.*/\1/p' "$OUT")
[[ -n "$cmds" ]] || fail "no commands found in the usage"
for c in $cmds; do
    [[ "$c" == version ]] && continue
    h=$(help_options "$c")
    [[ -n "$h" ]] || fail "'$c --help' lists no options"
    m=$(man_options "^\\.SS $c\$")
    # Commands whose help has model options take those of MODEL OPTIONS.
    if "$GMM_INFER" "$c" --help | grep -q '^Model (state-space GP):'; then
        m=$(printf '%s\n%s\n' "$m" "$(man_options '^\.SH MODEL OPTIONS$')" | sort -u)
    fi
    case_asserts=$((case_asserts + 1))
    missing=$(comm -23 <(echo "$h") <(echo "$m") | tr '\n' ' ')
    extra=$(comm -13 <(echo "$h") <(echo "$m") | sed '/^$/d' | tr '\n' ' ')
    [[ -z "$missing" ]] || fail "'$c --help' lists $missing; the man page's $c does not"
    [[ -z "$extra" ]] || fail "the man page's $c lists $extra; '$c --help' does not"
done

# help_syn CMD: "NAME ALT MODEL" for each option of CMD --help, -h/--help
# left out: NAME the long option (or the short one when it has none), ALT
# its short form or "-", MODEL 1 for the model options (those under the
# "Model ..." headings), else 0.  Only an option line's syntax is read, up
# to the two blanks before its description.
help_syn() {
    local line spec tok short model=0 names
    while IFS= read -r line; do
        [[ "$line" == Model* ]] && model=1
        [[ "$line" =~ ^\ {1,4}- ]] || continue
        spec=${line#"${line%%[! ]*}"}
        spec=${spec%%  *}
        short=-
        names=()
        for tok in $(grep -oE -- '(^|[ ,(])(--[a-z]([a-z-]*[a-z])?|-[a-zA-Z])([^[:alnum:]-]|$)' \
            <<<"$spec" | sed -E 's/^[ ,(]//; s/[^a-zA-Z]$//'); do
            if [[ "$tok" == --* ]]; then names+=("$tok"); else short=$tok; fi
        done
        [[ ${#names[@]} -eq 0 ]] && names=("$short") && short=-
        for tok in "${names[@]}"; do
            [[ "$tok" == --help || "$tok" == -h ]] || echo "$tok $short $model"
        done
    done < <("$GMM_INFER" "$1" --help)
}
# synopsis CMD: the man page's SYNOPSIS lines of CMD (every .SY "gmm-infer
# CMD" up to the next .SY or .YS), \- read as -.
synopsis() {
    awk -v c="\"gmm-infer $1\"" '
        /^\.SH / { syn = ($0 == ".SH SYNOPSIS"); on = 0; next }
        syn && /^\.SY/ { on = (index($0, c) > 0); next }
        syn && /^\.YS/ { on = 0; next }
        on { print }' "$page" | sed 's/\\-/-/g'
}

begin "each command's SYNOPSIS lists its --help options ('model options' and 'options' stand for the rest), and only those"
run "$GMM_INFER" --help
cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)  *.*/\1/p' "$OUT")
[[ -n "$cmds" ]] || fail "no commands found in the usage"
for c in $cmds; do
    [[ "$c" == version ]] && continue
    syn=$(synopsis "$c")
    [[ -n "$syn" ]] || { fail "no SYNOPSIS for $c"; continue; }
    syn_opts=$(grep -oE -- '(^|[ ,(])(--[a-z]([a-z-]*[a-z])?|-[a-zA-Z])([^[:alnum:]-]|$)' \
        <<<"$syn" | sed -E 's/^[ ,(]//; s/[^a-zA-Z]$//' | sort -u)
    says_model=0 says_options=0
    grep -q 'model options' <<<"$syn" && says_model=1
    grep -qE '^\.RI \[ options \]' <<<"$syn" && says_options=1
    helped=$(help_syn "$c")
    [[ -n "$helped" ]] || fail "'$c --help' lists no options"
    case_asserts=$((case_asserts + 1))
    while read -r name alt model; do
        grep -qxF -- "$name" <<<"$syn_opts" && continue
        [[ "$alt" != - ]] && grep -qxF -- "$alt" <<<"$syn_opts" && continue
        [[ $model == 1 && $says_model == 1 ]] && continue
        [[ $model == 0 && $says_options == 1 ]] && continue
        fail "'$c --help' lists $name; the man page's SYNOPSIS of $c does not"
    done <<<"$helped"
    for o in $syn_opts; do
        awk -v o="$o" '$1 == o || $2 == o { found = 1 } END { exit !found }' <<<"$helped" ||
            fail "the man page's SYNOPSIS of $c lists $o; '$c --help' does not"
    done
done
