#!/bin/bash
# bench_marginal.sh -- `hmc --sample-hyper` with the hyperparameters sampled
# jointly with the latent field (--marginal none) against NUTS on their
# Laplace marginal with the field drawn given them (--marginal laplace), same
# run, same settings (docs/benchmarks.md, "HMC"):
#
#   GMM_INFER=build/release/gmm-infer [BENCH_QUICK=1] [OUT=DIR] scripts/bench_marginal.sh
#
# Cases: the influenza district totals (Poisson, edge-ou graph, 140 nodes;
# as scripts/bench_stan.sh fits them) and the coal-mining disasters (Poisson
# series with exposure, matern32).  Each: `fit`, then 4 chains x (1000 +
# 1000) (BENCH_QUICK: 4 x (300 + 300)) on one thread, seed 1, default
# priors; `gmm-infer summary` of each run.  Prints a Markdown table: wall
# time (warm-up included), min bulk ESS of the hyperparameters and of f and
# their ESS per second, the hyperparameters' means and sds, and the largest
# |z| of f's means between the two runs, z = (m1 - m2) / sqrt(sd1^2 / ess1 +
# sd2^2 / ess2).  About 2 minutes (quick: 30 s).
set -euo pipefail

bin=${GMM_INFER:-build/release/gmm-infer}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gmm-bench-marginal.XXXXXX")}
mkdir -p "$out"
if [[ -n "${BENCH_QUICK:-}" ]]; then warm=300 draws=300; else warm=1000 draws=1000; fi
export OPENBLAS_NUM_THREADS=1

now() { date +%s.%N; }

# summary CSV -> one line: time hyper_min_ess f_min_ess "name=mean(sd) ..."
stats() { # SUMMARY SECONDS
    awk -F, -v t="$2" 'NR == 1 { next }
        $1 == "lp__" { next }
        $1 ~ /^f\[/ { if (fe == "" || $9 < fe) fe = $9; next }
        { if (he == "" || $9 < he) he = $9; h = h sprintf(" %s=%.4g(%.3g)", $1, $2, $4) }
        END { printf "%.1f %.0f %.0f%s\n", t, he, fe, h }' "$1"
}

zmax() { # SUMMARY_A SUMMARY_B
    awk -F, 'NR == FNR { if ($1 ~ /^f\[/) { m[$1] = $2; s[$1] = $4; e[$1] = $9 } next }
        $1 ~ /^f\[/ && ($1 in m) { z = ($2 - m[$1]) / sqrt($4 * $4 / $9 + s[$1] * s[$1] / e[$1]);
                                   if (z < 0) z = -z; if (z > zm) zm = z; if (z > 3) n3++ }
        END { printf "%.2f (%d > 3)", zm, n3 }' "$1" "$2"
}

run_case() { # NAME MODEL
    local name=$1 model=$2 m t0 t1
    for m in none laplace; do
        t0=$(now)
        "$bin" hmc --model "$model" --sample-hyper --marginal "$m" --chains 4 --threads 1 \
            --warmup "$warm" --draws "$draws" --seed 1 --quiet -o "$out/$name-$m.csv"
        t1=$(now)
        "$bin" summary "$out/$name-$m.csv" -o "$out/$name-$m-summary.csv"
        echo "$name $m $(stats "$out/$name-$m-summary.csv" "$(echo "$t1 - $t0" | bc -l)")" \
            >> "$out/rows"
    done
    echo "$name z $(zmax "$out/$name-none-summary.csv" "$out/$name-laplace-summary.csv")" \
        >> "$out/rows"
}

: > "$out/rows"
"$bin" fit "$here/data/flu_bybw_nodes.csv" --graph "$here/data/flu_bybw_edges.csv" \
    --node node --y count_total --exposure population_2001 --likelihood poisson \
    --precision 'edge-ou(variance=1, lengthscale=300)' -o "$out/flu.json" 2> /dev/null
run_case influenza "$out/flu.json"
"$bin" fit "$here/data/coal.csv" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$out/coal.json" 2> /dev/null
run_case coal "$out/coal.json"

echo "4 chains x ($warm + $draws), one thread; time: wall clock, warm-up included; draws in $out"
echo
echo "| case | --marginal | time s | min bulk ESS hyper | hyper ESS/s | min bulk ESS f | f ESS/s | hyperparameters: mean (sd) |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"
awk '$2 != "z" { h = ""; for (i = 6; i <= NF; i++) h = h " " $i
                 printf "| %s | %s | %.1f | %.0f | %.1f | %.0f | %.1f |%s |\n", $1, $2, $3, $4,
                        $4 / $3, $5, $5 / $3, h
                 if ($2 == "none") { hn[$1] = $4 / $3 } else { r[$1] = ($4 / $3) / hn[$1] } }
     $2 == "z" { zz[$1] = $3 " " $4 " " $5 " " $6 }
     END { print ""; for (c in r) printf "%s: hyperparameter ESS/s laplace / none = %.1f; f means, max |z| laplace vs none: %s\n", c, r[c], zz[c] }' \
    "$out/rows"
