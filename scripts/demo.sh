#!/bin/sh
# demo.sh -- the README's main job (`make demo`): the paper's CO2 experiment
# on the shipped weekly Mauna Loa record.
#
#   1. fit matern32 + quasiperiodic(period=1, harmonics=2) (period held at one
#      year) to the weeks before 1998 (data/co2_train.csv);
#   2. forecast 1998-2001 (data/co2_test.csv) with --observed intervals and
#      report the test mean log predictive density of y;
#   3. plot data, forecast and its 90% band to demo/co2.png (gnuplot).
#
# Outputs in demo/ (or $DEMO_DIR): co2-model.json, co2-test-predict.csv,
# co2-grid-predict.csv, co2.png, and co2-summary.json (stdout too).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${GMM_INFER:-$here/gmm-infer}
out=${DEMO_DIR:-$here/demo}
mkdir -p "$out"

echo "demo: fitting the CO2 model on data/co2_train.csv" >&2
start=$(date +%s.%N)
"$bin" fit "$here/data/co2_train.csv" --verbose -o "$out/co2-model.json"
end=$(date +%s.%N)

"$bin" predict --model "$out/co2-model.json" --at "$here/data/co2_test.csv" --observed \
    -o "$out/co2-test-predict.csv"
"$bin" predict --model "$out/co2-model.json" --grid 1958:2002:0.01 --observed \
    -o "$out/co2-grid-predict.csv"

# Mean log predictive density of the test y under N(mean, var) (var includes
# the noise: --observed).  Rows are in the test file's order; the test's y
# is the last column of each pasted row.
mlpd=$(paste -d, "$out/co2-test-predict.csv" "$here/data/co2_test.csv" | awk -F, '
    NR == 1 { for (k = 1; k <= NF; k++) col[$k] = k; m = col["mean"]; v = col["var"]; next }
    $NF != "NaN" && $NF != "" {
        d = $NF - $m; s += -0.5 * log(2 * 3.141592653589793 * $v) - 0.5 * d * d / $v; n++
    }
    END { if (n == 0) exit 1; printf "%.4f %d", s / n, n }')
loglik=$(sed -n 's/^ *"loglik": \(.*\),$/\1/p' "$out/co2-model.json")
converged=$(sed -n 's/^ *"converged": \(.*\),$/\1/p' "$out/co2-model.json")
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
set -- $mlpd
cat > "$out/co2-summary.json" <<JSON
{
  "model": "matern32 + quasiperiodic(period=1, harmonics=2)",
  "train": "data/co2_train.csv",
  "test": "data/co2_test.csv",
  "train_loglik": $loglik,
  "converged": $converged,
  "fit_seconds": $secs,
  "test_mlpd": $1,
  "n_test": $2
}
JSON
cat "$out/co2-summary.json"

if command -v gnuplot >/dev/null 2>&1; then
    "$here/scripts/plot-predict" --predict "$out/co2-grid-predict.csv" --size 1200,900 \
        --data "$here/data/co2_train.csv" --test "$here/data/co2_test.csv" \
        --title "gmm-infer: Mauna Loa CO2, trained before 1998, forecast 1998-2001" \
        --xlabel "year" --ylabel "CO2 (ppm)" --split 1998 --zoom 1995:2002 \
        --band-label "interval of a new observation (noise included)" -o "$out/co2.png"
    echo "demo: plot written to $out/co2.png" >&2
else
    echo "demo: gnuplot not installed (scripts/install-deps.sh --demo); no plot" >&2
fi

# Counts through the Laplace approximation: the yearly coal-mining disasters
# (exposure: the part of 1851 and 1962 the record covers) and the influenza
# totals of the 140 districts (population as exposure).
echo "demo: Poisson fit of data/coal.csv (matern32, Laplace)" >&2
"$bin" fit "$here/data/coal.csv" --likelihood poisson --exposure exposure --kernel matern32 \
    -o "$out/coal-model.json"
"$bin" predict --model "$out/coal-model.json" --grid 1851:1962.2:0.1 -o "$out/coal-rate.csv"
echo "demo: Poisson fit of the influenza district totals (edge-ou graph, Laplace)" >&2
"$bin" fit "$here/data/flu_bybw_nodes.csv" --graph "$here/data/flu_bybw_edges.csv" \
    --node node --y count_total --exposure population_2001 --likelihood poisson \
    --precision 'edge-ou(variance=1, lengthscale=300)' -o "$out/flu-model.json"
"$bin" predict --model "$out/flu-model.json" -o "$out/flu-rate.csv"
if command -v gnuplot >/dev/null 2>&1; then
    "$here/scripts/plot-predict" --predict "$out/coal-rate.csv" --data "$here/data/coal.csv" \
        --per exposure --band rate,rate_lower,rate_upper \
        --title "gmm-infer: coal-mining disasters, Poisson GP (matern32), Laplace" \
        --xlabel "year" --ylabel "disasters per year" \
        --band-label "interval of the rate exp(b + f)" \
        -o "$out/coal-rate.png"
    echo "demo: plot written to $out/coal-rate.png" >&2
fi
