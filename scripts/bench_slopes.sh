#!/bin/bash
# bench_slopes.sh -- random slopes, y ~ x + (1 + x | g), on 1e5 rows and 1000 groups
# (scripts/make-slope-bench-data.R: correlated intercepts and slopes), fitted by lme4 and
# glmmTMB side by side in one run, as whole processes (R's start, library loading and the
# CSV read count, as a user's Rscript does), and by gmm-infer when given:
#
#   scripts/bench_slopes.sh [-r RUNS] [-d DATADIR] [GMM_INFER]
#
#   gauss  lmer(y ~ x + (1 + x | g), REML = FALSE) and glmmTMB(..., REML = FALSE): the exact
#          maximum likelihood
#   pois   glmer(y ~ x + (1 + x | g), poisson, nAGQ = 1) with tight tolerances (tolPwrss
#          1e-10, bobyqa to rhoend 1e-8, as scripts/make-lme4-fixtures.R asks, so that its
#          log likelihood is the maximum's to ~1e-6) and glmmTMB's Laplace fit
#
# Per model and program: the log likelihood, the whole process's wall and CPU seconds and the
# fit's own wall seconds inside R (system.time of the fitting call alone), each the median of
# RUNS runs (default 3).  GMM_INFER runs `fit --formula "$GMM_FORMULA" --likelihood ...`
# (GMM_FORMULA defaults to 'y ~ x + (1 + x | g)') and adds its row and the ratios.  The data
# are made once in DATADIR (default bench-data/, not committed) and reused.  Needs Rscript
# with lme4 and glmmTMB (scripts/install-deps.sh --bench).
set -euo pipefail
runs=3
data=bench-data
while getopts r:d: opt; do
    case $opt in
    r) runs=$OPTARG ;;
    d) data=$OPTARG ;;
    *) echo "usage: bench_slopes.sh [-r RUNS] [-d DATADIR] [GMM_INFER]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
gmm=${1:+$(readlink -f "$1")}
formula=${GMM_FORMULA:-'y ~ x + (1 + x | g)'}
here=$(dirname "$(readlink -f "$0")")
[[ -f $data/slope_gauss.csv && -f $data/slope_pois.csv ]] ||
    Rscript "$here/make-slope-bench-data.R" "$data"
data=$(readlink -f "$data")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# One timed whole process: "WALL CPU" seconds on stdout, its own output in $dir/out.
timed() {
    /usr/bin/time -f '%e %U %S' -o "$dir/time" "$@" > "$dir/out" 2> "$dir/err" || {
        cat "$dir/err" >&2
        return 1
    }
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' "$dir/time"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

bench() { # NAME LABEL COMMAND... -> "name label loglik wall cpu fit"
    local name=$1 label=$2 ll w c f
    shift 2
    : > "$dir/times"
    : > "$dir/fits"
    for ((i = 0; i < runs; i++)); do
        timed "$@" >> "$dir/times"
        sed -n 's/^fit \([0-9.]*\)$/\1/p' "$dir/out" >> "$dir/fits"
    done
    w=$(awk '{ print $1 }' "$dir/times" | median)
    c=$(awk '{ print $2 }' "$dir/times" | median)
    f=$( [[ -s $dir/fits ]] && median < "$dir/fits" || echo -)
    ll=$(grep -E '^loglik|"loglik"' "$dir/out" | head -1 | sed 's/[^-0-9.e]*\([-0-9.e]*\).*/\1/')
    printf '%-6s %-9s loglik %-20s wall %8.3f s  cpu %8.3f s  fit %8s s\n' "$name" "$label" \
        "$ll" "$w" "$c" "$f"
    echo "$w $c" > "$dir/$name.$label"
}

rfit() { # NAME FILE PACKAGE CALL: an R script that fits and prints "fit SECONDS", "loglik LL"
    cat > "$dir/$1.R" <<REOF
suppressMessages(library($3))
d <- read.csv("$2")
t <- system.time(m <- $4)[["elapsed"]]
cat(sprintf("fit %.3f\nloglik %.10f\n", t, as.numeric(logLik(m))))
REOF
    echo Rscript "$dir/$1.R"
}

ctl='glmerControl(optimizer = "bobyqa", tolPwrss = 1e-10, optCtrl = list(rhoend = 1e-8, maxfun = 1e5))'
lctl='lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5))'
rf='y ~ x + (1 + x | g)'
echo "runs: $runs (median); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for model in gauss pois; do
    f="$data/slope_$model.csv"
    if [[ $model == gauss ]]; then
        lik=gaussian
        # shellcheck disable=SC2046  # the command is words
        bench "$model" lmer $(rfit lmer "$f" lme4 "lmer($rf, data = d, REML = FALSE, control = $lctl)")
        # shellcheck disable=SC2046
        bench "$model" glmmTMB $(rfit tmb "$f" glmmTMB "glmmTMB($rf, data = d, REML = FALSE)")
        rs=(lmer glmmTMB)
    else
        lik=poisson
        # shellcheck disable=SC2046
        bench "$model" glmer $(rfit glmer "$f" lme4 \
            "glmer($rf, family = poisson, data = d, nAGQ = 1, control = $ctl)")
        # shellcheck disable=SC2046
        bench "$model" glmmTMB $(rfit tmb "$f" glmmTMB "glmmTMB($rf, family = poisson, data = d)")
        rs=(glmer glmmTMB)
    fi
    [[ -n $gmm ]] || continue
    bench "$model" gmm-infer "$gmm" fit --formula "$formula" --likelihood "$lik" "$f"
    read -r gw gc < "$dir/$model.gmm-infer"
    for r in "${rs[@]}"; do
        read -r rw rc < "$dir/$model.$r"
        awk -v a="$rw" -v b="$gw" -v c="$rc" -v d="$gc" -v m="$model" -v r="$r" 'BEGIN {
            printf "%-6s %s / gmm-infer: %.1fx wall, %.1fx cpu\n", m, r, a / b, c / d }'
    done
done
