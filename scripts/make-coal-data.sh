#!/bin/sh
# make-coal-data.sh -- derive data/coal.csv from the annual coal-mining
# disaster counts (see data/README.md).
#
#   scripts/make-coal-data.sh [SOURCE.csv [OUTDIR]]
#
# SOURCE defaults to /work/shared/data/coal_disasters_annual.csv (columns
# year,count), OUTDIR to data/.  Output columns: year,count,exposure, where
# exposure is the fraction of the year the record covers: it runs from 15
# March 1851 (day 74 of 365) to 22 March 1962 (day 81 of 365), so 1851 has
# exposure 292/365 and 1962 81/365; every other year 1.  POSIX sh + awk;
# deterministic; the file is replaced atomically.
set -eu
src=${1:-/work/shared/data/coal_disasters_annual.csv}
out=${2:-data}
tmp=$(mktemp "$out/.coal.XXXXXX")
trap 'rm -f "$tmp"' EXIT
awk -F, 'NR == 1 { if ($1 != "year" || $2 != "count") { print "unexpected header: " $0 > "/dev/stderr"; exit 1 }
                   print "year,count,exposure"; next }
         { e = 1
           if ($1 == 1851) e = 292 / 365
           if ($1 == 1962) e = 81 / 365
           printf "%s,%s,%.17g\n", $1, $2, e }' "$src" > "$tmp"
mv "$tmp" "$out/coal.csv"
trap - EXIT
