#!/usr/bin/env bash
# run.sh -- end-to-end tests of the gmm-infer binary.
#
#   GMM_INFER=build/release/gmm-infer tests/cli/run.sh [PATTERN...]
#
# Every tests/cli/cases/*.sh is sourced in name order (only those whose file
# name contains one of the PATTERNs, when given), each in a subshell of its
# own: the functions, variables, options and working directory a case file
# sets end with it, so no case file depends on another or changes the next.
# To add tests, add a case file, NN_WHAT.sh with a two-digit number NN that
# no other case file has (the numbers give the order; the runner fails a
# duplicate); the runner does not change.  A case file is a list of cases:
#
#   begin "fit writes a model"            # start a case (ends the previous one)
#   run "$GMM_INFER" fit -o "$CASE_TMP/m.json" data.csv
#   expect_exit 0
#   expect_stdout_empty
#   expect_stderr '^gmm-infer fit: '     # grep -E regex, matched against any line
#   expect_file "$CASE_TMP/m.json" '"format": 1'
#
# Assertions (each records a failure and carries on; none aborts the run):
#   expect_exit N                       exit status of the last run
#   expect_stdout RE / expect_stderr RE         some line matches RE
#   expect_no_stdout RE / expect_no_stderr RE   no line matches RE
#   expect_stdout_eq TEXT               stdout is exactly TEXT (+ final newline)
#   expect_stdout_empty / expect_stderr_empty
#   expect_file PATH [RE]               PATH exists (and some line matches RE)
#   expect_no_file PATH
#   fail MESSAGE                        record a failure of the current case
#
# Provided to case files: $GMM_INFER (absolute path of the binary), $ROOT
# (the checkout), $WORK (a scratch directory per case file, for what its
# cases share), $CASE_TMP (an empty scratch directory per case), and after
# each run: $STATUS, $OUT and $ERR (files holding stdout and stderr).
# Commands run with stdin from /dev/null unless the case redirects it
# (`run "$GMM_INFER" fit - < data.csv`), the working directory $ROOT, and a
# time limit of $GMM_CLI_TIMEOUT seconds (default 60; exit status 124).
# A case with no assertion fails, and so does a case file that redefines a
# function of this runner or ends before its last line (exit).  VERBOSE=1
# prints every case.
#
# The last line of output is exactly "N passed, M failed"; the exit status
# is 0 only when nothing failed.

set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CASES_DIR="$ROOT/tests/cli/cases"

if [[ -z "${GMM_INFER:-}" ]]; then
    echo "run.sh: set GMM_INFER to the gmm-infer binary" >&2
    exit 2
fi
if [[ "$GMM_INFER" != /* ]]; then
    GMM_INFER="$(cd "$(dirname "$GMM_INFER")" && pwd)/$(basename "$GMM_INFER")"
fi
if [[ ! -x "$GMM_INFER" ]]; then
    echo "run.sh: $GMM_INFER is not an executable" >&2
    exit 2
fi
export GMM_INFER ROOT

TOP=$(mktemp -d "${TMPDIR:-/tmp}/gmm-cli.XXXXXX") || exit 2
trap 'rm -rf "$TOP"' EXIT
# Set for each case file: its scratch directory, holding $OUT, $ERR and the
# cases' $CASE_TMP.
WORK=
OUT=
ERR=
STATUS=
CASE_TMP=

npass=0
nfail=0
ncase=0
case_name=
case_file=
case_failed=0
case_asserts=0
last_cmd=

# ---- shared helpers for the cases ------------------------------------------

# The number after "KEY": on a line of JSON read from stdin (first match; KEY
# taken literally, brackets and all); json_num: in JSON file $1.
json_key() {
    awk -v k="\"$1\":" '{ sub(/^ */, "") } index($0, k) == 1 {
        v = substr($0, length(k) + 2); sub(/,$/, "", v); print v; exit }'
}
json_num() { json_key "$2" < "$1"; }
# |a - b| <= tol * |b| (relative) or, with a 4th argument, absolute; false when
# either is empty.
close_to() {
    awk -v a="$1" -v b="$2" -v t="$3" -v abs="${4:-}" 'BEGIN {
        d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b
        exit !(a != "" && b != "" && (abs != "" ? d <= t : d <= t * s)) }'
}
# Every row of output $1 (row,mean,var,...; score --rows: line,row,y,lpd with a
# fourth argument) against expected file $2 (row,mean,var[,lpd]): means within $3
# sd, variances within $3 relative (lpd: within $3 absolute); every expected row
# seen.
rows_match() {
    awk -F, -v t="$3" -v lpd="${4:-}" '
        NR == FNR { if (FNR > 1) { m[$1] = $2; v[$1] = $3; l[$1] = $4; n++ }; next }
        FNR > 1 { r = lpd ? $2 : $1
            if (!(r in m)) { print "no expected row " r; bad = 1; next }
            if (lpd) { d = $4 - l[r]; if (d < 0) d = -d
                if (d > t) { print "row " r ": lpd " $4 ", dense " l[r]; bad = 1 } }
            else { dm = $2 - m[r]; dv = $3 - v[r]; if (dm < 0) dm = -dm; if (dv < 0) dv = -dv
                if (dm > t * sqrt(v[r]) || dv > t * v[r]) {
                    print "row " r ": " $2 " " $3 ", dense " m[r] " " v[r]; bad = 1 } }
            seen++ }
        END { if (seen != n) { print seen " rows, expected " n; bad = 1 }; exit bad }' "$2" "$1"
}

# Draws' means against reference means, in units of their Monte Carlo error:
#   mc_means SUMMARY REF K N [PRED]
# SUMMARY: `gmm-infer summary` of the draws (its f[...] rows are compared);
# REF: CSV with a header, rows NAME,MEAN,VAR[,ESS] (NAME f[i] or i), the exact
# posterior, or with ESS another sampler's means (their error VAR / ESS added,
# and the draws' own variance taken from SUMMARY's sd); every ESS capped at N,
# the draws' count, so no sampler's ESS above N is trusted; PRED: a predict
# --draws table whose means (of the same draws, read back) replace SUMMARY's.
# z = (mean - MEAN) / sqrt(var / min(ess_bulk, N) [+ VAR / min(ESS, N)]).
# Prints the largest |z| and the count; false when one exceeds K (or none is
# compared).  With K = 6.5 a false failure has probability m 2 Q(6.5 / sqrt
# 1.2) = m 3e-9 over m rows (normal means), even with every ESS 20% too high.
mc_means() {
    awk -F, -v K="$3" -v N="$4" '
        function key(s) { return s ~ /^f\[/ ? s : "f[" s "]" }
        FILENAME == ARGV[1] { if ($1 ~ /^f\[/) { sm[$1] = $2; sd[$1] = $4
                                  e = $9 ~ /^[0-9]/ ? $9 + 0 : 0; ess[$1] = e < N ? e : N }; next }
        FILENAME == ARGV[2] { if (FNR > 1) { k = key($1); rm[k] = $2; rv[k] = $3
                                  re[k] = NF > 3 ? ($4 < N ? $4 : N) : 0 }; next }
        FNR > 1 { pm[key($1)] = $2 }
        END { for (k in rm) {
                  if (!(k in sm) || (ARGC > 3 && !(k in pm)) || !(ess[k] > 0)) {
                      print "no draws or no ESS of " k; exit 1 }
                  m = ARGC > 3 ? pm[k] : sm[k]
                  e2 = re[k] ? sd[k] ^ 2 / ess[k] + rv[k] / re[k] : rv[k] / ess[k]
                  z = (m - rm[k]) / sqrt(e2); if (z < 0) z = -z
                  if (z > w) { w = z; wk = k }; n++ }
              printf "largest |z| %.2f (%s) over %d\n", w, wk, n; exit !(n > 0 && w <= K) }' \
        "$1" "$2" ${5:+"$5"}
}

# Uniform numbers for data made in awk, the same on every machine (awk's own
# rand() is another stream in mawk and in gawk): Park and Miller's minimal
# standard, exact in doubles.  awk "$PM_RAND"' BEGIN { pm_seed(7); u = pm_rand() ...'
# pm_seed(S), S in 1 .. 2^31 - 2, drops 10 numbers (a small seed starts small).
PM_RAND='function pm_seed(s,   i) { pm_s = s; for (i = 0; i < 10; i++) pm_rand() }
function pm_rand() { pm_s = (pm_s * 16807) % 2147483647; return pm_s / 2147483647 }'

# Two predict tables $1 and $2 (one header, columns mean and var) made by two
# computations of the same posterior: the same header and rows; the first
# column and level byte for byte (the same labels, printed alike); with m, v the
# row's mean and var in $2 and tol $3: var within tol v, mean, lower and upper
# within tol (|value| + sqrt v), the response columns (rate..., prob...), which
# carry an error in the linear predictor as a relative error, within tol (|m| +
# sqrt v + v) |value|.  Prints the first difference; false if there is one.
pred_close() {
    awk -F, -v t="$3" '
        function abs(x) { return x < 0 ? -x : x }
        NR == FNR { if (FNR == 1) h = $0; else row[FNR] = $0; n = FNR; next }
        FNR == 1 { if ($0 != h) { print "headers differ: " $0 " / " h; bad = 1; exit }
                   for (k = 1; k <= NF; k++) col[$k] = k; next }
        { if (!(FNR in row)) { print "extra row " FNR; bad = 1; exit }
          split(row[FNR], b, ","); split($0, a, ",")
          m = b[col["mean"]]; v = b[col["var"]]; s = abs(m) + sqrt(v)
          for (k = 1; k <= NF; k++) {
              d = abs(a[k] - b[k])
              if (k == 1 || k == col["level"]) ok = a[k] "" == b[k] ""
              else if (k == col["var"]) ok = d <= t * v
              else if (b[k] == "" || a[k] == "") ok = a[k] "" == b[k] ""
              else if (k > col["upper"]) ok = d <= t * (s + v) * abs(b[k])
              else ok = d <= t * (abs(b[k]) + sqrt(v))
              if (!ok) { print "row " FNR " column " k ": " a[k] " / " b[k]; bad = 1; exit } } }
        END { if (!bad && (FNR != n || n < 2)) { print FNR " rows, expected " n; bad = 1 }
              exit bad }' "$2" "$1"
}

# Print a case's failure with enough context to debug it from a CI log.
fail() {
    case_asserts=$((case_asserts + 1))
    if [[ -z "$case_name" ]]; then
        echo "FAIL ${case_file##*/}: $* (outside any case)"
        nfail=$((nfail + 1))
        return 0
    fi
    if [[ $case_failed -eq 0 ]]; then
        echo "FAIL ${case_file##*/}: $case_name"
        [[ -n "$last_cmd" ]] && echo "     command: $last_cmd"
    fi
    case_failed=1
    echo "     $*"
    return 0
}

show_output() {
    local label=$1 file=$2
    [[ -s "$file" ]] || { echo "     ($label empty)"; return 0; }
    echo "     $label (first 10 lines):"
    head -n 10 "$file" | sed 's/^/     | /'
}

finish_case() {
    if [[ -s "$WORK/not-found" ]]; then
        local cmd
        while read -r cmd; do
            fail "command not found: $cmd"
        done <"$WORK/not-found"
        rm -f "$WORK/not-found"
    fi
    [[ -n "$case_name" ]] || return 0
    if [[ $case_asserts -eq 0 ]]; then
        fail "no assertions in this case"
    fi
    if [[ $case_failed -eq 0 ]]; then
        npass=$((npass + 1))
        [[ "${VERBOSE:-0}" == 1 ]] && echo "ok   ${case_file##*/}: $case_name"
    else
        nfail=$((nfail + 1))
    fi
    case_name=
    save_counts
    return 0
}

# The counts so far, for the runner's shell to read back when a case file's
# subshell (which cannot change them there) ends: kept after every case, so
# that they survive a case file that exits.
save_counts() {
    echo "$npass $nfail" >"$TOP/counts"
}

begin() {
    finish_case
    ncase=$((ncase + 1))
    case_name=$1
    case_failed=0
    case_asserts=0
    last_cmd=
    STATUS=
    : >"$OUT"
    : >"$ERR"
    CASE_TMP="$WORK/case$ncase"
    mkdir -p "$CASE_TMP"
    export CASE_TMP
}

run() {
    if [[ -z "$case_name" ]]; then
        fail "run outside a case (call begin first): $*"
        return 0
    fi
    last_cmd=$(printf '%q ' "$@")
    last_cmd=${last_cmd% }
    timeout "${GMM_CLI_TIMEOUT:-60}" "$@" >"$OUT" 2>"$ERR"
    STATUS=$?
    return 0
}

expect_exit() {
    case_asserts=$((case_asserts + 1))
    if [[ "$STATUS" != "$1" ]]; then
        fail "exit status $STATUS, expected $1"
        show_output stderr "$ERR"
    fi
    return 0
}

# match_stream LABEL FILE RE WANT: WANT=1 some line must match, 0 none may.
match_stream() {
    local label=$1 file=$2 re=$3 want=$4
    case_asserts=$((case_asserts + 1))
    if grep -Eq -- "$re" "$file"; then
        [[ $want -eq 1 ]] && return 0
        fail "$label matches /$re/ but should not"
    else
        [[ $want -eq 0 ]] && return 0
        fail "$label does not match /$re/"
    fi
    show_output "$label" "$file"
    return 0
}

expect_stdout() { match_stream stdout "$OUT" "$1" 1; }
expect_stderr() { match_stream stderr "$ERR" "$1" 1; }
expect_no_stdout() { match_stream stdout "$OUT" "$1" 0; }
expect_no_stderr() { match_stream stderr "$ERR" "$1" 0; }

expect_stdout_eq() {
    case_asserts=$((case_asserts + 1))
    if [[ "$(cat "$OUT"; echo x)" != "$1"$'\n'x ]]; then
        fail "stdout is not exactly '$1'"
        show_output stdout "$OUT"
    fi
    return 0
}

expect_empty() {
    case_asserts=$((case_asserts + 1))
    if [[ -s "$2" ]]; then
        fail "$1 is not empty"
        show_output "$1" "$2"
    fi
    return 0
}
expect_stdout_empty() { expect_empty stdout "$OUT"; }
expect_stderr_empty() { expect_empty stderr "$ERR"; }

expect_file() {
    case_asserts=$((case_asserts + 1))
    if [[ ! -f "$1" ]]; then
        fail "file $1 does not exist"
    elif [[ $# -ge 2 ]] && ! grep -Eq -- "$2" "$1"; then
        fail "file $1 does not match /$2/"
        show_output "$1" "$1"
    fi
    return 0
}

expect_no_file() {
    case_asserts=$((case_asserts + 1))
    [[ -e "$1" ]] && fail "$1 exists but should not"
    return 0
}

# A misspelt helper in a case file is a failure, not a message lost in the
# log.  Bash runs this handler in a subshell, so it leaves a note in a file
# that finish_case reads.
command_not_found_handle() {
    echo "$1" >>"$WORK/not-found"
    return 127
}

selected() {
    local name=${1##*/} p
    [[ $# -eq 1 || ${#patterns[@]} -eq 0 ]] && return 0
    for p in "${patterns[@]}"; do
        [[ "$name" == *"$p"* ]] && return 0
    done
    return 1
}

patterns=("$@")
shopt -s nullglob
files=("$CASES_DIR"/*.sh)
shopt -u nullglob
if [[ ${#files[@]} -eq 0 ]]; then
    echo "run.sh: no case files in $CASES_DIR" >&2
    exit 2
fi

# Every case file numbered, each number once (whichever PATTERNs select).
declare -A numbered
for case_file in "${files[@]}"; do
    name=${case_file##*/}
    case_name=
    if [[ ! $name =~ ^([0-9][0-9])_ ]]; then
        fail "the name does not start with a two-digit number and _ (NN_WHAT.sh)"
    elif [[ -n ${numbered[${BASH_REMATCH[1]}]:-} ]]; then
        fail "number ${BASH_REMATCH[1]} is also ${numbered[${BASH_REMATCH[1]}]}'s; give each case file its own"
    else
        numbered[${BASH_REMATCH[1]}]=$name
    fi
done

# Every function above as defined here: a case file that redefines one (its
# own close_to, say) would change what the assertions of its later cases mean,
# so that is a failure.  Its subshell leaves their definitions for this shell
# to compare, once the case file has run to its end.
mapfile -t runner_functions < <(compgen -A function)
functions=$(declare -f "${runner_functions[@]}")
nfile=0
for case_file in "${files[@]}"; do
    selected "$case_file" "${patterns[@]}" || continue
    case_name=
    if ! bash -n "$case_file"; then
        fail "syntax error in the case file"
        continue
    fi
    nfile=$((nfile + 1))
    WORK="$TOP/$nfile"
    OUT="$WORK/stdout"
    ERR="$WORK/stderr"
    mkdir "$WORK" || exit 2
    save_counts
    (
        trap finish_case EXIT # the case under way when a case file exits
        cd "$ROOT" || exit 2
        # shellcheck source=/dev/null
        source "$case_file" </dev/null
        finish_case
        save_counts
        declare -f "${runner_functions[@]}" >"$TOP/functions"
    )
    status=$?
    read -r npass nfail <"$TOP/counts"
    case_name=
    if [[ ! -f "$TOP/functions" ]]; then
        fail "the case file ends (exit status $status) before its last line"
    elif [[ $(<"$TOP/functions") != "$functions" ]]; then
        fail "the case file redefines a function of run.sh"
    fi
    rm -rf "$WORK" "$TOP/functions"
done

echo "$npass passed, $nfail failed"
[[ $nfail -eq 0 ]]
