# shellcheck shell=bash
# 62_first_contact.sh -- what a new user meets: help, an unwritable -o said
# before the work, model files with wrong keys or values named, data a fit
# cannot use explained, inputs that would merge silently.

begin "help CMD is CMD --help; version --help"
run "$GMM_INFER" help fit
expect_exit 0
expect_stdout '^Usage: gmm-infer fit'
run "$GMM_INFER" version --help
expect_exit 0
expect_stdout '^Usage: gmm-infer version'
run "$GMM_INFER" help nosuch
expect_exit 2

begin "an unwritable -o is reported before the work, naming the user's path"
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson -o "$CASE_TMP/no/dir/m.json"
expect_exit 1
expect_stderr "$CASE_TMP/no/dir/m.json: cannot write"
expect_no_stderr 'read 112 rows'
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson -o "$CASE_TMP"
expect_exit 1
expect_stderr 'Is a directory'

begin "model files: unknown or out-of-domain parameters are named with the file"
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson --kernel matern12 -o "$CASE_TMP/m.json"
expect_exit 0
sed 's/"intercept":/"intercep":/' "$CASE_TMP/m.json" > "$CASE_TMP/typo.json"
run "$GMM_INFER" loglik --model "$CASE_TMP/typo.json"
expect_exit 1
expect_stderr "typo\.json: unknown parameter 'intercep'"
sed 's/"0\.matern12\.variance": [0-9.e+-]*/"0.matern12.variance": -1/' "$CASE_TMP/m.json" > "$CASE_TMP/neg.json"
run "$GMM_INFER" predict --model "$CASE_TMP/neg.json"
expect_exit 1
expect_stderr "neg\.json: parameter '0\.matern12\.variance' = -1"

begin "data a fit cannot use: said plainly"
printf 'x,y\n1,5\n2,5\n3,5\n' > "$CASE_TMP/const.csv"
run "$GMM_INFER" fit "$CASE_TMP/const.csv" --kernel matern12
expect_exit 1
expect_stderr 'every observed y is 5'
printf 'x,y\n1,5\n2,NaN\n' > "$CASE_TMP/one.csv"
run "$GMM_INFER" fit "$CASE_TMP/one.csv" --kernel matern12
expect_exit 1
expect_stderr 'only one observed y'
printf 'x,y\n1,0\n2,0\n3,0\n' > "$CASE_TMP/zero.csv"
run "$GMM_INFER" fit "$CASE_TMP/zero.csv" --kernel matern12 --likelihood poisson
expect_exit 1
expect_stderr 'every observed count'
run "$GMM_INFER" loglik "$ROOT/data/coal.csv" --kernel matern12 --noise 1e-300
expect_exit 1
expect_stderr 'not finite at noise variance 1e-300'

begin "inputs that read as one double are reported, with an example"
printf 'x,y\n10000000000000001,1\n10000000000000000,2\n10000000000000003,1.5\n' > "$CASE_TMP/col.csv"
run "$GMM_INFER" loglik "$CASE_TMP/col.csv" --kernel matern12
expect_exit 0
expect_stderr "warning: .*col\.csv: 1 distinct value\(s\) of column 'x' read as the same number"

begin "library messages are not prefixed twice"
run "$GMM_INFER" fit "$ROOT/data/coal.csv" --likelihood poisson --epsilon -1
expect_exit 2
expect_no_stderr 'fit: fit:'
