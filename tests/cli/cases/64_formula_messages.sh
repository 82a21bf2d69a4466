# shellcheck shell=bash
# 64_formula_messages.sh -- what a formula the tool cannot fit is told: R's
# operators it lacks (':' and '*' beside f(), '/', '^', '|') named with
# the caret under the operator, a misspelt f() model answered with every model there is and
# the nearest names, the response refused as its own covariate or index;
# and the model commands' --help listing several f() terms and every model.
# Sourced by tests/cli/run.sh (see there for the helpers).

fx="$ROOT/tests/fixtures/lme4"

# expect_caret COL: the caret line of a formula error points at offset COL of
# the formula (printed after two blanks).
expect_caret() { expect_stderr "^ {$(($1 + 2))}\\^\$"; }

begin "R's formula operators that are not supported are named, the caret under the operator"
# an interaction joins variables (R's x1:period is supported: 47_formula's
# design cases), not an f() term
run "$GMM_INFER" fit --formula 'y ~ x1 + f(g, iid):period' "$fx/gauss.csv"
expect_exit 1
expect_stderr "^gmm-infer fit: formula: interactions \(':' and '\*'\) join variables \(NAME, factor\(\), I\(\), \.\.\.\), not f\(\) terms$"
expect_caret 18
expect_stdout_empty
run "$GMM_INFER" fit --formula 'Y ~ x1 + 1 | g' "$fx/gauss.csv"
expect_exit 1
expect_stderr "formula: random-effect bars \('\|'\) go in parentheses \(a random intercept per level of g is \(1 \| g\)\)$"
expect_caret 11
run "$GMM_INFER" loglik --formula 'Y ~ x1/period + f(g, iid)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "formula: nesting \('/' and '%in%'\) is not supported$"
expect_caret 6
run "$GMM_INFER" loglik --formula 'Y ~ x1^2 + f(g, iid)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "formula: crossing to a degree \('\^'\) is not supported"
expect_caret 6

begin "a misspelt f() model: every model is listed, the nearest suggested, the caret under it"
run "$GMM_INFER" fit --formula 'Y ~ x1 + f(g, idd)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "^gmm-infer fit: formula: unknown model 'idd'; did you mean 'iid'\? \(models: iid, rw1, rw2, besag, bym2, ar1, seasonal; a kernel spec: matern12, .*quasiperiodic; with graph=, a precision spec: edge-ou, laplacian, iid\)$"
expect_caret 14
expect_no_stderr 'unknown kernel'
run "$GMM_INFER" fit --formula 'Y ~ x1 + f(g, IID)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "unknown model 'IID'; did you mean 'iid'\?"
run "$GMM_INFER" loglik --formula 'Y ~ f(x1, rw3)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "unknown model 'rw3'; did you mean 'rw1' or 'rw2'\?"
run "$GMM_INFER" loglik --formula 'Y ~ f(x1, ou)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "unknown model 'ou'; did you mean 'matern12' \(the Ornstein-Uhlenbeck process\)\?"
# in a stack too, and before the data are read
run "$GMM_INFER" loglik --formula 'Y ~ f(x1, rw2) + f(g, idd)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "unknown model 'idd'; did you mean 'iid'\?"
expect_caret 22
expect_no_stderr 'read [0-9]+ rows'

begin "the response is refused as a covariate, a factor or an f() index, the caret under it"
# y ~ y + f(g, iid) fitted y exactly (noise ~1e-13) and reported a large likelihood
run "$GMM_INFER" fit --formula 'Y ~ Y + f(g, iid)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "^gmm-infer fit: formula: the response 'Y' cannot also be a covariate$"
expect_caret 4
expect_stdout_empty
run "$GMM_INFER" fit --formula 'Y ~ x1 + factor(Y) + f(g, iid)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "formula: the response 'Y' cannot also be a factor \(factor\(Y\)\)$"
expect_caret 16
run "$GMM_INFER" fit --formula 'Y ~ x1 + f(Y, rw1)' "$fx/gauss.csv"
expect_exit 1
expect_stderr "formula: the response 'Y' cannot also index a latent term \(f\(Y, rw1\)\)$"
expect_caret 11

begin "the model commands' --help: several f() terms and every model of the tables"
for c in fit loglik gradcheck hmc vi; do
    run "$GMM_INFER" "$c" --help
    expect_exit 0
    expect_stdout 'and one or$'
    expect_stdout '^ +more f\(NAME, MODEL, \.\.\.\), latent terms'
    for m in iid rw1 rw2 besag bym2; do
        expect_stdout "^ {24}$m +[a-z]"
    done
    expect_stdout "^ {24}'KERNEL' a kernel spec in quotes"
    expect_stdout '^ +matern12, matern32, matern52, cosine, constant,$'
    expect_stdout '^ +periodic, quasiperiodic$'
    expect_stdout "^ {24}'PRECISION', graph=EDGES.csv"
    expect_stdout '^ +node NAME: edge-ou, laplacian, iid$'
    expect_stdout 'rw1 and rw2 take cyclic'
done
