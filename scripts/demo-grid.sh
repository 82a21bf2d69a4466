#!/bin/sh
# demo-grid.sh -- `make demo-grid`: the Barro Colorado Island trees
# (Beilschmiedia pendula, spatstat's bei: 3604 trees in a 1000 m x 500 m plot)
# counted in 10 m x 10 m cells (data/bei_grid_cells.csv, 100 x 50 cells, made
# by scripts/make-bei-grid-data.R), the log-Gaussian Cox process of the INLA
# and besag literature as a Poisson lattice model,
#
#   count ~ elev + grad + f(cell, besag, graph=data/bei_grid_edges.csv),
#
# elev and grad the plot's elevation (m) and slope at each cell's centre.
# Outputs in demo/ (or $DEMO_DIR): bei-model.json, bei-pred.csv (predict at
# every cell: the log rate f with its 90% interval and the rate exp(f), the
# expected trees per cell), bei-terms.csv (predict --terms: the coefficients
# and the spatial field), and, with python3-matplotlib (scripts/install-deps.sh
# --demo), the maps bei-rate.png (the posterior mean rate) and bei-field.png
# (the besag field: what elevation and slope leave unexplained), drawn by
# scripts/plot-graph with one square per cell.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${GMM_INFER:-$here/gmm-infer}
out=${DEMO_DIR:-$here/demo}
cells="$here/data/bei_grid_cells.csv"
graph="$here/data/bei_grid_edges.csv"
mkdir -p "$out"

echo "demo-grid: bei trees, 5000 cells of 10 m: besag + elev + grad, Poisson (Laplace)" >&2
start=$(date +%s.%N)
"$bin" fit "$cells" --likelihood poisson --verbose \
    --formula "count ~ elev + grad + f(cell, besag, graph=$graph)" -o "$out/bei-model.json"
end=$(date +%s.%N)
"$bin" predict --model "$out/bei-model.json" -o "$out/bei-pred.csv"
"$bin" predict --terms --model "$out/bei-model.json" -o "$out/bei-terms.csv"
awk -v a="$start" -v b="$end" 'BEGIN { printf "demo-grid: fitted in %.1f s\n", b - a }' >&2
grep -A 5 '"parameters"' "$out/bei-model.json" >&2

if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    echo "demo-grid: python3-matplotlib not installed (scripts/install-deps.sh --demo); no maps" >&2
    exit 0
fi
# predict's rows are the data rows, and row r is cell r (the file lists cells 1.. in order).
"$here/scripts/plot-graph" --nodes "$cells" --node cell --predict-node row \
    --predict "$out/bei-pred.csv" --value rate --tile 10 --cmap magma \
    --title "bei: posterior mean rate (trees per 10 m cell), besag + elev + grad" \
    -o "$out/bei-rate.png"
awk -F, 'BEGIN { print "cell,field" } $1 == "f.cell" { print $2 "," $3 }' \
    "$out/bei-terms.csv" > "$out/bei-field.csv"
# A colour scale symmetric about 0: red above the covariates' prediction, blue below.
m=$(awk -F, 'NR > 1 { v = $2 < 0 ? -$2 : $2; if (v > m) m = v } END { print m }' \
    "$out/bei-field.csv")
"$here/scripts/plot-graph" --nodes "$cells" --node cell --predict "$out/bei-field.csv" \
    --value field --tile 10 --cmap RdBu_r --vmin "-$m" --vmax "$m" \
    --title "bei: spatial effect f(cell, besag) on the log rate (posterior mean)" \
    -o "$out/bei-field.png"
echo "demo-grid: maps written to $out/bei-rate.png, bei-field.png" >&2
