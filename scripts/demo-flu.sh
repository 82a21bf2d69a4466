#!/bin/sh
# demo-flu.sh -- `make demo-flu`: the weekly influenza counts of 140 districts
# of Bavaria and Baden-Wuerttemberg (data/flu_bybw_*.csv, 2001-2008) as a
# space-time Poisson model with the district's population as exposure,
#
#   n ~ f(district, bym2, graph=data/flu_bybw_edges.csv)
#       + f(week_of_year, rw2) + f(t, rw1),
#
# fitted with the last HOLDOUT weeks (default 8) left out and those weeks
# scored (`score`) against the single-graph model (bym2 alone) and the
# independent per-district Gamma-Poisson baseline
# (scripts/baseline_gamma_poisson.py, when python3-scipy is installed).
#
# Outputs in demo/ (or $DEMO_DIR): flu_long.csv, flu_train.csv, flu_test.csv
# (scripts/make-flu-long.sh), flu-st-model.json, flu-st-rows.csv (predict at
# every row), flu-graph-model.json, flu-summary.json (stdout too).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${GMM_INFER:-$here/gmm-infer}
out=${DEMO_DIR:-$here/demo}
hold=${HOLDOUT:-8}
mkdir -p "$out"
"$here/scripts/make-flu-long.sh" "$out" "$hold"
graph="$here/data/flu_bybw_edges.csv"

num() { sed -n "s/^ *\"$2\": \([^,]*\),*\$/\1/p" "$1" | head -n 1; }

echo "demo-flu: space-time fit (bym2 + rw2 + rw1, Laplace) on $out/flu_train.csv" >&2
start=$(date +%s.%N)
"$bin" fit "$out/flu_train.csv" --likelihood poisson --exposure population --verbose \
    --formula "n ~ f(district, bym2, graph=$graph) + f(week_of_year, rw2) + f(t, rw1)" \
    -o "$out/flu-st-model.json"
end=$(date +%s.%N)
"$bin" predict --model "$out/flu-st-model.json" -o "$out/flu-st-rows.csv"
"$bin" score --model "$out/flu-st-model.json" "$out/flu_test.csv" > "$out/flu-st-score.json"

echo "demo-flu: single-graph fit (bym2 alone)" >&2
"$bin" fit "$out/flu_train.csv" --likelihood poisson --exposure population \
    --formula "n ~ f(district, bym2, graph=$graph)" -o "$out/flu-graph-model.json"
"$bin" score --model "$out/flu-graph-model.json" "$out/flu_test.csv" > "$out/flu-graph-score.json"

baseline=null
if "$here/scripts/baseline_gamma_poisson.py" "$out/flu_train.csv" "$out/flu_test.csv" \
    --node district --y n --exposure population --rows > "$out/flu-baseline.json"; then
    baseline=$(num "$out/flu-baseline.json" lpd)
else
    echo "demo-flu: no Gamma-Poisson baseline (it needs python3-scipy)" >&2
fi
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
cat > "$out/flu-summary.json" <<JSON
{
  "model": "n ~ f(district, bym2) + f(week_of_year, rw2) + f(t, rw1), poisson, exposure population",
  "held_out_weeks": $hold,
  "n_test": $(num "$out/flu-st-score.json" n),
  "train_loglik": $(num "$out/flu-st-model.json" loglik),
  "fit_seconds": $secs,
  "lpd_space_time": $(num "$out/flu-st-score.json" lpd),
  "lpd_single_graph": $(num "$out/flu-graph-score.json" lpd),
  "lpd_gamma_poisson": $baseline
}
JSON
cat "$out/flu-summary.json"
