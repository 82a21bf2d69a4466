#!/bin/bash
# bench_marginal.sh -- `hmc --sample-hyper` with the hyperparameters sampled
# jointly with the latent field (--marginal none) against NUTS on their
# Laplace marginal with the field drawn given them (--marginal laplace), and
# the same corrected to exact draws (--marginal laplace-mh, default
# --mh-draws), same run, same settings (docs/benchmarks.md, "HMC"):
#
#   GMM_INFER=build/release/gmm-infer [BENCH_QUICK=1] [OUT=DIR] scripts/bench_marginal.sh
#
# Cases: the influenza district totals (Poisson, edge-ou graph, 140 nodes;
# as scripts/bench_stan.sh fits them) and the coal-mining disasters (Poisson
# series with exposure, matern32).  Each: `fit`, then 4 chains x (1000 +
# 1000) (BENCH_QUICK: 4 x (300 + 300)) on one thread, seed 1, default
# priors; `gmm-infer summary` of each run.  Prints a Markdown table: wall
# time (warm-up included), min bulk ESS of the hyperparameters and of f and
# their ESS per second, the hyperparameters' means and sds; then for each
# laplace run against the joint one: the ratio of hyperparameter ESS per
# second, and over f's means the largest |z| (how many exceed 3) and the
# mean z, z = (m1 - m2) / sqrt(sd1^2 / ess1 + sd2^2 / ess2) (the mean is 0
# within about 1 / sqrt(n) when the means agree).  About 3 minutes (quick:
# 45 s) on a quiet 2-core machine.
set -euo pipefail

bin=${GMM_INFER:-build/release/gmm-infer}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gmm-bench-marginal.XXXXXX")}
mkdir -p "$out"
if [[ -n "${BENCH_QUICK:-}" ]]; then warm=300 draws=300; else warm=1000 draws=1000; fi
export OPENBLAS_NUM_THREADS=1

now() { date +%s.%N; }

# summary CSV -> one line: seconds, hyper min ESS, f min ESS, name=mean(sd) ...
stats() { # SUMMARY SECONDS
    awk -F, -v t="$2" 'NR == 1 { next }
        $1 == "lp__" { next }
        $1 ~ /^f\[/ { if (fe == "" || $9 < fe) fe = $9; next }
        { if (he == "" || $9 < he) he = $9; h = h sprintf(" %s=%.4g(%.3g)", $1, $2, $4) }
        END { printf "%.1f %.0f %.0f%s\n", t, he, fe, h }' "$1"
}

# f's means of B against A's
zstats() { # SUMMARY_A SUMMARY_B
    awk -F, 'NR == FNR { if ($1 ~ /^f\[/) { m[$1] = $2; s[$1] = $4; e[$1] = $9 } next }
        $1 ~ /^f\[/ && ($1 in m) { z = ($2 - m[$1]) / sqrt($4 * $4 / $9 + s[$1] * s[$1] / e[$1]);
                                   nz++; sz += z; if (z < 0) z = -z; if (z > zm) zm = z;
                                   if (z > 3) n3++ }
        END { printf "max |z| %.2f (%d of %d > 3), mean z %.2f", zm, n3, nz, sz / nz }' "$1" "$2"
}

run_case() { # NAME MODEL
    local name=$1 model=$2 m t0 t1
    for m in none laplace laplace-mh; do
        t0=$(now)
        "$bin" hmc --model "$model" --sample-hyper --marginal "$m" --chains 4 --threads 1 \
            --warmup "$warm" --draws "$draws" --seed 1 --quiet -o "$out/$name-$m.csv"
        t1=$(now)
        "$bin" summary "$out/$name-$m.csv" -o "$out/$name-$m-summary.csv"
        echo "$name $m $(stats "$out/$name-$m-summary.csv" "$(echo "$t1 - $t0" | bc -l)")" \
            >> "$out/rows"
    done
    for m in laplace laplace-mh; do
        echo "$name $m $(zstats "$out/$name-none-summary.csv" "$out/$name-$m-summary.csv")" \
            >> "$out/z"
    done
}

: > "$out/rows"
: > "$out/z"
"$bin" fit "$here/data/flu_bybw_nodes.csv" --graph "$here/data/flu_bybw_edges.csv" \
    --node node --y count_total --exposure population_2001 --likelihood poisson \
    --precision 'edge-ou(variance=1, lengthscale=300)' -o "$out/flu.json" 2> /dev/null
run_case influenza "$out/flu.json"
"$bin" fit "$here/data/coal.csv" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$out/coal.json" 2> /dev/null
run_case coal "$out/coal.json"

echo "4 chains x ($warm + $draws), one thread; time: wall clock, warm-up included; draws in $out"
echo "$(date -u +%Y-%m-%d), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo
echo "| case | --marginal | time s | min bulk ESS hyper | hyper ESS/s | min bulk ESS f | f ESS/s | hyperparameters: mean (sd) |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"
awk '{ h = ""; for (i = 6; i <= NF; i++) h = h " " $i
       printf "| %s | %s | %.1f | %.0f | %.1f | %.0f | %.1f |%s |\n", $1, $2, $3, $4, $4 / $3,
              $5, $5 / $3, h }' "$out/rows"
echo
awk 'NR == FNR { r[$1 " " $2] = $4 / $3; next }
     { printf "%s --marginal %s: hyperparameter ESS/s %.1fx the joint sampler'"'"'s; f means against its:", $1, $2,
              r[$1 " " $2] / r[$1 " none"]
       for (i = 3; i <= NF; i++) printf " %s", $i
       printf "\n" }' "$out/rows" "$out/z"
