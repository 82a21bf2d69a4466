#!/bin/sh
# experiment-vi.sh -- the paper's section 5.3 in spirit, on our data: counts on
# a graph, learnt on one half and scored on the other (gmm-infer score, the
# log pointwise predictive density of the held-out counts), for the Laplace
# approximation (fit), VI (vi --learn-hyper), whitened HMC with the
# hyperparameters sampled (hmc --sample-hyper, 4 chains) and the independent
# per-node Gamma-Poisson baseline (scripts/baseline_gamma_poisson.py):
#
#   influenza: data/flu_even.csv -> data/flu_odd.csv (district totals of the
#              even and odd weeks; population as exposure)
#   Chicago:   data/chicago_train.csv -> data/chicago_test.csv (the crimes
#              thinned 1/2; street length served as exposure)
#
#   scripts/experiment-vi.sh [OUTDIR]      (default: experiment/)
# Writes OUTDIR/results.csv (dataset,method,lpd,n,seconds) and the Chicago
# posterior rate map OUTDIR/chicago-rate.png (python3-matplotlib).
# The split files come from scripts/make-split-data.sh (shipped in data/).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${GMM_INFER:-$here/gmm-infer}
out=${1:-$here/experiment}
mkdir -p "$out"
lpd() { sed -n 's/^ *"lpd": \(.*\),$/\1/p' "$1"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
res="$out/results.csv.tmp"
echo "dataset,method,lpd,n,seconds" > "$res"

run() { # NAME TRAIN TEST EXPOSURE PRECISION EDGES NODECOL
    name=$1 train=$2 test=$3 expo=$4 prec=$5 edges=$6 node=$7
    common="--graph $edges --node $node --y count --exposure $expo --likelihood poisson"
    t0=$(now)
    # shellcheck disable=SC2086
    "$bin" fit "$train" $common --precision "$prec" -o "$out/$name-laplace.json" 2>/dev/null
    "$bin" score --model "$out/$name-laplace.json" "$test" > "$out/$name-laplace.score"
    t1=$(now)
    echo "$name,laplace,$(lpd "$out/$name-laplace.score"),$(grep -c . "$test" | awk '{print $1 - 1}'),$(secs "$t0" "$t1")" >> "$res"
    # shellcheck disable=SC2086
    "$bin" vi "$train" $common --precision "$prec" --learn-hyper --quiet \
        -o "$out/$name-vi.json" --posterior "$out/$name-vi-posterior.csv" 2>/dev/null
    "$bin" score --model "$out/$name-vi.json" "$test" > "$out/$name-vi.score"
    t2=$(now)
    echo "$name,vi,$(lpd "$out/$name-vi.score"),$(grep -c . "$test" | awk '{print $1 - 1}'),$(secs "$t1" "$t2")" >> "$res"
    "$bin" hmc --model "$out/$name-laplace.json" --sample-hyper --chains 4 --threads 2 \
        --quiet -o "$out/$name-hmc.csv" --summary "$out/$name-hmc-summary.csv" 2>/dev/null
    "$bin" score --model "$out/$name-laplace.json" "$test" --draws "$out/$name-hmc.csv" \
        > "$out/$name-hmc.score"
    t3=$(now)
    echo "$name,hmc,$(lpd "$out/$name-hmc.score"),$(grep -c . "$test" | awk '{print $1 - 1}'),$(secs "$t2" "$t3")" >> "$res"
    "$here/scripts/baseline_gamma_poisson.py" "$train" "$test" --node "$node" --y count \
        --exposure "$expo" > "$out/$name-baseline.score"
    t4=$(now)
    echo "$name,gamma-poisson,$(lpd "$out/$name-baseline.score"),$(grep -c . "$test" | awk '{print $1 - 1}'),$(secs "$t3" "$t4")" >> "$res"
}

run influenza "$here/data/flu_even.csv" "$here/data/flu_odd.csv" population_2001 \
    'edge-ou(variance=1, lengthscale=300)' "$here/data/flu_bybw_edges.csv" node
run chicago "$here/data/chicago_train.csv" "$here/data/chicago_test.csv" weight \
    'edge-ou(variance=1, lengthscale=100)' "$here/data/chicago_road_edges.csv" node
mv "$res" "$out/results.csv"
cat "$out/results.csv"
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    "$here/scripts/plot-graph" --nodes "$here/data/chicago_road_nodes.csv" \
        --edges "$here/data/chicago_road_edges.csv" --predict "$out/chicago-vi-posterior.csv" \
        --value rate --title "Chicago crimes: posterior rate per metre of street (VI, training half)" \
        -o "$out/chicago-rate.png"
    echo "experiment: map written to $out/chicago-rate.png" >&2
fi
