# shellcheck shell=bash
# 77_re_terms.sh -- lme4's random-effect terms against lme4 (tests/fixtures/re,
# scripts/make-re-fixtures.R): (Days | Subject), (Days || Subject), (0 + Days | Subject)
# on sleepstudy, (1 | batch/cask) on Pastes, three correlated effects (1 + x + z | g), a
# factor-valued slope (0 + factor(h) | g), the same as (0 + h | g) of a text column, a Poisson (1 + x | g) (glmer, checked by
# glmmTMB) and a singular fit (lme4: correlation 1).  For each model:
#
#   - the log likelihood within 1e-6 of lme4's (lmer ML; glmer Laplace);
#   - every variance within 1e-4 relative, every correlation (k = 2) or canonical partial
#     correlation (k >= 3) within 1e-4, every coefficient within 0.01 standard errors;
#     (a log likelihood 1e-6 below the maximum allows parameters sqrt(2e-6) = 1.4e-3
#     standard errors away: these are all far closer, measured 1e-5 at worst);
#   - the model file's "varcorr" (lme4's VarCorr: each effect's SD and its correlations with
#     the group's earlier effects) within 1e-4 relative (SDs) and 1e-4 (correlations);
#   - predict --terms: every level's conditional mode of every effect (lme4's ranef) within
#     1e-4 of its posterior sd, and that sd within 1e-4 relative of lme4's condVar sd;
#   - "converged": true; where lme4's fit is singular (expect "boundary"), the certificate
#     names the correlation at its bound ("boundary", fit.c's corr_boundary: loglik is flat
#     in it near +-1), its loglik and coefficients still lme4's (coefficients to 1e-6
#     relative where the fit gives no standard errors).

re="$ROOT/tests/fixtures/re"
re_out="$WORK/re"
mkdir -p "$re_out"

re_lme4() { awk -F, -v m="$1" -v k="$2" '$1 == m && $2 == k { print $3; exit }' "$re/lme4.csv"; }
re_block() {
    sed -n "/\"$2\": {/,/}/p" "$1" | sed -n 's/^ *"\([^"]*\)": \([^,{]*\),\{0,1\}$/\1 \2/p'
}
re_se() { sed -n '/"std_errors"/,/}/p' "$1" | json_key "$2"; }
# "sd.GROUP.NAME SD" and "cor.GROUP.A.B CORR" (B after A in the group) of the model
# file's "varcorr" (jansson's layout: one key or number a line)
re_varcorr() {
    sed -n '/"varcorr": \[/,/^  \]/p' "$1" | awk '
        /"group":/ { g = $2; gsub(/[",]/, "", g) }
        /"name":/ { n = $2; gsub(/[",]/, "", n); if (g != pg) k = 0; pg = g; e[k++] = n; j = 0 }
        /"sd":/ { v = $2; sub(/,$/, "", v); print "sd." g "." n, v }
        /^ *-?[0-9][0-9.e+-]*,?$/ { v = $1; sub(/,$/, "", v); print "cor." g "." e[j++] "." n, v }'
}

while IFS=$'\t' read -r -u 3 name data formula lik _ expect; do
    [[ $name == name ]] && continue
    m="$re_out/$name.json"
    begin "re terms $name: $formula is lme4's fit"
    run "$GMM_INFER" fit --formula "$formula" --likelihood "$lik" -o "$m" "$ROOT/$data"
    expect_exit 0
    expect_file "$m" '"converged": true'
    # a singular fit names its correlation at the bound
    if [[ $expect == boundary ]]; then
        sed -n '/"boundary"/,/]/p' "$m" | grep -q '"f\.[^"]*\.cor\.' ||
            fail "lme4's fit is singular, and fit names no correlation at its bound"
    else
        expect_no_stderr 'boundary'
    fi
    ll=$(json_num "$m" loglik)
    close_to "$ll" "$(re_lme4 "$name" loglik)" 1e-6 abs ||
        fail "loglik $ll, lme4's $(re_lme4 "$name" loglik)"
    n=0
    while read -r p v; do
        want=$(re_lme4 "$name" "$p")
        case $p in
        intercept | coef.*)
            se=$(re_se "$m" "$p")
            if [[ -z $se ]]; then # a fit not converged has none: 1e-6 relative
                close_to "$v" "$want" 1e-6 || fail "$p $v, lme4 '$want'"
            else
                awk -v a="$v" -v b="$want" -v s="$se" 'BEGIN {
                    d = a - b; exit !(b != "" && (d < 0 ? -d : d) <= 0.01 * s) }' ||
                    fail "$p $v, lme4 '$want': more than 0.01 standard errors ($se) apart"
            fi ;;
        f.*.variance*)
            [[ $expect == converged ]] || continue
            close_to "$v" "$want" 1e-4 || fail "$p $v, lme4 '$want'" ;;
        f.*cor.*)
            [[ $expect == converged ]] || continue
            close_to "$v" "$want" 1e-4 abs || fail "$p $v, lme4 '$want'" ;;
        *) continue ;;
        esac
        n=$((n + 1))
    done < <(re_block "$m" parameters)
    [[ $n -ge 2 ]] || fail "only $n parameters compared"
    # VarCorr as lme4 prints it: every SD to 1e-4 relative and correlation to 1e-4
    [[ $expect == converged ]] || continue
    n=0
    while read -r p v; do
        want=$(re_lme4 "$name" "$p")
        [[ $p == sd.Residual.* ]] && continue
        case $p in
        sd.*) close_to "$v" "$want" 1e-4 || fail "VarCorr $p $v, lme4 '$want'" ;;
        cor.*) close_to "$v" "$want" 1e-4 abs || fail "VarCorr $p $v, lme4 '$want'" ;;
        esac
        n=$((n + 1))
    done < <(re_varcorr "$m")
    [[ $n -ge 1 ]] || fail "no VarCorr rows in $m"
    # predict --terms: each level's conditional mode of each effect (lme4's ranef) within
    # 1e-4 of its posterior sd, the sd lme4's condVar's to 1e-4 relative
    run "$GMM_INFER" predict --model "$m" --terms -o "$CASE_TMP/terms.csv"
    expect_exit 0
    bad=$(awk -F, -v m="$name" '
        NR == FNR { if ($1 == m && $2 ~ /^ranef\./) { want[substr($2, 7)] = $3; n++ }
                    if ($1 == m && $2 ~ /^ranefsd\./) wsd[substr($2, 9)] = $3; next }
        $1 ~ /^f\./ { t = substr($1, 3)
                     # lme4 merges a repeated grouping (g, g.1) in ranef
                     if (t ~ /^[^.]*\.[0-9]+\./) sub(/\.[0-9]+\./, ".", t)
                     if (t !~ /\.\(Intercept\)$/ && !(t "." $2 in want))
                         t = t ".(Intercept)"
                     k = t "." $2
                     if (!(k in want)) { print "no lme4 mode for " k; exit }
                     d = $3 - want[k]; if (d < 0) d = -d
                     if (d > 1e-4 * $4) print k ": " $3 ", lme4 " want[k]
                     d = $4 - wsd[k]; if (d < 0) d = -d
                     if (!(k in wsd) || d > 1e-4 * wsd[k]) print k ": sd " $4 ", lme4 " wsd[k]
                     seen++ }
        END { if (seen != n) print seen " modes, lme4 has " n }' "$re/lme4.csv" "$CASE_TMP/terms.csv")
    [[ -z $bad ]] || fail "conditional modes: $bad"
done 3<"$re/models.tsv"

begin "re terms: predict --at rows of a data level and of a new one (its prior: mean 0, z' Sigma z)"
m="$re_out/sleep_slope.json"
run "$GMM_INFER" predict --model "$m" --at "$re/newrows.csv"
expect_exit 0
v0=$(json_num "$m" 'f.Subject.variance.(Intercept)')
v1=$(json_num "$m" 'f.Subject.variance.Days')
c=$(json_num "$m" 'f.Subject.cor.(Intercept).Days')
bad=$(awk -F, -v v0="$v0" -v v1="$v1" -v c="$c" '
    NR == FNR { if ($1 == "sleep_slope" && $2 ~ /^predict\./) want[substr($2, 9)] = $3; next }
    FNR > 1 { d = $2 - want[$1]; if (d < 0) d = -d
              if (!($1 in want) || d > 1e-6 * want[$1]) print "row " $1 ": " $2 ", lme4 " want[$1]
              n++ }
    FNR == 3 || FNR == 4 { z = FNR == 3 ? 3 : 0   # the new level: Days 3, then 0
              w = v0 + 2 * z * c * sqrt(v0 * v1) + z * z * v1
              d = $3 - w; if (d < 0) d = -d
              if (d > 1e-9 * w) print "row " $1 ": variance " $3 ", z^T Sigma z " w }
    END { if (n != 4) print n " rows" }' "$re/lme4.csv" "$OUT")
[[ -z $bad ]] || fail "predictions: $bad"

# R's model.matrix(~ 0 + Days + factor(h)) has Days and then every level of h, in factor()'s
# numeric order (2, 9, 10: not the text order 10, 2, 9), the first level kept because no
# intercept or earlier factor took it; with an intercept, the first numeric level (2) is
# the reference.  h is made here from Days: 10, 2, 9 for Days mod 3 = 0, 1, 2.
begin "re terms: factor slopes beside a number keep every level, in R's numeric level order"
awk -F, 'NR == 1 { print $0 ",h"; next }
         { d = $2 % 3; print $0 "," (d == 0 ? 10 : d == 1 ? 2 : 9) }' "$re/sleep.csv" > "$CASE_TMP/h.csv"
run "$GMM_INFER" loglik --formula 'Reaction ~ 1 + (0 + Days + factor(h) | Subject)' "$CASE_TMP/h.csv"
expect_exit 0
got=$(grep -o '"f\.Subject\.variance\.[^"]*"' "$OUT" | head -4 | tr -d '"' | tr '\n' ' ')
[[ $got == "f.Subject.variance.Days f.Subject.variance.h2 f.Subject.variance.h9 f.Subject.variance.h10 " ]] ||
    fail "effects of (0 + Days + factor(h) | Subject): $got"
run "$GMM_INFER" loglik --formula 'Reaction ~ 1 + (1 + factor(h) | Subject)' "$CASE_TMP/h.csv"
expect_exit 0
got=$(grep -o '"f\.Subject\.variance\.[^"]*"' "$OUT" | head -3 | tr -d '"' | tr '\n' ' ')
[[ $got == "f.Subject.variance.(Intercept) f.Subject.variance.h9 f.Subject.variance.h10 " ]] ||
    fail "effects of (1 + factor(h) | Subject): $got"
