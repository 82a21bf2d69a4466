# shellcheck shell=bash
# 42_output_targets.sh -- every file option of every command (fit -o,
# predict -o, summary -o, score --rows, order --perm, vi -o and --posterior,
# hmc -o and --summary) writes through the one output path: a full device
# is exit 1 and stays a device, a FIFO's reader gets the data and the FIFO
# stays, a symlink stays a link and its target gets the data; no companion
# file (FILE.json, FILE.q.csv) appears beside a device or FIFO.
# Sourced by tests/cli/run.sh (see there for the helpers).
#
# The device is a node of our own in $CASE_TMP when we run as root (a bug
# that renamed over it must not replace the system's /dev/full); the real
# /dev/full only when not root, where /dev is not writable.

coal="$ROOT/data/coal.csv"

# full_device DIR: the path of a full device to write to.
full_device() {
    if [[ $(id -u) -eq 0 ]] && mknod "$1/full" c 1 7 2>/dev/null; then
        echo "$1/full"
    else
        echo /dev/full
    fi
}

# start_reader FIFO OUT: a reader of FIFO copying to OUT, in $reader.
start_reader() {
    mkfifo "$1"
    cat "$1" >"$2" &
    reader=$!
}

# stop_reader FIFO: wait for the reader to see the end of the data (the
# writer has exited); a reader still waiting after 5 s (nothing opened the
# FIFO) is stopped.
stop_reader() {
    local i
    for ((i = 0; i < 50; i++)); do
        kill -0 "$reader" 2>/dev/null || break
        sleep 0.1
    done
    kill "$reader" 2>/dev/null
    wait "$reader" 2>/dev/null
    [[ -p "$1" ]] || fail "the FIFO $1 is no longer a FIFO"
}

# expect_device DEV: DEV is still a character device.
expect_device() {
    case_asserts=$((case_asserts + 1))
    [[ -c "$1" ]] || fail "$1 is no longer a character device"
}

# make_link DIR NAME: DIR/NAME -> real/NAME, the target holding "old".
make_link() {
    mkdir -p "$1/real"
    echo old >"$1/real/$2"
    ln -s "real/$2" "$1/$2"
}

# expect_link DIR NAME RE: DIR/NAME is still a link to real/NAME, whose
# content matches RE.
expect_link() {
    case_asserts=$((case_asserts + 1))
    [[ -L "$1/$2" && $(readlink "$1/$2") == "real/$2" ]] || fail "$1/$2 is no longer the link"
    expect_file "$1/real/$2" "$3"
}

# expect_no_temporaries DIR: nothing half-written was left in DIR.
expect_no_temporaries() {
    case_asserts=$((case_asserts + 1))
    local left
    left=$(find "$1" -name '.*.tmp*' -o -name '*.partial' | head -n 3)
    [[ -z "$left" ]] || fail "left behind: $left"
}

# targets_case NAME RE CMD...: run CMD with the placeholder @OUT@ replaced
# by a full device, a FIFO and a symlink in turn; RE matches the output.
targets_case() {
    local name=$1 re=$2
    shift 2
    local dev args a
    begin "$name: a full device, a FIFO and a symlink as the target"
    dev=$(full_device "$CASE_TMP")
    args=()
    for a in "$@"; do args+=("${a//@OUT@/$dev}"); done
    run "${args[@]}"
    expect_exit 1
    expect_stderr "$dev: write error: No space left on device"
    expect_device "$dev"
    expect_no_file "$dev.json"
    expect_no_temporaries "$CASE_TMP"

    start_reader "$CASE_TMP/fifo" "$CASE_TMP/from-fifo"
    args=()
    for a in "$@"; do args+=("${a//@OUT@/$CASE_TMP/fifo}"); done
    run "${args[@]}"
    stop_reader "$CASE_TMP/fifo"
    expect_exit 0
    expect_file "$CASE_TMP/from-fifo" "$re"
    expect_no_file "$CASE_TMP/fifo.json"
    expect_no_temporaries "$CASE_TMP"

    make_link "$CASE_TMP" out
    args=()
    for a in "$@"; do args+=("${a//@OUT@/$CASE_TMP/out}"); done
    run "${args[@]}"
    expect_exit 0
    expect_link "$CASE_TMP" out "$re"
    expect_no_temporaries "$CASE_TMP"
}

begin "the shared inputs: a model, draws"
shared="$CASE_TMP"
run "$GMM_INFER" fit "$coal" --likelihood poisson --kernel matern12 -o "$shared/m.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$shared/m.json" --chains 2 --warmup 30 --draws 10 --quiet \
    -o "$shared/d.csv"
expect_exit 0

targets_case "fit -o" '"kernel"' \
    "$GMM_INFER" fit "$coal" --likelihood poisson --kernel matern12 -o @OUT@
targets_case "predict -o" '^x,mean,var,' \
    "$GMM_INFER" predict --model "$shared/m.json" -o @OUT@
targets_case "summary -o" '^variable,mean,' \
    "$GMM_INFER" summary -o @OUT@ "$shared/d.csv"
targets_case "score --rows" '^line,year,count,lpd$' \
    "$GMM_INFER" score --model "$shared/m.json" "$coal" --rows @OUT@
targets_case "order --perm" '^node,position$' \
    "$GMM_INFER" order --perm @OUT@ data/flu_bybw_edges.csv
targets_case "vi --posterior" '^x,mean,var,' \
    "$GMM_INFER" vi --model "$shared/m.json" --quiet -o "$CASE_TMP/v.json" --posterior @OUT@
targets_case "hmc -o" '^\.chain,\.iteration,\.draw,lp__,' \
    "$GMM_INFER" hmc --model "$shared/m.json" --chains 2 --warmup 30 --draws 10 --quiet -o @OUT@
targets_case "hmc --summary" '^variable,mean,' \
    "$GMM_INFER" hmc --model "$shared/m.json" --chains 2 --warmup 30 --draws 10 --quiet \
    -o "$CASE_TMP/d.csv" --summary @OUT@

begin "hmc -o: FILE.json beside a regular file and a link, not beside a FIFO"
start_reader "$CASE_TMP/fifo" "$CASE_TMP/from-fifo"
run "$GMM_INFER" hmc --model "$shared/m.json" --chains 2 --warmup 30 --draws 10 --quiet \
    -o "$CASE_TMP/fifo"
stop_reader "$CASE_TMP/fifo"
expect_exit 0
expect_stderr "$CASE_TMP/fifo is not a regular file: the settings are not written to $CASE_TMP/fifo\.json"
expect_no_file "$CASE_TMP/fifo.json"
[[ $(wc -l <"$CASE_TMP/from-fifo") -eq 21 ]] ||
    fail "the reader got $(wc -l <"$CASE_TMP/from-fifo") lines, not 1 + 2 x 10"
make_link "$CASE_TMP" d.csv
run "$GMM_INFER" hmc --model "$shared/m.json" --chains 2 --warmup 30 --draws 10 --quiet \
    -o "$CASE_TMP/d.csv"
expect_exit 0
expect_link "$CASE_TMP" d.csv '^\.chain,'
expect_file "$CASE_TMP/d.csv.json" '"command": "hmc"'
# the same draws as the regular file of the same seed
cmp -s "$CASE_TMP/real/d.csv" "$shared/d.csv" || fail "the draws through the link differ"
cmp -s "$CASE_TMP/from-fifo" "$shared/d.csv" || fail "the draws through the FIFO differ"

begin "vi -o: a device or FIFO is refused before the work (q goes beside the model)"
dev=$(full_device "$CASE_TMP")
run "$GMM_INFER" vi --model "$shared/m.json" --quiet -o "$dev"
expect_exit 2
expect_stderr "vi: -o $dev is not a regular file"
expect_device "$dev"
expect_no_file "$dev.q.csv"
mkfifo "$CASE_TMP/fifo"
run "$GMM_INFER" vi --model "$shared/m.json" --quiet -o "$CASE_TMP/fifo"
expect_exit 2
expect_no_file "$CASE_TMP/fifo.q.csv"
[[ -p "$CASE_TMP/fifo" ]] || fail "the FIFO is no longer a FIFO"
make_link "$CASE_TMP" v.json
run "$GMM_INFER" vi --model "$shared/m.json" --quiet -o "$CASE_TMP/v.json"
expect_exit 0
expect_link "$CASE_TMP" v.json '"variational"'
expect_file "$CASE_TMP/v.q.csv" '^index,mean,l0'
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
expect_stdout '^x,mean,var,'

begin "vi -o: when the model cannot be written, q is not written either"
# A file size limit of 1 KiB (SIGXFSZ ignored: writes fail with EFBIG) that
# q's 185 bytes fit in and the model, which names a long data path, does not.
long="$CASE_TMP/$(printf 'a%.0s' {1..200})/$(printf 'b%.0s' {1..200})/$(printf 'c%.0s' {1..200})"
mkdir -p "$long"
printf 'x,y\n1,0.5\n2,1.5\n3,0.7\n' >"$long/tiny.csv"
run bash -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' x \
    "$GMM_INFER" vi "$long/tiny.csv" --kernel matern12 --quiet -o "$CASE_TMP/tv.json"
expect_exit 1
expect_stderr "tv\.json: write error: File too large"
expect_no_file "$CASE_TMP/tv.q.csv"
expect_no_file "$CASE_TMP/tv.json"
expect_no_temporaries "$CASE_TMP"
run "$GMM_INFER" vi "$long/tiny.csv" --kernel matern12 --quiet -o "$CASE_TMP/tv.json"
expect_exit 0
[[ $(stat -c %s "$CASE_TMP/tv.q.csv") -lt 1024 && $(stat -c %s "$CASE_TMP/tv.json") -gt 1024 ]] ||
    fail "the sizes no longer straddle the limit: the case tests nothing"
