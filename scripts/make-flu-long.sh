#!/bin/sh
# make-flu-long.sh -- the weekly influenza counts (data/flu_bybw_weekly_counts.csv,
# one column per district) in long form for a space-time formula: one row per
# district and week, with the district's 2001 population as exposure.
#
#   scripts/make-flu-long.sh OUTDIR [HOLDOUT]
#
# Writes OUTDIR/flu_long.csv (district,t,week_of_year,n,population: all 416 x
# 140 rows), OUTDIR/flu_train.csv (the same with n = NaN in the last HOLDOUT
# weeks, default 8) and OUTDIR/flu_test.csv (the held-out rows). t counts weeks
# from 0; week_of_year is the source's week (1-52). POSIX sh and awk only.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=$1
hold=${2:-8}
mkdir -p "$out"
awk -F, -v hold="$hold" -v out="$out" '
    FNR == 1 { next }
    FILENAME ~ /nodes/ { pop[$1] = $6; next }
    { row[++nr] = $0 }
    END {
        long = out "/flu_long.csv"; train = out "/flu_train.csv"; test = out "/flu_test.csv"
        hdr = "district,t,week_of_year,n,population"
        print hdr > long; print hdr > train; print hdr > test
        for (r = 1; r <= nr; r++) {
            nf = split(row[r], c, ",")
            t = c[1]; w = c[3]
            for (d = 0; d + 4 <= nf; d++) {
                line = d "," t "," w
                print line "," c[d + 4] "," pop[d] > long
                if (t >= nr - hold) {
                    print line ",NaN," pop[d] > train
                    print line "," c[d + 4] "," pop[d] > test
                } else {
                    print line "," c[d + 4] "," pop[d] > train
                }
            }
        }
    }' "$here/data/flu_bybw_nodes.csv" "$here/data/flu_bybw_weekly_counts.csv"
