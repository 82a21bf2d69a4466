# shellcheck shell=bash
# 55_vi.sh -- precision-parameterised VI: model file and q beside it,
# predict and score under q, --init resumes, --posterior, errors.

begin "vi writes the model and q; predict and score use q"
run "$GMM_INFER" vi "$ROOT/data/chicago_train.csv" --graph "$ROOT/data/chicago_road_edges.csv" \
    --node node --y count --exposure weight --likelihood poisson \
    --precision 'edge-ou(variance=1, lengthscale=100)' --learn-hyper --quiet \
    -o "$CASE_TMP/v.json" --posterior "$CASE_TMP/post.csv"
expect_exit 0
expect_file "$CASE_TMP/v.json" '"variational": '
expect_file "$CASE_TMP/v.json" '"file": "v\.q\.csv"'
expect_file "$CASE_TMP/v.json" '"converged": true'
expect_file "$CASE_TMP/v.q.csv" '^index,mean,l0,'
expect_file "$CASE_TMP/post.csv" '^node,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'
run "$GMM_INFER" score --model "$CASE_TMP/v.json" "$ROOT/data/chicago_test.csv"
expect_exit 0
expect_stdout '"posterior": "vi"'
run "$GMM_INFER" predict --model "$CASE_TMP/v.json"
expect_exit 0
expect_stdout '^node,mean,var,lower,upper,rate,rate_lower,rate_upper,level$'

begin "vi on a state-space model predicts at new inputs; --init resumes"
run "$GMM_INFER" vi "$ROOT/data/coal.csv" --likelihood poisson --exposure exposure \
    --kernel 'matern32(variance=0.5, lengthscale=20)' --quiet -o "$CASE_TMP/c.json"
expect_exit 0
run "$GMM_INFER" predict --model "$CASE_TMP/c.json" --grid 1900:1902:1
expect_exit 0
expect_stdout '^1901,'
run "$GMM_INFER" vi --model "$CASE_TMP/c.json" --init "$CASE_TMP/c.json" --quiet -o "$CASE_TMP/c2.json"
expect_exit 0
expect_file "$CASE_TMP/c2.json" '"elbo": '

begin "vi usage errors"
run "$GMM_INFER" vi "$ROOT/data/coal.csv" --likelihood poisson
expect_exit 2
expect_stderr '-o MODEL.json is required'
run "$GMM_INFER" vi "$ROOT/data/coal.csv" --likelihood poisson --bandwidth x -o "$CASE_TMP/x.json"
expect_exit 2
run "$GMM_INFER" vi "$ROOT/data/coal.csv" --likelihood poisson --init "$ROOT/data/coal.csv" \
    -o "$CASE_TMP/x.json"
expect_exit 1

begin "hmc --init starts the chains at a vi result's mean"
run "$GMM_INFER" vi "$ROOT/data/coal.csv" --likelihood poisson --kernel 'matern12(variance=0.5, lengthscale=20)' \
    --quiet -o "$CASE_TMP/q.json"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/q.json" --init "$CASE_TMP/q.json" --chains 1 --warmup 50 \
    --draws 5 --quiet -o "$CASE_TMP/d.csv"
expect_exit 0
run "$GMM_INFER" hmc --model "$CASE_TMP/q.json" --init "$ROOT/data/coal.csv" --chains 1
expect_exit 1
