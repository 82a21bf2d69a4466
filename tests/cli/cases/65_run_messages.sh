# shellcheck shell=bash
# 65_run_messages.sh -- messages that say the right thing: a non-finite
# Gaussian likelihood blames the data's scale or the noise by which one it
# is; an output directory that cannot hold the temporary file is named; and
# hmc's usage errors come before anything is read or printed.
# Sourced by tests/cli/run.sh (see there for the helpers).

coal="$ROOT/data/coal.csv"

begin "a non-finite Gaussian likelihood: data too large for doubles, or a noise too small"
# CO2 in units of 1e-150 ppm: the default noise variance is ~5e299, whose
# square overflows; it is not 'too small'
awk -F, 'NR == 1 { print; next } NR <= 400 { printf "%s,%.17g\n", $1, $2 * 1e150 }' \
    "$ROOT/data/co2_train.csv" >"$CASE_TMP/big.csv"
run "$GMM_INFER" loglik "$CASE_TMP/big.csv" --kernel matern32
expect_exit 1
expect_stderr "not finite at noise variance 5\.[0-9]*e\+299: the data's scale \(mean square 5\.[0-9]*e\+300\) is too large for double precision; rescale the outcomes$"
expect_no_stderr 'too small'
run "$GMM_INFER" fit "$CASE_TMP/big.csv" --kernel matern32
expect_exit 1
expect_stderr 'is too large for double precision'
expect_no_stderr 'too small'
run "$GMM_INFER" loglik "$coal" --kernel matern12 --noise 1e-300
expect_exit 1
expect_stderr 'not finite at noise variance 1e-300 \(too small for the scale of the data, mean square 2\.[0-9]+\)$'

begin "a directory that cannot hold the temporary file: the path and the directory are named"
mkdir "$CASE_TMP/ro"
chmod 555 "$CASE_TMP/ro"
# root writes anywhere: drop the capability that lets it (when it can)
as_user=()
if [[ $(id -u) -eq 0 ]]; then
    if setpriv --bounding-set=-dac_override,-dac_read_search true 2>/dev/null; then
        as_user=(setpriv --bounding-set=-dac_override,-dac_read_search)
    else
        echo "note: root without setpriv: the read-only directory case is not checked"
    fi
fi
if [[ $(id -u) -ne 0 || ${#as_user[@]} -gt 0 ]]; then
    run "${as_user[@]}" "$GMM_INFER" fit "$coal" --likelihood poisson --kernel matern12 \
        -o "$CASE_TMP/ro/m.json"
    expect_exit 1
    expect_stderr "^gmm-infer fit: $CASE_TMP/ro/m\.json: cannot write: the temporary file beside it could not be created in directory '$CASE_TMP/ro': Permission denied$"
    expect_no_file "$CASE_TMP/ro/m.json"
fi
chmod 755 "$CASE_TMP/ro"
# a writable directory still takes the file
run "$GMM_INFER" fit "$coal" --likelihood poisson --kernel matern12 -o "$CASE_TMP/m.json"
expect_exit 0
expect_file "$CASE_TMP/m.json"

begin "hmc: a usage error comes before the data report and the priors"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --exposure exposure --kernel matern12 \
    --sample-hyper --metric laplace -o "$CASE_TMP/d.csv"
expect_exit 2
expect_stderr "^gmm-infer hmc: --metric laplace holds the hyperparameters at the model's values: it cannot be used with --sample-hyper"
expect_no_stderr 'prior:'
expect_no_stderr 'read [0-9]+ rows'
expect_no_file "$CASE_TMP/d.csv"
run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel matern12 --metric bogus
expect_exit 2
expect_stderr "^gmm-infer hmc: --metric: 'bogus' is not laplace, prior or auto$"
expect_no_stderr 'read [0-9]+ rows'
for extra in '--mh-draws 4' '--marginal laplace'; do
    # shellcheck disable=SC2086
    run "$GMM_INFER" hmc "$coal" --likelihood poisson --kernel matern12 $extra
    expect_exit 2
    expect_stderr "^gmm-infer hmc: --(mh-draws|marginal) applies with"
    expect_no_stderr 'read [0-9]+ rows'
done
