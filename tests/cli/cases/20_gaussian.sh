# shellcheck shell=bash
# 20_gaussian.sh -- loglik, fit, gradcheck and predict on state-space and
# graph models: good runs and each bad input with its message and exit code.

co2="$ROOT/data/co2.csv"
chi_nodes="$ROOT/data/chicago_road_nodes.csv"
chi_edges="$ROOT/data/chicago_road_edges.csv"

# A small regular series with one missing y and a repeated x.
small_csv() {
    {
        echo "t,y"
        awk 'BEGIN { for (i = 0; i < 60; i++) printf "%.3f,%.6f\n", i * 0.1, sin(i * 0.1) + 0.1 * cos(7 * i) }'
        echo "2.5,0.7"
        echo "7.0,NA"
    } > "$CASE_TMP/small.csv"
}

begin "loglik prints JSON with every parameter's gradient"
small_csv
run "$GMM_INFER" loglik "$CASE_TMP/small.csv" --kernel 'matern32(variance=1, lengthscale=1)' --noise 0.01
expect_exit 0
expect_stdout '"loglik": -?[0-9]'
expect_stdout '"0\.matern32\.lengthscale": '
expect_stdout '"likelihood\.variance": '
expect_stdout '"n_observed": 61,'
expect_stdout '"state_dim": 2,'
expect_stdout '"bandwidth": 3'
expect_stderr 'read 62 rows: 61 observed, 1 missing'

begin "gradcheck passes on a small model and prints CSV"
small_csv
run "$GMM_INFER" gradcheck "$CASE_TMP/small.csv" --kernel 'matern52(variance=1, lengthscale=1.5)' --noise 0.05
expect_exit 0
expect_stdout '^parameter,value,analytic,numeric,fd_error,abs_error,allowed,ok$'
expect_stdout '^0\.matern52\.lengthscale,.*,true$'
expect_no_stdout ',false$'

begin "fit writes a model atomically; predict reads it"
small_csv
run "$GMM_INFER" fit "$CASE_TMP/small.csv" --kernel 'matern32' -o "$CASE_TMP/m.json"
expect_exit 0
expect_stdout_empty
expect_file "$CASE_TMP/m.json" '"format_version": 1'
expect_file "$CASE_TMP/m.json" '"kernel": "matern32\(variance='
expect_file "$CASE_TMP/m.json" '"converged": (true|false)'
run "$GMM_INFER" predict --model "$CASE_TMP/m.json" --grid 0:8:0.5
expect_exit 0
expect_stdout '^x,mean,var,lower,upper,level$'
expect_stdout '^8,'
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json"
expect_exit 0
expect_stdout '"loglik"'

begin "fit --fix holds a parameter; unknown --fix is a usage error"
small_csv
run "$GMM_INFER" fit "$CASE_TMP/small.csv" --kernel 'matern32(lengthscale=0.7)' --fix 0.matern32.lengthscale
expect_exit 0
expect_stdout '"0\.matern32\.lengthscale": 0\.69999999999999996'
run "$GMM_INFER" fit "$CASE_TMP/small.csv" --kernel 'matern32' --fix 0.matern32.period
expect_exit 2
expect_stderr "no parameter '0\.matern32\.period'"

begin "the shipped CO2 data with the default kernel"
run "$GMM_INFER" loglik "$co2"
expect_exit 0
expect_stdout '"state_dim": 6,'
# d - 1 + 2: three independent blocks of 2 (ssm.c, BLOCKS), not 2d - 1 = 11
expect_stdout '"bandwidth": 7'
expect_stderr 'read 2284 rows: 2225 observed, 59 missing'

begin "graph models: loglik, fit and predict at every node"
run "$GMM_INFER" loglik "$chi_nodes" --graph "$chi_edges" --precision 'edge-ou(lengthscale=20)' --node node --y count
expect_exit 0
expect_stdout '"0\.edge-ou\.variance": '
expect_stdout '"n_observed": 338,'
run "$GMM_INFER" fit "$chi_nodes" --graph "$chi_edges" --precision 'edge-ou(lengthscale=20)' --node node --y count -o "$CASE_TMP/g.json"
expect_exit 0
expect_file "$CASE_TMP/g.json" '"precision": "edge-ou\('
expect_file "$CASE_TMP/g.json" '"graph": '
run "$GMM_INFER" predict --model "$CASE_TMP/g.json"
expect_exit 0
expect_stdout '^node,mean,var,lower,upper,level$'
expect_stdout '^337,'

begin "a kernel spec error points at the character"
small_csv
run "$GMM_INFER" loglik "$CASE_TMP/small.csv" --kernel 'matern32(variance=1, lengthscale=)'
expect_exit 1
expect_stderr '^gmm-infer loglik: '
expect_stderr '^  matern32\(variance=1, lengthscale=\)$'
expect_stderr '^ {35}\^$'
run "$GMM_INFER" loglik "$CASE_TMP/small.csv" --kernel 'matern32 + materm52'
expect_exit 1
expect_stderr 'materm52'
expect_stderr '^             \^$'

begin "bad data: non-numeric, non-finite, wrong column, ragged, empty"
printf 't,y\n0,1\n1,abc\n' > "$CASE_TMP/bad1.csv"
run "$GMM_INFER" loglik "$CASE_TMP/bad1.csv" --kernel matern12
expect_exit 1
expect_stderr "bad1\.csv:3: column 'y': 'abc' is not a number"
printf 't,y\n0,1\ninf,2\n' > "$CASE_TMP/bad2.csv"
run "$GMM_INFER" loglik "$CASE_TMP/bad2.csv" --kernel matern12
expect_exit 1
expect_stderr "bad2\.csv:3: column 't': 'inf' is not finite"
run "$GMM_INFER" loglik "$CASE_TMP/bad2.csv" --kernel matern12 --x time
expect_exit 1
expect_stderr "no column 'time'"
printf 't,y\n0,1\n1,2,3\n' > "$CASE_TMP/bad3.csv"
run "$GMM_INFER" loglik "$CASE_TMP/bad3.csv" --kernel matern12
expect_exit 1
expect_stderr 'bad3\.csv:3: expected 2 fields, found 3'
: > "$CASE_TMP/empty.csv"
run "$GMM_INFER" loglik "$CASE_TMP/empty.csv" --kernel matern12
expect_exit 1
expect_stderr 'empty\.csv'
run "$GMM_INFER" loglik "$CASE_TMP/nope.csv" --kernel matern12
expect_exit 1
expect_stderr 'nope\.csv'

begin "usage errors exit 2"
run "$GMM_INFER" loglik
expect_exit 2
expect_stderr 'missing DATA\.csv'
run "$GMM_INFER" loglik "$co2" --noise -1
expect_exit 2
expect_stderr "--noise: '-1' is not a positive number"
run "$GMM_INFER" fit "$co2" --bogus
expect_exit 2
run "$GMM_INFER" predict --grid 0:1:0.1
expect_exit 2
expect_stderr 'model MODEL\.json is required'
run "$GMM_INFER" loglik "$chi_nodes" --graph "$chi_edges" --node node --y count
expect_exit 2
expect_stderr 'needs --precision'

begin "predict: a missing or malformed model file is an error naming it"
run "$GMM_INFER" predict --model "$CASE_TMP/none.json"
expect_exit 1
expect_stderr 'none\.json'
echo '{"format_version": 1' > "$CASE_TMP/broken.json"
run "$GMM_INFER" predict --model "$CASE_TMP/broken.json"
expect_exit 1
expect_stderr 'broken\.json:'

begin "a laplacian ridge of 0 can be held fixed in fit and gradcheck"
run "$GMM_INFER" fit "$chi_nodes" --graph "$chi_edges" --node node --y count \
    --precision 'edge-ou(lengthscale=20) + laplacian(precision=0.1, ridge=0)' --fix 1.laplacian.ridge
expect_exit 0
expect_stdout '"1\.laplacian\.ridge": 0'
run "$GMM_INFER" gradcheck "$chi_nodes" --graph "$chi_edges" --node node --y count \
    --precision 'edge-ou(lengthscale=20) + laplacian(precision=0.1, ridge=0)'
expect_exit 0
expect_stdout '^1\.laplacian\.ridge,0,.*,skipped$'

begin "--model excludes model options; graphs need --y"
small_csv
run "$GMM_INFER" fit "$CASE_TMP/small.csv" --kernel matern12 -o "$CASE_TMP/m.json"
expect_exit 0
run "$GMM_INFER" loglik --model "$CASE_TMP/m.json" --kernel matern32
expect_exit 2
expect_stderr 'give no model options'
run "$GMM_INFER" loglik "$chi_nodes" --graph "$chi_edges" --precision edge-ou --node node
expect_exit 2
expect_stderr 'needs --precision SPEC, --node NAME and --y NAME'
run "$GMM_INFER" loglik "$chi_nodes" --graph "$chi_edges" --precision edge-ou --node node --y count --merge-tol 1
expect_exit 2

begin "--merge-tol is kept in the model file and used by predict"
{
    echo "t,y"
    awk 'BEGIN { for (i = 0; i < 40; i++) printf "%.6f,%.4f\n", i * 0.1, sin(i * 0.1) }'
    echo "1.0000001,0.85"
} > "$CASE_TMP/ties.csv"
run "$GMM_INFER" fit "$CASE_TMP/ties.csv" --kernel 'matern52(lengthscale=1)' --merge-tol 1e-3 -o "$CASE_TMP/t.json"
expect_exit 0
expect_file "$CASE_TMP/t.json" '"merge_tol": 0\.001'
run "$GMM_INFER" predict --model "$CASE_TMP/t.json" --grid 0:4:1
expect_exit 0
expect_stdout '^4,'
