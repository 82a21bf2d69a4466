#!/bin/bash
# bench_periodic_laplace.sh -- the single-kernel Laplace approximation of a
# damped periodic kernel, two binaries side by side (docs/benchmarks.md,
# "Laplace approximation"): `fit --kernel 'matern32 + periodic(period=52)'
# --likelihood poisson` on a seasonal weekly count series (the generator of
# tests/cli/cases/39_count_series.sh, extended to N weeks), then `gradcheck
# --model` of the fitted model.
#
#   [OUT=DIR] scripts/bench_periodic_laplace.sh OLD_BIN NEW_BIN [N...]  (default N: 416 5000)
#
# e.g. OLD_BIN built at an older commit: git archive COMMIT | tar -x -C /tmp/old &&
# make -C /tmp/old gmm-infer.  One fit per binary and N (fits are deterministic;
# the CPU time is user + sys from /usr/bin/time -v).  Prints a Markdown table.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,13p' "$0" >&2; exit 2; }
old=$1 new=$2
shift 2
ns=("$@")
[[ ${#ns[@]} -gt 0 ]] || ns=(416 5000)
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gmm-bench-periodic.XXXXXX")}
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1

echo "| binary | weeks | fit CPU s | fit wall s | iterations | converged | stop | loglik | gradcheck ok / false / other |"
echo "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |"
for n in "${ns[@]}"; do
    awk -v n="$n" 'BEGIN { s = 7; print "t,y"
        for (t = 0; t < n; t++) {
            L = exp(-exp(1 + 0.8 * sin(2 * 3.14159265 * t / 52) + 0.5 * sin(t / 90))); k = 0
            s = (s * 16807) % 2147483647; p = s / 2147483647
            while (p > L) { k++; s = (s * 16807) % 2147483647; p *= s / 2147483647 }
            print t "," k } }' > "$out/season_$n.csv"
    for which in old new; do
        [[ $which == old ]] && bin=$old || bin=$new
        m=$out/${which}_$n.json
        # fit exits 0 also when not converged ("converged": false in the model)
        /usr/bin/time -v "$bin" fit "$out/season_$n.csv" --likelihood poisson \
            --kernel 'matern32 + periodic(period=52)' --verbose -o "$m" 2> "$out/${which}_$n.fit.log" ||
            { echo "bench_periodic_laplace: $which fit failed (see $out/${which}_$n.fit.log)" >&2; exit 1; }
        t=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 }
            /Elapsed \(wall clock\)/ { n = split($2, a, ":"); w = 0
                for (i = 1; i <= n; i++) w = 60 * w + a[i] }
            END { printf "%.2f | %.2f", u + s, w }' "$out/${which}_$n.fit.log")
        f() { awk -F'[:,] *' -v k="\"$1\"" '$1 ~ k { gsub(/"/, "", $2); print $2; exit }' "$m"; }
        rc=0
        "$bin" gradcheck --model "$m" "$out/season_$n.csv" > "$out/${which}_$n.gc.csv" \
            2> "$out/${which}_$n.gc.log" || rc=$?
        gc=$(awk -F, 'NR > 1 { if ($NF == "true") ok++; else if ($NF == "false") bad++; else o++ }
            END { printf "%d / %d / %d", ok, bad, o }' "$out/${which}_$n.gc.csv")
        echo "| $which | $n | $t | $(f iterations) | $(f converged) | $(f stop) | $(f loglik) | $gc (exit $rc) |"
    done
done
echo
echo "$(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; files in $out"
