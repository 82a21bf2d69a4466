# shellcheck shell=bash
# 79_glm.sh -- models without latent terms (lm, glm, MASS::glm.nb), prior weights (--weights,
# with and without an iid term: lmer, glmer) and rows with a missing covariate (dropped with a
# count, as R's na.omit), against tests/fixtures/glm/ref.csv (scripts/make-glm-fixtures.R):
#
#   - loglik within 1e-6 of R's (lm's ML logLik; glm, glm.nb; lmer ML, glmer Laplace);
#   - every coefficient within 1e-4 of its standard error of R's (at loglik within 1e-6 the
#     optimum is known to ~1e-3 standard errors; 1e-6 measured) and the likelihood's parameter
#     (variance, glm.nb's theta as the dispersion, lmer's residual variance, the iid
#     variance) within 1e-4 relative;
#   - the standard errors within 1e-4 relative of R's: glm's vcov (Poisson, binomial), lm's
#     times sqrt((n - p) / n) (the ML variance RSS / n: this tests that relation), the
#     negative binomial's observed information in (beta, theta) (optimHess);
#   - the rows dropped for a missing x, a or w: the count R's na.omit drops;
#   - predict at data rows 1..3: the mean X beta within 1e-4 sd of R's, its variance x'Vx (V
#     the coefficients' covariance behind the standard errors: predict.glm's se.fit^2) within
#     1e-4 relative.
# Sourced by tests/cli/run.sh (see there for the helpers).

glm_dir="$ROOT/tests/fixtures/glm"
glm_out="$WORK/glm"
mkdir -p "$glm_out"
glm_ref() { awk -F, -v m="$1" -v k="$2" '$1 == m && $2 == k { print $3; exit }' "$glm_dir/ref.csv"; }
glm_se() { sed -n '/"std_errors"/,/}/p' "$1" | json_key "$2"; }

while IFS=$'\t' read -r -u 3 name data formula lik opts; do
    [[ $name == name ]] && continue
    [[ $opts == - ]] && opts=
    # shellcheck disable=SC2206  # the options are words
    optv=($opts)
    m="$glm_out/$name.json"
    begin "glm $name: $formula ($lik${opts:+, $opts}) at R's maximum"
    run "$GMM_INFER" fit --formula "$formula" --likelihood "$lik" "${optv[@]}" -o "$m" \
        "$ROOT/$data"
    expect_exit 0
    expect_file "$m" '"converged": true'
    ll=$(json_num "$m" loglik)
    close_to "$ll" "$(glm_ref "$name" loglik)" 1e-6 abs ||
        fail "loglik $ll, R's $(glm_ref "$name" loglik)"
    while IFS=, read -r -u 4 model p want; do
        [[ $model == "$name" ]] || continue
        case $p in
        intercept | coef.*)
            got=$(json_num "$m" "$p")
            se=$(glm_se "$m" "$p")
            ref_se=$(glm_ref "$name" "se.$p")
            [[ -n $ref_se ]] || ref_se=$se
            close_to "$got" "$want" "$(awk -v s="$ref_se" 'BEGIN { print 1e-4 * s }')" abs ||
                fail "$p $got, R's $want (more than 1e-4 of its standard error $ref_se)"
            [[ -z $(glm_ref "$name" "se.$p") ]] || close_to "$se" "$ref_se" 1e-4 ||
                fail "standard error of $p $se, R's $ref_se" ;;
        likelihood.* | f.*)
            close_to "$(json_num "$m" "$p")" "$want" 1e-4 ||
                fail "$p $(json_num "$m" "$p"), R's $want" ;;
        dropped)
            if [[ $want == 0 ]]; then
                expect_no_stderr 'dropped'
            else
                expect_stderr "; $want more dropped for a missing value in a column the model uses"
            fi ;;
        esac
    done 4<"$glm_dir/ref.csv"

    if [[ -n $(glm_ref "$name" pred.var.1) ]]; then
        begin "glm $name: predict at the data rows: X beta with the coefficients' variance x'Vx"
        run "$GMM_INFER" predict --model "$m"
        expect_exit 0
        for r in 1 2 3; do
            read -r mu v < <(awk -F, -v r="$r" '$1 == r { print $2, $3 }' "$OUT")
            want_v=$(glm_ref "$name" "pred.var.$r")
            close_to "$mu" "$(glm_ref "$name" "pred.mean.$r")" \
                "$(awk -v v="$want_v" 'BEGIN { print 1e-4 * sqrt(v) }')" abs ||
                fail "row $r: mean $mu, R's $(glm_ref "$name" "pred.mean.$r")"
            close_to "$v" "$want_v" 1e-4 || fail "row $r: variance $v, R's $want_v"
        done
    fi

    begin "glm $name: loglik --model and gradcheck at the fit"
    run "$GMM_INFER" loglik --model "$m"
    expect_exit 0
    close_to "$(json_key loglik <"$OUT")" "$ll" 1e-9 || fail "loglik --model differs from fit's $ll"
    run "$GMM_INFER" gradcheck --model "$m"
    expect_exit 0
    expect_stderr 'gradients within tolerance'
done 3<"$glm_dir/models.tsv"

begin "glm: a model without a latent field has nothing for hmc or vi"
run "$GMM_INFER" hmc --model "$glm_out/pois.json" --draws 10 --warmup 10
expect_exit 1
expect_stderr 'the model has no latent field \(no latent term\) and no sampled hyperparameter: nothing to sample'
run "$GMM_INFER" vi --model "$glm_out/pois.json" -o "$CASE_TMP/vi.json"
expect_exit 1
expect_stderr 'vi: the model has no latent field \(no latent term\)'

begin "glm: hmc and vi run on a weighted model (their targets: tests/infer/test_glm_problem.c)"
run "$GMM_INFER" hmc --model "$glm_out/glmer_w.json" --draws 20 --warmup 20 --chains 1 --log-lik \
    -o "$CASE_TMP/draws.csv"
expect_exit 0
expect_file "$CASE_TMP/draws.csv" 'log_lik\[200\]'
run "$GMM_INFER" vi --model "$glm_out/glmer_w.json" -o "$CASE_TMP/vi.json"
expect_exit 0
# the ELBO is a lower bound of the marginal likelihood, which the Laplace fit approximates
elbo=$(json_num "$CASE_TMP/vi.json" elbo)
awk -v e="$elbo" -v l="$(json_num "$glm_out/glmer_w.json" loglik)" \
    'BEGIN { exit !(e != "" && e < l + 0.05 && e > l - 1) }' ||
    fail "ELBO $elbo against the Laplace loglik $(json_num "$glm_out/glmer_w.json" loglik)"

begin "glm: --na fail keeps the error naming file, line and column; bad weights are named"
run "$GMM_INFER" fit --formula 'c ~ x + factor(a)' --likelihood poisson --na fail \
    "$glm_dir/glm_na.csv"
expect_exit 1
expect_stderr "glm_na\.csv:6: column 'a': empty factor level"
run "$GMM_INFER" fit --formula 'c ~ x' --likelihood poisson --na maybe "$glm_dir/glm.csv"
expect_exit 2
expect_stderr "--na: 'maybe' is not omit or fail"
run "$GMM_INFER" fit --formula 'y ~ x' --weights w --na fail "$glm_dir/glm_na.csv"
expect_exit 1
expect_stderr "glm_na\.csv:9: column 'w': missing weight for an observed outcome"
awk -F, 'BEGIN { OFS = "," } NR == 7 { $4 = -1 } { print }' "$glm_dir/glm.csv" >"$CASE_TMP/neg.csv"
run "$GMM_INFER" fit --formula 'c ~ x' --likelihood poisson --weights w "$CASE_TMP/neg.csv"
expect_exit 1
expect_stderr "neg\.csv:7: column 'w': weight -1 is not finite and >= 0"

begin "glm: a weight of 2 is the row twice (Poisson and binomial with an iid term: the Laplace's rows)"
# w2 = 2 on every third row, 1 elsewhere; dup.csv repeats those rows instead (w2 = 1)
awk -F, 'BEGIN { OFS = "," } NR == 1 { print $0, "w2"; next } { print $0, (NR % 3 ? 1 : 2) }' \
    "$glm_dir/glm.csv" >"$CASE_TMP/w2.csv"
awk -F, 'BEGIN { OFS = "," } NR == 1 { print; next } { w = $NF; $NF = 1; print; if (w == 2) print }' \
    "$CASE_TMP/w2.csv" >"$CASE_TMP/dup.csv"
for spec in 'c ~ x + f(g, iid)|poisson|' 's ~ x + factor(a) + f(g, iid)|binomial|--trials t'; do
    IFS='|' read -r fml lk extra <<<"$spec"
    # shellcheck disable=SC2206  # the options are words
    ex=($extra)
    run "$GMM_INFER" fit --formula "$fml" --likelihood "$lk" "${ex[@]}" --weights w2 \
        -o "$CASE_TMP/w2.json" "$CASE_TMP/w2.csv"
    expect_exit 0
    # the weighted model at its maximum, evaluated on the duplicated rows (weights all 1)
    run "$GMM_INFER" loglik --model "$CASE_TMP/w2.json" "$CASE_TMP/dup.csv"
    expect_exit 0
    close_to "$(json_key loglik <"$OUT")" "$(json_num "$CASE_TMP/w2.json" loglik)" 1e-10 ||
        fail "$lk: loglik on the duplicated rows $(json_key loglik <"$OUT"), weighted \
$(json_num "$CASE_TMP/w2.json" loglik)"
done

begin "glm: score --loo refuses a weighted model and one without latent field"
run "$GMM_INFER" score --model "$glm_out/glmer_w.json" --loo
expect_exit 1
expect_stderr "leave-one-out scoring does not take prior weights \(the model's rows are weighted by 'w'\)"
run "$GMM_INFER" score --model "$glm_out/pois.json" --loo
expect_exit 1
expect_stderr 'the model has no latent field \(no latent term\)$'

begin "glm: score of new rows under lm is the normal predictive N(y; x'beta, x'Vx + variance)"
head -6 "$glm_dir/glm.csv" >"$CASE_TMP/t5.csv"
run "$GMM_INFER" predict --model "$glm_out/lm.json" --at "$CASE_TMP/t5.csv" --observed
expect_exit 0
cp "$OUT" "$CASE_TMP/pred.csv"
# y is column 5 of the data; the predictive's mean and variance columns 2 and 3 of predict's
want=$(awk -F, 'NR == FNR { if (FNR > 1) y[FNR - 1] = $5; next }
    FNR > 1 { r = $1; d = y[r] - $2; s += -0.5 * log(2 * 3.14159265358979324 * $3) - 0.5 * d * d / $3 }
    END { printf "%.17g", s }' "$CASE_TMP/t5.csv" "$CASE_TMP/pred.csv")
run "$GMM_INFER" score --model "$glm_out/lm.json" "$CASE_TMP/t5.csv"
expect_exit 0
close_to "$(json_key lpd <"$OUT")" "$want" 1e-10 || fail "score lpd $(json_key lpd <"$OUT"), \
the predictive's $want"

