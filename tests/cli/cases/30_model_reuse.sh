# shellcheck shell=bash
# 30_model_reuse.sh -- a fitted model applied to other data keeps the fitted
# centre (state-space and graph), all-missing data still forecast around it,
# and non-finite results are errors, not missing JSON keys.

begin "graph model on other data: centred by the model's centre, not the file's mean"
printf 'i,j\na,b\nb,c\nc,d\n' > "$CASE_TMP/e.csv"
printf 'node,val\na,1\nb,2\nc,1.5\n' > "$CASE_TMP/n1.csv"
printf 'node,val\na,11\nb,12\nc,11.5\n' > "$CASE_TMP/n2.csv"
run "$GMM_INFER" fit "$CASE_TMP/n1.csv" --graph "$CASE_TMP/e.csv" --precision 'edge-ou' \
    --node node --y val --fix 0.edge-ou.variance --fix 0.edge-ou.lengthscale --noise 0.1 \
    --fix noise.variance -o "$CASE_TMP/g.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/g.json" "$CASE_TMP/n2.csv"
expect_exit 0
# Observed 11 at node a with noise 0.1: the posterior mean must be near 11,
# not near 1 (the first file's values).
expect_stdout '^a,1[01]\.'
run "$GMM_INFER" loglik --model "$CASE_TMP/g.json"
expect_exit 0
ll1=$(sed -n 's/^  "loglik": \(.*\),$/\1/p' "$OUT")
run "$GMM_INFER" loglik --model "$CASE_TMP/g.json" "$CASE_TMP/n2.csv"
expect_exit 0
ll2=$(sed -n 's/^  "loglik": \(.*\),$/\1/p' "$OUT")
if [[ "$ll1" == "$ll2" ]]; then fail "loglik did not change with data shifted by 10 ($ll1)"; fi

begin "state-space forecast from all-missing data keeps the model's centre"
printf 'x,y\n1,4\n2,4.5\n3,4.1\n4,3.9\n5,4.5\n' > "$CASE_TMP/ok.csv"
printf 'x,y\n1,NA\n2,\n3,nan\n' > "$CASE_TMP/miss.csv"
run "$GMM_INFER" fit "$CASE_TMP/ok.csv" --kernel 'matern12(variance=0.1, lengthscale=1)' \
    --noise 0.01 --fix 0.matern12.variance --fix 0.matern12.lengthscale --fix noise.variance \
    -o "$CASE_TMP/m.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" "$CASE_TMP/miss.csv"
expect_exit 0
expect_stdout '^1,4\.'
expect_stdout '^3,4\.'

begin "fit refuses data with no observed y"
printf 'x,y\n1,NA\n2,\n3,nan\n' > "$CASE_TMP/miss.csv"
run "$GMM_INFER" fit "$CASE_TMP/miss.csv" --kernel matern12
expect_exit 1
expect_stderr 'no observed y'

begin "a non-finite gradient is an error naming the parameter"
printf 'x,y\n1,3\n2,4\n3,5\n4,6\n' > "$CASE_TMP/ok2.csv"
run "$GMM_INFER" loglik --kernel 'matern12(lengthscale=1e-300)' "$CASE_TMP/ok2.csv"
expect_exit 1
expect_stderr "'0\.matern12\.lengthscale' is not finite"
expect_stdout_empty

begin "count options out of range, and version with an argument, are usage errors"
run "$GMM_INFER" fit "$CASE_TMP/ok2.csv" --restarts 99999999999999999999
expect_exit 2
expect_stderr 'restarts'
run "$GMM_INFER" version extra
expect_exit 2
