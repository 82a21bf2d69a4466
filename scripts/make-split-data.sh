#!/bin/sh
# make-split-data.sh -- the held-out splits of the VI experiment (docs/benchmarks.md,
# "Variational inference and held-out scores"), from the shipped data:
#
#   data/flu_even.csv, data/flu_odd.csv   per-district totals of the even
#       weeks (t = 0, 2, ..., 414) and of the odd weeks (t = 1, ..., 415) of
#       data/flu_bybw_weekly_counts.csv; columns node,count,population_2001
#       (the population is the exposure of both halves).  Not a split in
#       time: counts grew 3.6-fold from the first half of the record to the
#       second, so a split in time would measure the trend.
#   data/chicago_train.csv, data/chicago_test.csv   the crimes of
#       data/chicago_crime_events.csv thinned: each event to train or test
#       with probability 1/2 (a fixed linear congruential sequence, seed 1,
#       so the split is the same on every machine); columns node,count,weight
#       with every node of data/chicago_road_nodes.csv (0 where none).
#
#   scripts/make-split-data.sh [OUTDIR]      (default data/)
# POSIX sh + awk; deterministic; files replaced atomically.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/data}
tmp=$(mktemp -d "$out/.split.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# influenza: columns n0..n139 of the weekly counts, summed by parity of t
awk -F, -v pop="$here/data/flu_bybw_nodes.csv" -v ev="$tmp/flu_even.csv" -v od="$tmp/flu_odd.csv" '
BEGIN {
    while ((getline line < pop) > 0) {
        n = split(line, f, ",")
        if (f[1] == "node") { for (k = 1; k <= n; k++) if (f[k] == "population_2001") pc = k; continue }
        p[f[1]] = f[pc]; nodes[++nn] = f[1]
    }
}
NR == 1 { for (k = 1; k <= NF; k++) if ($k ~ /^n[0-9]+$/) col[substr($k, 2)] = k; next }
{ par = $1 % 2; for (v in col) s[par, v] += $(col[v]) }
END {
    print "node,count,population_2001" > ev; print "node,count,population_2001" > od
    for (i = 1; i <= nn; i++) {
        v = nodes[i]
        printf "%s,%d,%s\n", v, s[0, v], p[v] > ev
        printf "%s,%d,%s\n", v, s[1, v], p[v] > od
    }
}' "$here/data/flu_bybw_weekly_counts.csv"

# Chicago: thin the events with a fixed LCG (glibc's constants), seed 1
awk -F, -v nodes="$here/data/chicago_road_nodes.csv" -v tr="$tmp/chicago_train.csv" -v te="$tmp/chicago_test.csv" '
BEGIN {
    while ((getline line < nodes) > 0) {
        n = split(line, f, ",")
        if (f[1] == "node") { for (k = 1; k <= n; k++) if (f[k] == "weight") wc = k; continue }
        w[f[1]] = f[wc]; order[++nn] = f[1]
    }
    state = 1
}
NR == 1 { for (k = 1; k <= NF; k++) if ($k == "node") nc = k; next }
{
    state = (1103515245 * state + 12345) % 2147483648
    if (int(state / 65536) % 2 == 0) a[$nc]++; else b[$nc]++
}
END {
    print "node,count,weight" > tr; print "node,count,weight" > te
    for (i = 1; i <= nn; i++) {
        v = order[i]
        printf "%s,%d,%s\n", v, a[v] + 0, w[v] > tr
        printf "%s,%d,%s\n", v, b[v] + 0, w[v] > te
    }
}' "$here/data/chicago_crime_events.csv"

for f in flu_even flu_odd chicago_train chicago_test; do mv "$tmp/$f.csv" "$out/$f.csv"; done
