# shellcheck shell=bash
# 71_order.sh -- `gmm-infer order`: the report, the permutation file, bad edge
# lists (file:line, exit 1) and usage errors (exit 2).
# Sourced by tests/cli/run.sh (see there for the helpers).

begin "order --help on stdout, exit 0"
run "$GMM_INFER" order --help
expect_exit 0
expect_stdout '^Usage: gmm-infer order '
expect_stdout -- '--edge-cols I,J\[,LEN\]'
expect_stderr_empty

begin "order is listed in the top-level usage"
run "$GMM_INFER" --help
expect_exit 0
expect_stdout '^  order +reverse Cuthill-McKee'

begin "order on the Chicago graph: JSON report"
run "$GMM_INFER" order data/chicago_road_edges.csv
expect_exit 0
expect_stderr_empty
expect_stdout '"nodes": 338,'
expect_stdout '"edges": 503,'
expect_stdout '"components": 1,'
expect_stdout '"bandwidth_before": 108,'
expect_stdout '"profile_before": [0-9]+,'
expect_stdout '"profile_after": [0-9]+'
# SciPy's reverse_cuthill_mckee reaches 30 on this graph.
bw=$(sed -n 's/.*"bandwidth_after": \([0-9]*\).*/\1/p' "$OUT")
[[ -n "$bw" && "$bw" -le 30 ]] || fail "bandwidth_after '$bw' is not <= 30 (SciPy)"

begin "order on Berlin-Adlershof and flu: no worse than SciPy (107, 27)"
for g in berlin_adlershof_road:2407:107 flu_bybw:140:27; do
    IFS=: read -r name nodes scipy <<<"$g"
    run "$GMM_INFER" order "data/${name}_edges.csv"
    expect_exit 0
    expect_stdout "\"nodes\": $nodes,"
    bw=$(sed -n 's/.*"bandwidth_after": \([0-9]*\).*/\1/p' "$OUT")
    [[ -n "$bw" && "$bw" -le "$scipy" ]] || fail "$name: bandwidth_after '$bw' > $scipy"
done

begin "--perm writes node,position: a bijection whose bandwidth is the reported one"
run "$GMM_INFER" order --perm "$CASE_TMP/perm.csv" data/flu_bybw_edges.csv
expect_exit 0
expect_file "$CASE_TMP/perm.csv" '^node,position$'
bw=$(sed -n 's/.*"bandwidth_after": \([0-9]*\).*/\1/p' "$OUT")
# Recompute the bandwidth from the edge list and the written permutation.
check=$(awk -F, -v bw="$bw" '
    FNR == 1 { next }
    NR == FNR { if ($2 in seen) dup = 1; seen[$2] = 1; pos[$1] = $2; n++; next }
    { d = pos[$1] - pos[$2]; if (d < 0) d = -d; if (d > m) m = d }
    END {
        for (p = 0; p < n; p++) if (!(p in seen)) dup = 1
        print (dup ? "not a bijection" : (m == bw ? "ok" : "bandwidth " m " != " bw))
    }' "$CASE_TMP/perm.csv" data/flu_bybw_edges.csv)
[[ "$check" == ok ]] || fail "permutation: $check"
[[ $(wc -l <"$CASE_TMP/perm.csv") -eq 141 ]] || fail "perm.csv should have 141 lines"

begin "string labels, quoted labels, stdin, duplicates merged with a warning"
printf 'from,to,len\nA,"B, west",2\nB,C,1\n"B, west",A,2\nC,A,3\n' >"$CASE_TMP/e.csv"
run "$GMM_INFER" order --edge-cols from,to,len --perm "$CASE_TMP/p.csv" - <"$CASE_TMP/e.csv"
expect_exit 0
expect_stdout '"nodes": 4,'
expect_stdout '"edges": 3,'
expect_stdout '"components": 1,'
expect_stderr "^gmm-infer order: <stdin>:4: warning: 1 duplicate edge merged"
expect_file "$CASE_TMP/p.csv" '^"B, west",[0-3]$'

begin "disconnected graph: components counted"
printf 'i,j\n1,2\n3,4\n5,6\n6,7\n' >"$CASE_TMP/e.csv"
run "$GMM_INFER" order "$CASE_TMP/e.csv"
expect_exit 0
expect_stdout '"components": 3,'
expect_stdout '"bandwidth_after": 1,'

begin "bad edge lists: file:line, exit 1, nothing on stdout"
printf 'i,j,length\n1,2,1\n2,2,1\n' >"$CASE_TMP/loop.csv"
run "$GMM_INFER" order "$CASE_TMP/loop.csv"
expect_exit 1
expect_stdout_empty
expect_stderr "^gmm-infer order: .*loop.csv:3: self-loop at node '2'\$"
printf 'i,j,length\n1,2,1\n2,3,-1\n' >"$CASE_TMP/neg.csv"
run "$GMM_INFER" order "$CASE_TMP/neg.csv"
expect_exit 1
expect_stderr "neg.csv:3: edge '2'-'3': length -1 is not positive"
printf 'i,j,length\n1,2,x\n' >"$CASE_TMP/nan.csv"
run "$GMM_INFER" order "$CASE_TMP/nan.csv"
expect_exit 1
expect_stderr "nan.csv:2: column 'length': 'x' is not a number"
printf 'i,j,length\n1,2,1\n3,2,5\n2,1,2\n' >"$CASE_TMP/dup.csv"
run "$GMM_INFER" order "$CASE_TMP/dup.csv"
expect_exit 1
expect_stderr "dup.csv:4: edge '2'-'1' listed again with a different length \(2 here, 1 at line 2\)"
printf 'i,j,length\n' >"$CASE_TMP/empty.csv"
run "$GMM_INFER" order "$CASE_TMP/empty.csv"
expect_exit 1
expect_stderr "empty.csv: the edge list has no edges"
run "$GMM_INFER" order --edge-cols a,b,c "$CASE_TMP/empty.csv"
expect_exit 1
expect_stderr "no column 'a'"
run "$GMM_INFER" order "$CASE_TMP/missing.csv"
expect_exit 1
expect_stderr "missing.csv: cannot open"

begin "a failed run leaves no permutation file"
run "$GMM_INFER" order --perm "$CASE_TMP/p.csv" "$CASE_TMP/nothere.csv"
expect_exit 1
expect_no_file "$CASE_TMP/p.csv"

begin "usage errors exit 2"
run "$GMM_INFER" order
expect_exit 2
expect_stderr 'missing EDGES.csv'
run "$GMM_INFER" order a.csv b.csv
expect_exit 2
run "$GMM_INFER" order --bogus data/flu_bybw_edges.csv
expect_exit 2
expect_stderr "unknown option '--bogus'"
run "$GMM_INFER" order --edge-cols onlyone data/flu_bybw_edges.csv
expect_exit 2
expect_stderr 'wants I,J or I,J,LEN'
run "$GMM_INFER" order data/flu_bybw_edges.csv --perm
expect_exit 2
expect_stderr "needs an argument"
