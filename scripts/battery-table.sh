#!/usr/bin/env bash
# battery-table.sh -- the optimiser's battery (tests/fixtures/battery/models.tsv,
# scripts/make-battery-fixtures.R; asserted by tests/cli/cases/29_battery.sh) as a
# Markdown table for docs/accuracy.md.
#
#   scripts/battery-table.sh [--before OLD_BINARY] [BINARY]
#
# BINARY defaults to build/release/gmm-infer.  For each model: the default fit and
# `fit --restarts 20 --seed S` (S the model's row in models.tsv, as in the case file),
# their log likelihoods, a reference -- lme4's where lme4 converged (lme4.csv), else the
# maximum of a model that is a limit of this one (models.tsv's "lower": besag for bym2)
# -- the default's shortfall from each (negative: below), "converged", the test's "stop"
# and Newton decrement, and the seconds of the default fit and of the 20 restarts.  With
# --before, OLD_BINARY's default fit beside it: how far its log likelihood is below the
# best known point (the highest of both binaries' default and 20-restart fits and the
# reference) and its "converged".  Then, for each shifted or scaled copy of a model, how
# far its default fit is from the base's transformed: the loglik (relative), the
# transformed coefficient, the intercept and the coefficient's standard error (relative;
# after a shift the intercept's standard error needs the covariance, not written).  Run
# from the checkout; prints both tables and a summary to stdout.
set -u

before=
if [[ ${1:-} == --before ]]; then
    before=$2
    shift 2
fi
bin=${1:-build/release/gmm-infer}
bat=tests/fixtures/battery
[[ -f $bat/models.tsv ]] || { echo "battery-table.sh: run from the checkout" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/battery.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# The number after "KEY": in JSON file $1 (first match), or empty.
num() { awk -v k="\"$2\":" '{ sub(/^ */, "") } index($0, k) == 1 {
        v = substr($0, length(k) + 2); sub(/,$/, "", v); gsub(/"/, "", v); print v; exit }' "$1"; }
lme4() { awk -F, -v m="$1" -v k="$2" '$1 == m && $2 == k { print $3; exit }' $bat/lme4.csv; }

# fit BINARY OUT.json SECONDS_FILE [fit options...]: run one fit, record its wall time.
fit() {
    local b=$1 out=$2 sec=$3 t0
    shift 3
    t0=$EPOCHREALTIME
    "$b" fit "$@" -o "$out" 2>"$out.err" || echo "fit failed: $*" >&2
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }' > "$sec"
}

echo "| model | n | default loglik | best of 20 | reference | default - best of 20 | default - reference |" \
     "converged | stop | Newton decrement | seconds (default / 20) |" \
     "${before:+before: below best known | before: converged |}"
echo "|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|${before:+---:|---|}"

declare -A ll_of
seed=0
while IFS=$'\t' read -r -u 3 name data formula lik opts expect base column base_column shift scale \
    lower; do
    [[ $name == name ]] && continue
    seed=$((seed + 1))
    [[ $opts == - ]] && opts=
    # shellcheck disable=SC2206  # the options are words
    args=(--formula "$formula" --likelihood "$lik" $opts "$data")
    n=$(($(wc -l < "$data") - 1))
    d=$tmp/$name
    fit "$bin" "$d.json" "$d.s" "${args[@]}"
    fit "$bin" "$d.r20.json" "$d.r20.s" "${args[@]}" --restarts 20 --seed "$seed"
    ll_of[$name]=$(num "$d.json" loglik)
    status=$(lme4 "$name" status)
    ref=''
    refname=''
    if [[ $status == converged ]]; then
        ref=$(lme4 "$name" loglik)
        refname=$(lme4 "$name" fitter)
        refname=${refname%% *}
    elif [[ $lower != - ]]; then
        ref=${ll_of[$lower]}
        refname=$lower
    elif [[ -n $status ]]; then
        refname="lme4 not converged"
    fi
    if [[ -n $before ]]; then
        fit "$before" "$d.old.json" "$d.old.s" "${args[@]}"
        fit "$before" "$d.old.r20.json" "$d.old.r20.s" "${args[@]}" --restarts 20 --seed "$seed"
    fi
    awk -v name="$name" -v n="$n" -v expect="$expect" -v before="$before" \
        -v ll="$(num "$d.json" loglik)" -v best="$(num "$d.r20.json" loglik)" -v ref="$ref" \
        -v refname="$refname" -v conv="$(num "$d.json" converged)" -v stop="$(num "$d.json" stop)" \
        -v dec="$(num "$d.json" decrement)" -v s0="$(cat "$d.s")" -v s20="$(cat "$d.r20.s")" \
        -v oll="$( [[ -n $before ]] && num "$d.old.json" loglik)" \
        -v obest="$( [[ -n $before ]] && num "$d.old.r20.json" loglik)" \
        -v oconv="$( [[ -n $before ]] && num "$d.old.json" converged)" '
        function f(x) { return x == "" ? "--" : sprintf("%.9f", x) }
        function e(x) { return sprintf("%.1e", x) }
        BEGIN {
            if (ref == "") lref = (refname == "" ? "--" : refname)
            else lref = f(ref) " (" refname ")"
            if (expect == "unbounded") {
                row = sprintf("| %s | %d | unbounded (%s) | unbounded (%s) | -- | -- | -- |", name, n, ll, best)
                top = ""
            } else {
                row = sprintf("| %s | %d | %s | %s | %s | %s | %s |", name, n, f(ll), f(best), lref,
                              e(ll - best), ref == "" ? "--" : e(ll - ref))
                top = ll; if (best > top) top = best; if (ref != "" && ref > top) top = ref
                if (obest != "" && obest > top) top = obest; if (oll != "" && oll > top) top = oll
            }
            row = row sprintf(" %s | %s | %s | %s / %s |", conv, stop, dec == "" ? "--" : e(dec), s0, s20)
            if (before != "")
                row = row sprintf(" %s | %s |", top == "" ? "--" : e(oll - top), oconv)
            print row
            # for the summary: name, expect, ll - best, ll - ref, conv, old shortfall, old conv
            printf "%s %s %s %s %s %s %s\n", name, expect, ll - best, (ref == "" ? "NA" : ll - ref),
                   conv, (top == "" || oll == "" ? "NA" : oll - top), (oconv == "" ? "NA" : oconv) > "/dev/stderr"
        }' 2>>"$tmp/summary"
    [[ $base != - ]] && printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$base" "$column" "$base_column" \
        "$shift" "$scale" >> "$tmp/copies"
done 3< "$bat/models.tsv"

echo
awk -v before="$before" '
    { nm++ }
    $2 == "unbounded" { unb++; if ($5 == "false") unb_ok++; next }
    { nfit++
      if ($5 == "true") conv++
      if ($3 < -1e-6) { below++; blist = blist " " $1 " (" sprintf("%.2g", $3) ")" }
      if ($4 != "NA") { nref++; if ($4 < -1e-6) { lbelow++; llist = llist " " $1 } }
      if (before != "" && $6 != "NA") { if ($6 < -1e-6) { obad++; olist = olist " " $1 " (" sprintf("%.2g", $6) ")"
                                                          if (-$6 > omax) omax = -$6 } }
      if ($7 == "true") oconv++ }
    END {
        printf "%d models: %d fits with a maximum, %d converged; %d below the best of 20 restarts by more than 1e-6 nats%s.\n",
               nm, nfit, conv, below, below ? ":" blist : ""
        printf "%d have a reference (lme4 converged, or a limit of the model); the default fit is below it by more than 1e-6 nats on %d%s.\n",
               nref, lbelow, lbelow ? ":" llist : ""
        printf "%d model(s) without a maximum, %d of them said so (converged false).\n", unb, unb_ok
        if (before != "")
            printf "Before: %d of %d default fits below the best known point by more than 1e-6 nats (at most %.3g nats)%s; %d said converged.\n",
                   obad, nfit, omax, obad ? ":" olist : "", oconv
    }' "$tmp/summary"

# the standard error of $2 in model file $1
se() { sed -n '/"std_errors"/,/}/p' "$1" > "$tmp/se.json"; num "$tmp/se.json" "$2"; }
echo
echo "| copy | column = scale x + shift | loglik | coefficient | intercept | coefficient's standard error |"
echo "|---|---|---:|---:|---:|---:|"
while IFS=$'\t' read -r name base column base_column shift scale; do
    m=$tmp/$name.json b=$tmp/$base.json
    awk -v name="$name" -v base="$base" -v col="$column" -v shift="$shift" -v scale="$scale" \
        -v ll="$(num "$m" loglik)" -v bll="$(num "$b" loglik)" \
        -v c="$(num "$m" "coef.$column")" -v bc="$(num "$b" "coef.$base_column")" \
        -v a="$(num "$m" intercept)" -v ba="$(num "$b" intercept)" \
        -v s="$(se "$m" "coef.$column")" -v bs="$(se "$b" "coef.$base_column")" '
        function rel(x, y) { d = x - y; if (d < 0) d = -d; return sprintf("%.1e", d / (y < 0 ? -y : y)) }
        BEGIN {
            printf "| %s | %s = %g x + %g | %s | %s | %s | %s |\n", name, col, scale, shift,
                   rel(ll, bll), rel(c, bc / scale), rel(a, ba - bc / scale * shift),
                   s == "" || bs == "" ? "--" : rel(s, bs / scale)
        }'
done < "$tmp/copies"
