# shellcheck shell=bash
# 41_input_numbers.sh -- input that must not be taken silently: numbers are
# decimal, and a NUL byte is an error at its line and column.
# Sourced by tests/cli/run.sh (see there for the helpers).

begin "a hexadecimal x is refused, naming file, line and column"
printf 'x,y\n1,2\n0x10,3\n2,4\n' >"$CASE_TMP/hex.csv"
run "$GMM_INFER" loglik "$CASE_TMP/hex.csv"
expect_exit 1
expect_stdout_empty
expect_stderr "^gmm-infer loglik: $CASE_TMP/hex.csv:3: column 'x': '0x10' is not a decimal number\$"

begin "'inf' spelled out is refused; NaN stays a missing y"
printf 'x,y\n1,2\n2,NaN\n3,inf\n' >"$CASE_TMP/inf.csv"
run "$GMM_INFER" loglik "$CASE_TMP/inf.csv"
expect_exit 1
expect_stderr "$CASE_TMP/inf.csv:4: column 'y': 'inf' is not finite\$"

begin "a NUL byte inside a field is an error at its line and column"
printf 'i,j\n0,1\n1,2\0junk\n' >"$CASE_TMP/nul.csv"
run "$GMM_INFER" order "$CASE_TMP/nul.csv"
expect_exit 1
expect_stdout_empty
expect_stderr "^gmm-infer order: $CASE_TMP/nul.csv:3:4: NUL byte"
