#!/bin/bash
# bench_glmm.sh -- `gmm-infer fit` against glmmTMB and lme4's glmer, side by side in one
# run, as whole processes (each program starts, reads the data file and fits with its
# defaults; R's start and library loading count, as a user's Rscript does):
#
#   scripts/bench_glmm.sh GMM_INFER [N]
#
#   verbagg  lme4's VerbAgg (7584 Bernoulli rows, id x item crossed iid terms, 6
#            coefficients): r2 ~ Anger + Gender + btype + situ + (1|id) + (1|item)
#   pois1e5  N rows (default 1e5) of Poisson counts with 3 covariates and a 1000-level
#            iid term, drawn by scripts/bench_glmer.R's generator (seed 19)
#
# Prints per model and program the log likelihood, wall and CPU seconds (median of
# three runs each) and gmm-infer's ratio.  Needs Rscript with lme4 and glmmTMB
# (scripts/install-deps.sh --bench).
set -euo pipefail
gmm=$(readlink -f "$1")
n=${2:-100000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
Rscript -e 'suppressMessages(library(lme4)); d <- VerbAgg; d$y <- as.integer(d$r2 == "Y")
write.csv(d[, c("y", "Anger", "Gender", "btype", "situ", "id", "item")], "'"$dir"'/verbagg.csv",
          row.names = FALSE, quote = FALSE)
set.seed(19); n <- '"$n"'; G <- 1000L
g <- sprintf("g%04d", sample.int(G, n, replace = TRUE))
u <- setNames(rnorm(G, 0, 0.5), sprintf("g%04d", 1:G))
x1 <- round(rnorm(n), 4); x2 <- round(runif(n), 4); x3 <- round(rnorm(n), 4)
y <- rpois(n, exp(0.5 + 0.3 * x1 - 0.4 * x2 + 0.1 * x3 + u[g]))
write.csv(data.frame(y = y, x1 = x1, x2 = x2, x3 = x3, g = g), "'"$dir"'/pois.csv",
          row.names = FALSE, quote = FALSE)'

# One timed whole process: "WALL CPU" seconds on stdout, its own output in $dir/out.
timed() {
    /usr/bin/time -f '%e %U %S' -o "$dir/time" "$@" > "$dir/out" 2> "$dir/err" || {
        cat "$dir/err" >&2
        return 1
    }
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' "$dir/time"
}
median3() { sort -n | sed -n 2p; }

bench() { # NAME PROGRAM-LABEL COMMAND... -> "label loglik wall cpu"
    local name=$1 label=$2 ll w c
    shift 2
    : > "$dir/times"
    for i in 1 2 3; do timed "$@" >> "$dir/times"; done
    w=$(awk '{ print $1 }' "$dir/times" | median3)
    c=$(awk '{ print $2 }' "$dir/times" | median3)
    ll=$(grep -E '^loglik|"loglik"' "$dir/out" | head -1 | sed 's/[^-0-9.e]*\([-0-9.e]*\).*/\1/')
    printf '%-8s %-9s loglik %-18s wall %7.3f s  cpu %7.3f s\n' "$name" "$label" "$ll" "$w" "$c"
    echo "$w $c" > "$dir/$name.$label"
}

rfit() { # FILE FORMULA FAMILY FUNCTION PACKAGE
    cat > "$dir/fit.R" <<REOF
suppressMessages(library($5))
d <- read.csv("$1")
m <- $4($2, family = $3, data = d)
cat(sprintf("loglik %.10f\n", as.numeric(logLik(m))))
REOF
    echo Rscript "$dir/fit.R"
}

for model in verbagg pois1e5; do
    if [[ $model == verbagg ]]; then
        f="$dir/verbagg.csv"
        gf='y ~ Anger + factor(Gender) + factor(btype) + factor(situ) + f(id, iid) + f(item, iid)'
        rf='y ~ Anger + Gender + btype + situ + (1 | id) + (1 | item)'
        lik=bernoulli fam=binomial
    else
        f="$dir/pois.csv"
        gf='y ~ x1 + x2 + x3 + f(g, iid)'
        rf='y ~ x1 + x2 + x3 + (1 | g)'
        lik=poisson fam=poisson
    fi
    bench "$model" gmm-infer "$gmm" fit --formula "$gf" --likelihood "$lik" "$f"
    # shellcheck disable=SC2046
    bench "$model" glmmTMB $(rfit "$f" "$rf" "$fam" glmmTMB glmmTMB)
    # shellcheck disable=SC2046
    bench "$model" glmer $(rfit "$f" "$rf" "$fam" glmer lme4)
    read -r gw gc < "$dir/$model.gmm-infer"
    for r in glmmTMB glmer; do
        read -r rw rc < "$dir/$model.$r"
        awk -v a="$rw" -v b="$gw" -v c="$rc" -v d="$gc" -v m="$model" -v r="$r" 'BEGIN {
            printf "%-8s %s / gmm-infer: %.1fx wall, %.1fx cpu\n", m, r, a / b, c / d }'
    done
done
