# shellcheck shell=bash
# 93_cli_size.sh -- the CLI stays thin (docs/design.md): every src/cli/*.c
# file under 300 lines, every command function (cmd_*) on a screen, its
# body at most 80 lines; the rest is parsing and printing in files named
# for their job, or model work in the library.
# Sourced by tests/cli/run.sh (see there for the helpers).

max_file_lines=300
max_cmd_lines=80

# Files and functions over the limits, each with the reason it may be; the
# check fails when one is no longer over its limit, so the list only
# shrinks.  Entries: "file src/cli/NAME.c" or "function cmd_NAME".
known_oversize=''

# "file PATH LINES" for every src/cli file, "function NAME LINES" for every
# cmd_* definition (its body: the lines between the '{' and the '}' in
# column 1 that open and close it).
size_report() {
    (cd "$ROOT" && for f in src/cli/*.c; do
        echo "file $f $(wc -l <"$f")"
        awk '/^[a-z].*[ *]cmd_[a-z_]+\(.*[^;]$/ && !name {
                 name = $0; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name); start = 0; next }
             name && !start && /^{/ { start = NR; next }
             name && start && /^}/ { print "function " name " " (NR - start - 1); name = "" }' "$f"
    done)
}

begin "every src/cli file under $max_file_lines lines, every cmd_* body at most $max_cmd_lines"
size_report >"$CASE_TMP/sizes"
case_asserts=$((case_asserts + 1))
grep -q '^function cmd_' "$CASE_TMP/sizes" || fail "no cmd_* function found under src/cli"
while read -r kind name n; do
    limit=$max_cmd_lines
    [[ $kind == file ]] && limit=$((max_file_lines - 1))
    over=0
    ((n > limit)) && over=1
    if grep -qxF -- "$kind $name" <<<"$known_oversize"; then
        ((over)) || fail "$kind $name has $n lines: no longer over the limit, delete it from known_oversize in 93_cli_size.sh"
    elif ((over)); then
        fail "$kind $name has $n lines (at most $limit): move model work into src/mdl or src/infer, or parsing and printing into a file named for its job"
    fi
done <"$CASE_TMP/sizes"
while read -r kind name; do
    [[ -z "$kind" ]] && continue
    grep -q "^$kind $name " "$CASE_TMP/sizes" ||
        fail "known_oversize names $kind $name, which no longer exists: delete it"
done <<<"$known_oversize"
