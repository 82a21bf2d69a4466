# shellcheck shell=bash
# 45_summary.sh -- `gmm-infer summary`: posterior's summarise_draws() on the
# committed fixtures, -o, chains merged from several files (split files give
# the identical summary), and every input error (exit 1) and usage error
# (exit 2).
# Sourced by tests/cli/run.sh (see there for the helpers).

fx="$ROOT/tests/fixtures/summary"
header='variable,mean,median,sd,mad,q5,q95,rhat,ess_bulk,ess_tail'

begin "summary --help on stdout, exit 0; listed in the top-level usage"
run "$GMM_INFER" summary --help
expect_exit 0
expect_stdout '^Usage: gmm-infer summary \[OPTIONS\] DRAWS\.csv\.\.\.'
expect_stdout -- '-o, --output FILE'
expect_stderr_empty
run "$GMM_INFER" --help
expect_stdout '^  summary +posterior summary'

# Compare our CSV ($1) with posterior's (fixture $2; its extra ess_mean
# column ignored): same variables in order, NA where posterior has NA, every
# number within 1e-8 relative.
compare_with_posterior() {
    local verdict
    verdict=$(awk -F, '
        NR == FNR { if (FNR > 1) { n++; for (k = 1; k <= 10; k++) ours[n, k] = $k }; next }
        FNR == 1 { next }
        { m++
          for (k = 1; k <= 10; k++) {
              a = ours[m, k]; b = $k
              if (k == 1 || a == "NA" || b == "NA") { if (a != b) { print "row " m " col " k ": " a " vs " b; exit } ; continue }
              d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b
              if (d > 1e-8 * s) { print "row " m " col " k ": " a " vs " b; exit }
          } }
        END { if (m != n) print m " rows in posterior, " n " ours"; else print "ok" }' "$1" "$2")
    [[ "$verdict" == ok ]] || fail "against posterior: $verdict"
}

begin "summary of the fixture draws matches posterior::summarise_draws (1e-8)"
for set in main odd one short few; do
    run "$GMM_INFER" summary "$fx/draws_$set.csv"
    expect_exit 0
    expect_stderr_empty
    [[ "$(head -n 1 "$OUT")" == "$header" ]] || fail "$set: header is '$(head -n 1 "$OUT")'"
    compare_with_posterior "$OUT" "$fx/summary_$set.csv"
done

begin "lp__ kept, accept_stat__ skipped, NA for a constant and for a missing draw"
run "$GMM_INFER" summary "$fx/draws_main.csv"
expect_exit 0
expect_stdout '^lp__,'
expect_no_stdout '^accept_stat__'
expect_stdout '^const,3\.25,3\.25,0,0,3\.25,3\.25,NA,NA,NA$'
expect_stdout '^missing,NA,NA,NA,NA,NA,NA,NA,NA,NA$'
[[ $(wc -l <"$OUT") -eq 13 ]] || fail "expected a header and 12 variables"

begin "-o writes the same bytes atomically, nothing on stdout"
run "$GMM_INFER" summary "$fx/draws_odd.csv"
cp "$OUT" "$CASE_TMP/stdout.csv"
run "$GMM_INFER" summary -o "$CASE_TMP/s.csv" "$fx/draws_odd.csv"
expect_exit 0
expect_stdout_empty
expect_stderr_empty
# one command's one buffer written to two places: the same bytes
cmp -s "$CASE_TMP/s.csv" "$CASE_TMP/stdout.csv" || fail "-o output differs from stdout"
run ls -A "$CASE_TMP"
expect_stdout_eq $'s.csv\nstdout.csv'

# The 4-chain fixture cut into chains {1,3} and {4,2}, rows of a file
# interleaved, the second file's columns in another order.
split_main() {
    awk -F, 'NR == 1 { print > a; print > b; next }
             $1 == 1 || $1 == 3 { print > a; next } { print > b }' \
        a="$CASE_TMP/a.csv" b="$CASE_TMP/b.csv" "$fx/draws_main.csv"
}

begin "chains split over two files (any order, stdin, shuffled columns): identical summary"
# Byte for byte, by construction: the same cells parse to the same doubles and
# the files merge into the same array, chains ordered by id (draws.h: "bit for
# bit"), on which summary runs the same computation; a difference would be that
# contract broken, not rounding.
run "$GMM_INFER" summary "$fx/draws_main.csv"
cp "$OUT" "$CASE_TMP/whole.csv"
split_main
run "$GMM_INFER" summary "$CASE_TMP/a.csv" "$CASE_TMP/b.csv"
expect_exit 0
cmp -s "$OUT" "$CASE_TMP/whole.csv" || fail "a.csv b.csv: summary differs from the whole file"
run "$GMM_INFER" summary "$CASE_TMP/b.csv" -o "$CASE_TMP/ba.csv" "$CASE_TMP/a.csv"
expect_exit 0
cmp -s "$CASE_TMP/ba.csv" "$CASE_TMP/whole.csv" || fail "b.csv a.csv: summary differs"
# b.csv with its columns reversed and its rows in reverse order of chain.
awk -F, '{ for (k = NF; k > 1; k--) printf "%s,", $k; print $1 }' "$CASE_TMP/b.csv" >"$CASE_TMP/r.csv"
{ head -n 1 "$CASE_TMP/r.csv"; grep ',4$' "$CASE_TMP/r.csv"; grep ',2$' "$CASE_TMP/r.csv"; } >"$CASE_TMP/b2.csv"
run "$GMM_INFER" summary "$CASE_TMP/a.csv" - <"$CASE_TMP/b2.csv"
expect_exit 0
cmp -s "$OUT" "$CASE_TMP/whole.csv" || fail "stdin with shuffled columns: summary differs"

begin "a chain id in two files is an error naming both files, line of the clash"
split_main
run "$GMM_INFER" summary "$CASE_TMP/a.csv" "$CASE_TMP/b.csv" "$CASE_TMP/a.csv"
expect_exit 1
expect_stdout_empty
expect_stderr "^gmm-infer summary: $CASE_TMP/a\.csv:2: chain 1 is also in $CASE_TMP/a\.csv\$"
# c.csv: chain 2 of the fixture, and again as chain 5.
awk -F, -v OFS=, 'NR == 1 { print; next } $1 == 2 { print; $1 = 5; print }' \
    "$fx/draws_main.csv" >"$CASE_TMP/c.csv"
run "$GMM_INFER" summary -o "$CASE_TMP/out.csv" "$CASE_TMP/c.csv" "$CASE_TMP/b.csv"
expect_exit 1
expect_stderr '^gmm-infer summary: .*/b\.csv:[0-9]+: chain 2 is also in .*/c\.csv$'
expect_no_file "$CASE_TMP/out.csv"

begin "chains of different lengths: an error (posterior cannot form the draws array)"
printf '.chain,x\n1,1\n1,2\n1,3\n2,1\n2,2\n' >"$CASE_TMP/u.csv"
run "$GMM_INFER" summary "$CASE_TMP/u.csv"
expect_exit 1
expect_stderr "^gmm-infer summary: chains of different lengths: chain 2 has 2 draws \\($CASE_TMP/u\\.csv\\), chain 1 has 3 \\($CASE_TMP/u\\.csv\\)\$"

begin "bad files: no .chain, no variables, bad chain id, bad number, different variables"
printf 'chain,x\n1,2\n' >"$CASE_TMP/n.csv"
run "$GMM_INFER" summary "$CASE_TMP/n.csv"
expect_exit 1
expect_stderr "no column '\\.chain' \\(columns: chain, x\\)"
printf '.chain,.iteration,lp_x__\n1,1,2\n' >"$CASE_TMP/v.csv"
run "$GMM_INFER" summary "$CASE_TMP/v.csv"
expect_exit 1
expect_stderr 'v\.csv: no variables'
printf '.chain,x\n1,2\nx1,3\n' >"$CASE_TMP/i.csv"
run "$GMM_INFER" summary "$CASE_TMP/i.csv"
expect_exit 1
expect_stderr "i\\.csv:3: column '\\.chain': 'x1' is not a positive integer\$"
printf '.chain,x\n1,2\n1,abc\n' >"$CASE_TMP/b.csv"
run "$GMM_INFER" summary "$CASE_TMP/b.csv"
expect_exit 1
expect_stderr "b\\.csv:3: column 'x': 'abc' is not a number\$"
printf '.chain,x,y\n1,2,3\n' >"$CASE_TMP/p.csv"
printf '.chain,x\n2,2\n' >"$CASE_TMP/q.csv"
run "$GMM_INFER" summary "$CASE_TMP/p.csv" "$CASE_TMP/q.csv"
expect_exit 1
expect_stderr "q\\.csv: no column 'y' \\(.*p\\.csv has it\\)\$"
run "$GMM_INFER" summary "$CASE_TMP/missing.csv"
expect_exit 1
expect_stderr 'missing\.csv: cannot open'

begin "variable names that need quoting are quoted; short chains give NA"
printf '.chain,"f[a,b]",y\n1,1,4\n1,2,3\n2,3,2\n2,5,1\n' >"$CASE_TMP/q.csv"
run "$GMM_INFER" summary "$CASE_TMP/q.csv"
expect_exit 0
expect_stdout '^"f\[a,b\]",2\.75,2\.5,'
expect_stdout '^y,2\.5,2\.5,1\.29[0-9]*,1\.48[0-9]*,1\.1[0-9]*,3\.8[0-9]*,NA,NA,NA$'

begin "usage errors: no file, unknown option, missing argument, stdin twice"
run "$GMM_INFER" summary
expect_exit 2
expect_stderr '^gmm-infer summary: missing DRAWS\.csv$'
expect_stderr "^Try 'gmm-infer summary --help'\\.\$"
run "$GMM_INFER" summary --bogus "$fx/draws_few.csv"
expect_exit 2
expect_stderr "unknown option '--bogus'"
run "$GMM_INFER" summary "$fx/draws_few.csv" -o
expect_exit 2
expect_stderr "option '-o' needs an argument"
run "$GMM_INFER" summary - -
expect_exit 2
expect_stderr "'-' \\(stdin\\) given 2 times"
