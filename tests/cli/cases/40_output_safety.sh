# shellcheck shell=bash
# 40_output_safety.sh -- output never damages what it writes to: stdout that
# cannot be written is exit 1 for every command; -o/--perm onto a device, a
# FIFO or a symlink writes through it; an unwritable destination is reported
# before the work, naming the user's path.
# Sourced by tests/cli/run.sh (see there for the helpers).

# run_full ARGS...: run gmm-infer with stdout on /dev/full.
run_full() { run bash -c 'exec "$GMM_INFER" "$@" >/dev/full' gmm-infer "$@"; }

begin "stdout on /dev/full: exit 1 with the reason, for every command"
run_full version
expect_exit 1
expect_stderr '^gmm-infer version: <stdout>: write error: No space left on device$'
run_full --help
expect_exit 1
expect_stderr '^gmm-infer: <stdout>: write error: No space left on device$'
run_full order data/flu_bybw_edges.csv
expect_exit 1
expect_stderr '^gmm-infer order: <stdout>: write error: No space left on device$'
run_full loglik data/co2_train.csv
expect_exit 1
expect_stderr '^gmm-infer loglik: <stdout>: write error: No space left on device$'
# gradcheck exits 3 (one entry disagrees) when its report arrives; lost, 1.
run_full gradcheck data/co2_train.csv
expect_exit 1
expect_stderr '^gmm-infer gradcheck: <stdout>: write error: No space left on device$'
run_full order --help
expect_exit 1
expect_stderr 'write error: No space left on device$'

begin "a closed stdout is an error when something was written to it"
run bash -c 'exec "$GMM_INFER" version >&-'
expect_exit 1
expect_stderr '^gmm-infer version: <stdout>: write error: Bad file descriptor$'

begin "--perm /dev/null: written in place, /dev/null stays a device"
run "$GMM_INFER" order --perm /dev/null data/flu_bybw_edges.csv
expect_exit 0
expect_stdout '"nodes": 140,'
[[ -c /dev/null ]] || fail "/dev/null is no longer a character device"

begin "--perm /dev/stdout: the permutation on stdout, before the report"
run "$GMM_INFER" order --perm /dev/stdout data/flu_bybw_edges.csv
expect_exit 0
expect_stdout '^node,position$'
expect_stdout '"nodes": 140,'
[[ $(head -n 1 "$OUT") == node,position ]] || fail "stdout does not start with the CSV"

begin "--perm onto a FIFO: the reader gets the permutation, the FIFO stays"
mkfifo "$CASE_TMP/fifo"
cat "$CASE_TMP/fifo" >"$CASE_TMP/from-fifo" &
reader=$!
run "$GMM_INFER" order --perm "$CASE_TMP/fifo" data/flu_bybw_edges.csv
wait "$reader"
expect_exit 0
expect_file "$CASE_TMP/from-fifo" '^node,position$'
[[ $(wc -l <"$CASE_TMP/from-fifo") -eq 141 ]] || fail "the reader got $(wc -l <"$CASE_TMP/from-fifo") lines, not 141"
[[ -p "$CASE_TMP/fifo" ]] || fail "the FIFO is no longer a FIFO"
[[ $(find "$CASE_TMP" -name '.*tmp*' | wc -l) -eq 0 ]] || fail "a temporary was left"

begin "--perm onto a symlink: the link stays, its target is replaced, mode kept"
mkdir "$CASE_TMP/real"
echo old >"$CASE_TMP/real/perm.csv"
chmod 0640 "$CASE_TMP/real/perm.csv"
ln -s real/perm.csv "$CASE_TMP/link.csv"
run "$GMM_INFER" order --perm "$CASE_TMP/link.csv" data/flu_bybw_edges.csv
expect_exit 0
[[ -L "$CASE_TMP/link.csv" ]] || fail "the link was replaced by a file"
[[ $(readlink "$CASE_TMP/link.csv") == real/perm.csv ]] || fail "the link points elsewhere"
expect_file "$CASE_TMP/real/perm.csv" '^node,position$'
[[ $(stat -c %a "$CASE_TMP/real/perm.csv") == 640 ]] ||
    fail "mode $(stat -c %a "$CASE_TMP/real/perm.csv"), expected 640"

begin "an unwritable --perm is reported first, naming the user's path"
# The edge list does not exist either: the destination is checked first.
run "$GMM_INFER" order --perm "$CASE_TMP/no/such/dir/p.csv" "$CASE_TMP/missing.csv"
expect_exit 1
expect_stdout_empty
expect_stderr "^gmm-infer order: $CASE_TMP/no/such/dir/p.csv: cannot write: No such file or directory\$"
expect_no_stderr 'missing\.csv'
run "$GMM_INFER" order --perm "$CASE_TMP" data/flu_bybw_edges.csv
expect_exit 1
expect_stdout_empty
expect_stderr "^gmm-infer order: $CASE_TMP: cannot write: Is a directory\$"
expect_no_stderr 'tmp[A-Za-z0-9]{6}'
