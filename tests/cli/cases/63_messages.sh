# shellcheck shell=bash
# 63_messages.sh -- messages say what and where: getopt's own errors carry
# "gmm-infer CMD:", a missing exposure is called missing, a spec inside a
# model file names the file and its key, a failing predict --draws prints
# nothing on stdout, gradcheck's columns agree with its verdict, and
# run-chains takes a prefix with blanks.
# Sourced by tests/cli/run.sh (see there for the helpers).

coal="$ROOT/data/coal.csv"

begin "getopt's errors read 'gmm-infer CMD:' for every command"
run "$GMM_INFER" --help
cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)  *.*/\1/p' "$OUT")
[[ -n "$cmds" ]] || fail "no commands found in the usage"
for c in $cmds; do
    [[ "$c" == version ]] && continue
    for bad in --no-such-option -Z; do
        run "$GMM_INFER" "$c" "$bad"
        expect_exit 2
        expect_stderr "^gmm-infer $c: .*(option|argument)"
        expect_no_stderr "^$c: "
        expect_stdout_empty
    done
done
run "$GMM_INFER" fit "$coal" --kernel
expect_exit 2
expect_stderr "^gmm-infer fit: option '--kernel' requires an argument$"
expect_stderr "^Try 'gmm-infer fit --help'\.$"

begin "a missing exposure is called missing, with file:line"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern12 \
    -o "$CASE_TMP/m.json"
expect_exit 0
printf 'year,count,exposure\n1900,4,1\n1901,5,\n1902,NA,\n' >"$CASE_TMP/t.csv"
run "$GMM_INFER" score --model "$CASE_TMP/m.json" "$CASE_TMP/t.csv"
expect_exit 1
expect_stderr "t\.csv:3: .*missing exposure for an observed outcome$"
expect_no_stderr 'nan'
expect_stdout_empty
{ head -n 3 "$coal"; echo '1854,3,'; } >"$CASE_TMP/train.csv"
run "$GMM_INFER" fit "$CASE_TMP/train.csv" --likelihood poisson --exposure exposure
expect_exit 1
expect_stderr "train\.csv:4: column 'exposure': missing exposure for an observed outcome$"

begin "a bad spec in a model file names the file and its key, with the caret"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern12 \
    -o "$CASE_TMP/m.json"
expect_exit 0
sed 's/"matern12(variance=/"matern12(varianse=/' "$CASE_TMP/m.json" >"$CASE_TMP/k.json"
sed 's/"likelihood": "poisson"/"likelihood": "poison"/' "$CASE_TMP/m.json" >"$CASE_TMP/l.json"
for c in predict loglik gradcheck; do
    run "$GMM_INFER" "$c" --model "$CASE_TMP/k.json"
    expect_exit 1
    expect_stderr "^gmm-infer $c: .*k\.json: \"kernel\": unknown parameter 'varianse' of matern12"
    expect_stderr '^  matern12\(varianse='
    expect_stderr '^           \^$'
done
run "$GMM_INFER" hmc --model "$CASE_TMP/l.json" -o "$CASE_TMP/d.csv"
expect_exit 1
expect_stderr "l\.json: \"likelihood\": unknown likelihood 'poison'"
expect_stderr '^  poison$'
expect_stderr '^  \^$'
run "$GMM_INFER" fit "$ROOT/data/flu_bybw_nodes.csv" --graph "$ROOT/data/flu_bybw_edges.csv" \
    --node node --y count_total --exposure population_2001 --likelihood poisson \
    --precision 'edge-ou(variance=1, lengthscale=300)' -o "$CASE_TMP/g.json"
expect_exit 0
sed 's/"edge-ou(variance=[^,]*,/"edge-ou(variance=1,,/' "$CASE_TMP/g.json" >"$CASE_TMP/gp.json"
run "$GMM_INFER" predict --model "$CASE_TMP/gp.json"
expect_exit 1
expect_stderr "gp\.json: \"precision\": unexpected ','"
expect_stderr '^  edge-ou\(variance=1,,'
# the same spec on the command line names no file
run "$GMM_INFER" fit "$coal" --kernel 'matern12(varianse=1)'
expect_exit 1
expect_stderr "^gmm-infer fit: unknown parameter 'varianse' of matern12"

begin "predict --draws that do not fit the model: an error and nothing on stdout"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern12 \
    -o "$CASE_TMP/m.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/m.json" --chains 1 --warmup 30 --draws 10 --quiet \
    -o "$CASE_TMP/d.csv"
expect_exit 0
head -n 4 "$coal" >"$CASE_TMP/small.csv"
run "$GMM_INFER" fit "$CASE_TMP/small.csv" --likelihood poisson --exposure exposure \
    --kernel matern12 -o "$CASE_TMP/s.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/s.json" --draws "$CASE_TMP/d.csv"
expect_exit 1
expect_stdout_empty
run "$GMM_INFER" predict --model "$CASE_TMP/s.json" --draws "$CASE_TMP/d.csv" \
    -o "$CASE_TMP/out.csv"
expect_exit 1
expect_no_file "$CASE_TMP/out.csv"

begin "gradcheck: ok is false when abs_error > allowed, abs_error is |analytic - numeric|"
run "$GMM_INFER" fit "$coal" --likelihood poisson --exposure exposure --kernel matern12 \
    -o "$CASE_TMP/m.json"
expect_exit 0
# at the optimum the gradient is ~0: its relative error means nothing
run "$GMM_INFER" gradcheck --model "$CASE_TMP/m.json"
expect_exit 0
expect_stdout '^parameter,value,analytic,numeric,fd_error,abs_error,allowed,ok$'
check=$(awk -F, 'NR == 1 { next }
    { d = $3 - $4; if (d < 0) d = -d; e = $6 - d; if (e < 0) e = -e
      if (e > 5e-3 * d + 1e-300) print $1 ": abs_error " $6 " vs " d
      if (($8 == "false") != ($6 + 0 > $7 + 0)) print $1 ": ok " $8 " with " $6 " and allowed " $7
      if ($8 != "true" && $8 != "false" && $8 != "inconclusive") print $1 ": ok " $8
      rows++ }
    END { if (rows != 3) print rows " rows" }' "$OUT")
[[ -z "$check" ]] || fail "gradcheck's columns disagree with its verdict: $check"
run "$GMM_INFER" gradcheck --help
expect_exit 0
expect_stdout "ok is 'false' when abs_error > allowed, else 'inconclusive' when"
expect_stdout '^  fd_error > max\(tol, 1e-3 max\(\|analytic\|, \|numeric\|\)\)$'
expect_no_stdout 'relative tolerance'

begin "run-chains takes an output prefix with blanks"
mkdir -p "$CASE_TMP/sp ace"
GMM_INFER="$GMM_INFER" run "$ROOT/scripts/run-chains" -k 2 -j 1 -o "$CASE_TMP/sp ace/r" -- \
    "$coal" --likelihood poisson --kernel 'matern12(variance=0.5, lengthscale=20)' \
    --warmup 30 --draws 10
expect_exit 0
expect_file "$CASE_TMP/sp ace/r-chain-2.csv"
expect_file "$CASE_TMP/sp ace/r-summary.csv" '^variable,mean,median,sd,mad,q5,q95,rhat,ess_bulk,ess_tail$'
