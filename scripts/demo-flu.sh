#!/bin/sh
# demo-flu.sh -- `make demo-flu`: the weekly influenza counts of 140 districts
# of Bavaria and Baden-Wuerttemberg (data/flu_bybw_*.csv, 2001-2008) as a
# space-time Poisson model with the district's population as exposure,
#
#   n ~ f(district, bym2, graph=data/flu_bybw_edges.csv)
#       + f(week_of_year, rw2, cyclic) + f(t, rw1),
#
# fitted with the last HOLDOUT weeks (default 8) left out and those weeks
# scored (`score`) against a district x week interaction (besag (x) ar1,
# Knorr-Held type IV, + rw1 in time), the single-graph model (bym2 alone) and the
# independent per-district Gamma-Poisson baseline
# (scripts/baseline_gamma_poisson.py, when python3-scipy is installed).
#
# Outputs in demo/ (or $DEMO_DIR): flu_long.csv, flu_train.csv, flu_test.csv
# (scripts/make-flu-long.sh), flu-st-model.json, flu-st-rows.csv (predict at
# every row), flu-st-terms.csv (predict --terms), flu-stx-model.json (the
# interaction), flu-graph-model.json,
# flu-summary.json (stdout too); with gnuplot, from flu-st-terms.csv:
# flu-season.png (the seasonal term over the weeks of the year),
# flu-trend.png (the rw1 trend over the weeks t), each with its 90% interval,
# and flu-district.png (the district effect b at the districts' coordinates,
# data/flu_bybw_nodes.csv, on the graph's edges).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${GMM_INFER:-$here/gmm-infer}
out=${DEMO_DIR:-$here/demo}
hold=${HOLDOUT:-8}
mkdir -p "$out"
"$here/scripts/make-flu-long.sh" "$out" "$hold"
graph="$here/data/flu_bybw_edges.csv"

num() { sed -n "s/^ *\"$2\": \([^,]*\),*\$/\1/p" "$1" | head -n 1; }

echo "demo-flu: space-time fit (bym2 + cyclic rw2 + rw1, Laplace) on $out/flu_train.csv" >&2
start=$(date +%s.%N)
"$bin" fit "$out/flu_train.csv" --likelihood poisson --exposure population --verbose \
    --formula "n ~ f(district, bym2, graph=$graph) + f(week_of_year, rw2, cyclic) + f(t, rw1)" \
    -o "$out/flu-st-model.json"
end=$(date +%s.%N)
"$bin" predict --model "$out/flu-st-model.json" -o "$out/flu-st-rows.csv"
"$bin" score --model "$out/flu-st-model.json" "$out/flu_test.csv" > "$out/flu-st-score.json"
"$bin" predict --terms --model "$out/flu-st-model.json" -o "$out/flu-st-terms.csv"

echo "demo-flu: single-graph fit (bym2 alone)" >&2
"$bin" fit "$out/flu_train.csv" --likelihood poisson --exposure population \
    --formula "n ~ f(district, bym2, graph=$graph)" -o "$out/flu-graph-model.json"
"$bin" score --model "$out/flu-graph-model.json" "$out/flu_test.csv" > "$out/flu-graph-score.json"

# The district x week interaction (Knorr-Held type IV: besag in space, ar1
# across the weeks, stack_kron.c) with the weekly level as an rw1.  The
# district and seasonal main effects of the space-time model cannot join it:
# a district effect read in every week links all 416 week slices (the
# stacked band: n = 59040, bandwidth 58025, 27 GB), the week of the year
# every year's slices; the interaction's own field carries both (rho near 1).
# Its column is a copy of district (two f() terms on one column would share
# their parameter names).  Over all 416 weeks (n = 58656, bandwidth 208, band
# 98 MB, 417 constraints, 1.3 GB resident) one evaluation of the Laplace
# objective takes minutes, so by default the interaction is fitted on the
# last IWEEKS (52) training weeks (and the HOLDOUT weeks, whose rows the
# training file carries without counts), scored on the same held-out rows as
# the others; IWEEKS=0 fits all weeks.
iweeks=${IWEEKS:-52}
for f in train test; do
    awk -F, -v w="$iweeks" -v h="$hold" 'BEGIN { OFS = "," }
        NR == FNR { if (FNR > 1 && $2 + 0 > m) m = $2 + 0; next }
        FNR == 1 { print $0, "area"; next }
        w == 0 || $2 + 0 > m - w - h { print $0, $1 }' \
        "$out/flu_train.csv" "$out/flu_$f.csv" > "$out/flu_${f}_area.csv"
done
echo "demo-flu: district x week interaction (besag (x) ar1 + rw1, Laplace)" >&2
istart=$(date +%s.%N)
"$bin" fit "$out/flu_train_area.csv" --likelihood poisson --exposure population --verbose \
    --formula "n ~ f(t, rw1) + f(area, besag, graph=$graph, group=t, control=ar1)" \
    -o "$out/flu-stx-model.json"
iend=$(date +%s.%N)
"$bin" score --model "$out/flu-stx-model.json" "$out/flu_test_area.csv" > "$out/flu-stx-score.json"

baseline=null
if "$here/scripts/baseline_gamma_poisson.py" "$out/flu_train.csv" "$out/flu_test.csv" \
    --node district --y n --exposure population --rows > "$out/flu-baseline.json"; then
    baseline=$(num "$out/flu-baseline.json" lpd)
else
    echo "demo-flu: no Gamma-Poisson baseline (it needs python3-scipy)" >&2
fi
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
isecs=$(awk -v a="$istart" -v b="$iend" 'BEGIN { printf "%.1f", b - a }')
cat > "$out/flu-summary.json" <<JSON
{
  "model": "n ~ f(district, bym2) + f(week_of_year, rw2, cyclic) + f(t, rw1), poisson, exposure population",
  "held_out_weeks": $hold,
  "n_test": $(num "$out/flu-st-score.json" n),
  "train_loglik": $(num "$out/flu-st-model.json" loglik),
  "fit_seconds": $secs,
  "lpd_space_time": $(num "$out/flu-st-score.json" lpd),
  "lpd_interaction": $(num "$out/flu-stx-score.json" lpd),
  "interaction_model": "n ~ f(t, rw1) + f(area = district, besag, group = t, control = ar1)",
  "interaction_weeks": $iweeks,
  "interaction_fit_seconds": $isecs,
  "interaction_rho": $(num "$out/flu-stx-model.json" f.area.group.rho),
  "lpd_single_graph": $(num "$out/flu-graph-score.json" lpd),
  "lpd_gamma_poisson": $baseline
}
JSON
cat "$out/flu-summary.json"

if ! command -v gnuplot >/dev/null 2>&1; then
    echo "demo-flu: gnuplot not installed (scripts/install-deps.sh --demo); no plots" >&2
    exit 0
fi
# Term TERM of flu-st-terms.csv as plot-predict reads it: x,mean,lower,upper,
# level, the marginal 90% interval mean -+ 1.645 sd.
term_band() {
    awk -F, -v t="$1" 'BEGIN { print "x,mean,lower,upper,level"; z = 1.6448536269514722 }
        $1 == t { printf "%s,%s,%.10g,%.10g,0.9\n", $2, $3, $3 - z * $4, $3 + z * $4 }' \
        "$out/flu-st-terms.csv" > "$2"
}
term_band f.week_of_year "$out/flu-season.csv"
term_band f.t "$out/flu-trend.csv"
"$here/scripts/plot-predict" --predict "$out/flu-season.csv" \
    --title "influenza: seasonal effect f(week_of_year, rw2, cyclic) on the log rate" \
    --xlabel "week of the year" --ylabel "effect on log rate" \
    --band-label "interval of the effect" -o "$out/flu-season.png"
"$here/scripts/plot-predict" --predict "$out/flu-trend.csv" \
    --title "influenza: trend f(t, rw1) on the log rate (weeks since 2001, the last $hold held out)" \
    --xlabel "week t" --ylabel "effect on log rate" --split "$(awk -F, -v h="$hold" \
        'NR > 1 && $2 + 0 > m { m = $2 + 0 } END { print m - h + 0.5 }' "$out/flu_long.csv")" \
    --band-label "interval of the effect" -o "$out/flu-trend.png"

# The district effect b at the districts' coordinates, over the graph's edges.
awk -F, 'FILENAME ~ /terms/ { if ($1 == "f.district") b[$2] = $3; next }
    FNR == 1 { next } { print $3, $4, ($1 in b) ? b[$1] : "NaN" }' \
    "$out/flu-st-terms.csv" "$here/data/flu_bybw_nodes.csv" > "$out/flu-district.dat"
awk -F, 'FILENAME ~ /nodes/ { if (FNR > 1) { x[$1] = $3; y[$1] = $4 }; next }
    FNR > 1 && ($1 in x) && ($2 in x) { print x[$1], y[$1], x[$2] - x[$1], y[$2] - y[$1] }' \
    "$here/data/flu_bybw_nodes.csv" "$graph" > "$out/flu-edges.dat"
term=png
gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 && term=pngcairo
tmp="$out/flu-district.png.tmp"
gnuplot <<GP
set terminal $term size 900,900
set output '$tmp'
set title 'influenza: district effect b of f(district, bym2) on the log rate (posterior mean)'
set size ratio -1
unset xtics; unset ytics; unset border
set palette defined (0 '#2166ac', 0.5 '#f7f7f7', 1 '#b2182b')
stats '$out/flu-district.dat' using 3 nooutput
m = abs(STATS_min) > abs(STATS_max) ? abs(STATS_min) : abs(STATS_max)
set cbrange [-m:m]
set cblabel 'b'
plot '$out/flu-edges.dat' using 1:2:3:4 with vectors nohead lc rgb '#bbbbbb' notitle, \
     '$out/flu-district.dat' using 1:2:3 with points pt 7 ps 2.2 palette notitle
GP
mv -f "$tmp" "$out/flu-district.png"
echo "demo-flu: plots written to $out/flu-season.png, flu-trend.png, flu-district.png" >&2
