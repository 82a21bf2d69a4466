#!/usr/bin/env bash
# bench_large.sh -- gmm-infer hmc at n = 1e5 (docs/benchmarks.md, "HMC"):
# Poisson counts on a 20 x 5000 strip lattice (edge-ou precision) and a
# 1e5-point series (matern32 state-space model), hyperparameters fixed at
# gmm-infer fit's values, data from scripts/make-bench-data at two count
# levels: mean 3.6 (B = 1, tests/bench/bench_laplace.c's data) and mean 0.2
# (B = -2).  Prints one table row per run:
#
#   case | n | mean count | chains x (warm-up + draws) | fit s | hmc wall s |
#   hmc CPU s | per gradient (CPU s / all leapfrog steps) | leapfrogs per
#   iteration | min bulk ESS over the latents | ESS per wall second | max R-hat
#
#   scripts/bench_large.sh [-o DIR] [-t THREADS] [CASE...]
#
# CASE: strip-low strip-high series-low series-high (default: all,
# in that order).  DIR (default bench-large) keeps the data, models,
# summaries and table.tsv; the draws (1e5 columns, gigabytes) are deleted
# once summarised.  Every case runs 4 chains x (500 + 500); the high-count
# ones sample under the Laplace map that `hmc --metric auto` picks for them.
# BENCH_LARGE_LEN=L makes them 20 x L (a smoke test).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=bench-large
threads=2
len=${BENCH_LARGE_LEN:-5000}
while getopts o:t: opt; do
    case $opt in
    o) dir=$OPTARG ;;
    t) threads=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(strip-low strip-high series-low series-high)

make -j2 gmm-infer >&2
export OPENBLAS_NUM_THREADS=1 # no spinning BLAS workers in the CPU times
G=$PWD/gmm-infer
mkdir -p "$dir"
TIMEFORMAT='%R %U %S'

# timed CMD...: run CMD (stdout and stderr to $dir/log), set wall, cpu
timed() {
    local t
    t=$({ time "$@" >> "$dir/log" 2>&1; } 2>&1) || { echo "bench_large: failed: $*" >&2; exit 1; }
    read -r wall user sys <<< "$t"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
}

printf 'case\tn\tmean_count\trun\tfit_s\twall_s\tcpu_s\tgrad_ms\tleap_per_it\tess_min\tess_per_wall_s\trhat_max\n' \
    > "$dir/table.tsv"
for c in "${cases[@]}"; do
    case $c in
    strip-*) kind=strip ;;
    series-*) kind=series ;;
    *) echo "bench_large: unknown case $c" >&2; exit 2 ;;
    esac
    case $c in
    *-low) base=-2 chains=4 warmup=500 draws=500 ;;
    *-high) base=1 chains=4 warmup=500 draws=500 ;;
    esac
    d=$dir/$c
    mkdir -p "$d"
    if [[ $kind == strip ]]; then
        scripts/make-bench-data -b "$base" strip 20 "$len" "$d"
        data=$d/strip_nodes.csv
        timed "$G" fit "$data" --graph "$d/strip_edges.csv" --node node --y count \
            --likelihood poisson --precision 'edge-ou(variance=1, lengthscale=5)' -o "$d/model.json"
    else
        scripts/make-bench-data -b "$base" series $((20 * len)) "$d"
        data=$d/series.csv
        timed "$G" fit "$data" --x x --y count --likelihood poisson \
            --kernel 'matern32(variance=1, lengthscale=50)' -o "$d/model.json"
    fi
    fit_s=$wall
    echo "bench_large: $c: fitted in $fit_s s: $(tr -d '\n' < "$d/model.json" |
        sed 's/.*"parameters": *{\([^}]*\)}.*/\1/' | tr -s ' ')" >&2
    timed "$G" hmc --model "$d/model.json" --chains "$chains" --threads "$threads" \
        --warmup "$warmup" --draws "$draws" --seed 1 --quiet -o "$d/draws.csv"
    hmc_wall=$wall hmc_cpu=$cpu
    timed "$G" summary -o "$d/summary.csv" "$d/draws.csv"
    echo "bench_large: $c: summary in $wall s" >&2
    rm -f "$d/draws.csv"
    leap=$(tr -d ' \n' < "$d/draws.csv.json" |
        sed 's/.*"leapfrog_steps":{"warmup":\[\([0-9,]*\)\],"draws":\[\([0-9,]*\)\]}.*/\1,\2/' |
        tr ',' '\n' | awk '{ s += $1 } END { print s }')
    mean=$(awk -F, 'NR > 1 { s += $2 } END { printf "%.2f", s / (NR - 1) }' "$data")
    awk -F, -v c="$c" -v mean="$mean" -v run="$chains x ($warmup + $draws)" -v fit="$fit_s" \
        -v wall="$hmc_wall" -v cpu="$hmc_cpu" -v leap="$leap" \
        -v its="$((chains * (warmup + draws)))" '
        NR == 1 { for (k = 1; k <= NF; k++) col[$k] = k; next }
        $1 ~ /^f\[/ {
            n++
            e = $col["ess_bulk"]; r = $col["rhat"]
            if (n == 1 || e < emin) emin = e
            if (n == 1 || r > rmax) rmax = r
        }
        END {
            printf "%s\t%d\t%s\t%s\t%.1f\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.2f\t%.3f\n", c, n, mean,
                run, fit, wall, cpu, 1e3 * cpu / leap, leap / its, emin, emin / wall, rmax
        }' "$d/summary.csv" | tee -a "$dir/table.tsv"
done
column -t -s "$(printf '\t')" "$dir/table.tsv"
