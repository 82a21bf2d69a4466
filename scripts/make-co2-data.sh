#!/bin/sh
# make-co2-data.sh -- derive data/co2.csv, data/co2_train.csv and
# data/co2_test.csv from the weekly Mauna Loa record (see data/README.md).
#
#   scripts/make-co2-data.sh [SOURCE.csv [OUTDIR]]
#
# SOURCE defaults to /work/shared/data/co2_mauna_loa_weekly.csv (columns
# date_yyyymmdd,days_since_1958_03_29,decimal_year,co2_ppm), OUTDIR to data/.
# Output columns: decimal_year,co2_ppm.  Missing weeks stay as rows with
# co2_ppm = NaN.  Train: weeks before 1998-01-01; test: 1998 on.
#
# decimal_year is recomputed from the date as year + (day of year - 1) /
# (days in year) and printed with %.17g, so it round-trips as a double (the
# source column is that value rounded to 6 decimals; the script checks the
# two agree).  co2_ppm is copied verbatim: the source's one-decimal text is
# already exact, and reprinting it through a double would only add noise
# digits.  POSIX sh + awk; deterministic; files replaced atomically.
set -eu

src=${1:-/work/shared/data/co2_mauna_loa_weekly.csv}
out=${2:-data}
split=19980101

[ -r "$src" ] || { echo "make-co2-data.sh: cannot read '$src'" >&2; exit 1; }
mkdir -p "$out"

tmp_all="$out/.co2.csv.$$"
tmp_train="$out/.co2_train.csv.$$"
tmp_test="$out/.co2_test.csv.$$"
trap 'rm -f "$tmp_all" "$tmp_train" "$tmp_test"' EXIT INT TERM

LC_ALL=C awk -F, -v split_date="$split" \
    -v f_all="$tmp_all" -v f_train="$tmp_train" -v f_test="$tmp_test" '
function die(msg) {
    printf "make-co2-data.sh: %s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"
    failed = 1
    exit 1
}
function leap(y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }
BEGIN {
    split("31 28 31 30 31 30 31 31 30 31 30 31", mdays, " ")
    hdr = "decimal_year,co2_ppm"
    print hdr > f_all; print hdr > f_train; print hdr > f_test
}
FNR == 1 {
    if ($0 != "date_yyyymmdd,days_since_1958_03_29,decimal_year,co2_ppm")
        die("unexpected header: " $0)
    next
}
{
    if (NF != 4) die("expected 4 fields, got " NF)
    if (length($1) != 8 || $1 ~ /[^0-9]/) die("bad date " $1)
    y = substr($1, 1, 4) + 0; m = substr($1, 5, 2) + 0; d = substr($1, 7, 2) + 0
    ml = mdays[m] + (m == 2 && leap(y))
    if (m < 1 || m > 12 || d < 1 || d > ml) die("bad date " $1)
    doy = d
    for (k = 1; k < m; k++) doy += mdays[k] + (k == 2 && leap(y))
    dec = y + (doy - 1) / (365 + leap(y))
    diff = dec - $3; if (diff < 0) diff = -diff
    if (diff > 6e-7) die(sprintf("decimal_year %s disagrees with date %s (%.17g)", $3, $1, dec))
    if (rows > 0 && $2 - prev_days != 7) die("not a 7-day step after day " prev_days)
    prev_days = $2
    if ($4 == "NaN") { missing++ }
    else if ($4 !~ /^[0-9]+(\.[0-9]+)?$/) die("co2_ppm not a number: " $4)
    line = sprintf("%.17g,%s", dec, $4)
    print line > f_all
    if ($1 < split_date) { print line > f_train; ntrain++ }
    else { print line > f_test; ntest++ }
    rows++
}
END {
    if (failed) exit 1
    if (rows == 0) { print "make-co2-data.sh: no data rows" > "/dev/stderr"; exit 1 }
    printf "make-co2-data.sh: %d rows (%d missing): %d train (before %s), %d test\n", \
        rows, missing, ntrain, split_date, ntest > "/dev/stderr"
}' "$src"

mv "$tmp_all" "$out/co2.csv"
mv "$tmp_train" "$out/co2_train.csv"
mv "$tmp_test" "$out/co2_test.csv"
trap - EXIT INT TERM
