#!/bin/bash
# bench_stack_sqrt.sh -- cost of a stacked formula model against n
# (docs/benchmarks.md, "Stacked kernel terms against n"): a weekly series
# with a quarterly grouping, y ~ f(t, KERNEL) + f(g, iid), g = floor(t / 13),
# Gaussian and Poisson, n rows, under two kernels:
#   sqrt: 'matern32 + periodic(period=52)' (damped zero-noise factor: the
#         square-root form, src/model/stack/stack_sqrt.c)
#   chol: 'matern32 + matern12*periodic(period=52)' (no damped factor: the
#         assembled banded Cholesky)
# For each case and n in NS: `fit` (default settings) if n is in FIT_NS,
# then REPS timings of `loglik --model M DATA_n` (value + gradient), M the
# model fitted at the smallest n, so that every n is evaluated at the same
# hyperparameters; each timing runs ceil(1e4 / n) calls, so /usr/bin/time's
# 10 ms resolution stays small against it.  The time is CPU (user + sys from
# /usr/bin/time -v: the machine may be shared), per call, median over REPS,
# the whole process (start, CSV, setup, one evaluation); the fit's CPU per
# evaluation is the fit's CPU over its evaluations.  Peak RSS likewise.
#
#   GMM_INFER=build/release/gmm-infer [NS="1000 10000 100000"] \
#     [FIT_NS="1000 10000"] [REPS=5] [LIKS="gauss pois"] [FORMS="sqrt chol"] \
#     [OUT=DIR] [BENCH_QUICK=1] scripts/bench_stack_sqrt.sh
#
# BENCH_QUICK: NS="1000 10000", FIT_NS=1000, REPS=3.  Data are deterministic
# (numpy seed 1).  Prints a Markdown table; files (data, models, logs) in
# OUT.  The defaults take about 20 minutes of CPU, most of it the fits at
# 1e4 (Poisson: 5 minutes); 4.5 GB peak at n = 1e5; quick about 2 minutes.
set -euo pipefail

bin=${GMM_INFER:-build/release/gmm-infer}
if [[ -n "${BENCH_QUICK:-}" ]]; then ns=${NS:-"1000 10000"} fit_ns=${FIT_NS:-1000} reps=${REPS:-3}
else ns=${NS:-"1000 10000 100000"} fit_ns=${FIT_NS:-"1000 10000"} reps=${REPS:-5}; fi
fit_ns="${ns%% *} $fit_ns" # the smallest n's fit gives every loglik its model
reps_rows=10000 # loglik calls per timing: ceil(reps_rows / n)
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gmm-bench-stack.XXXXXX")}
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
[[ -x /usr/bin/time ]] || { echo "bench_stack_sqrt: needs /usr/bin/time (GNU time)" >&2; exit 1; }

# gen N: $out/{gauss,pois}_N.csv, columns t, g, y
gen() {
    /usr/bin/python3 - "$1" "$out" <<'EOF'
import sys
import numpy as np
n, out = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(1)
t = np.arange(n)
g = t // 13
u = rng.normal(0.0, 0.3, g[-1] + 1)[g]
eta = 0.8 * np.sin(2 * np.pi * t / 52) + 0.5 * np.sin(t / 90.0) + u
yg = eta + rng.normal(0.0, 0.5, n)
yp = rng.poisson(np.exp(1.0 + eta))
for name, y, fmt in (("gauss", yg, "%.6f"), ("pois", yp, "%d")):
    with open(f"{out}/{name}_{n}.csv", "w") as f:
        f.write("t,g,y\n")
        for i in range(n):
            f.write(f"{t[i]},q{g[i]},{fmt % y[i]}\n")
EOF
}

# timed LOG CMD...: run CMD under /usr/bin/time -v into LOG; echo "cpu_s wall_s rss_kb"
timed() {
    local log=$1; shift
    /usr/bin/time -v "$@" > "$log.out" 2> "$log" || {
        echo "bench_stack_sqrt: failed: $* (see $log)" >&2; echo "nan nan 0"; return; }
    awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 }
        /Elapsed \(wall clock\)/ { n = split($2, a, ":"); w = 0
            for (i = 1; i <= n; i++) w = 60 * w + a[i] }
        /Maximum resident/ { r = $2 }
        END { printf "%.3f %.2f %d\n", u + s, w, r }' "$log"
}

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

declare -A kern=([sqrt]='matern32 + periodic(period=52)' [chol]='matern32 + matern12*periodic(period=52)')
: > "$out/rows"
for n in $ns; do gen "$n"; done
ref=${ns%% *}
for lik in ${LIKS:-gauss pois}; do
    [[ $lik == pois ]] && ll=poisson || ll=gaussian
    for form in ${FORMS:-sqrt chol}; do
        for n in $ns; do
            base=$out/${lik}_${n}_$form
            fit="- - - - - - -"
            if [[ " $fit_ns " == *" $n "* ]]; then
                read -r fcpu fwall frss < <(timed "$base.fit.log" "$bin" fit "$out/${lik}_$n.csv" \
                    --formula "y ~ f(t, '${kern[$form]}') + f(g, iid)" --likelihood "$ll" \
                    --verbose -o "$base.json")
                its=$(awk -F'[:,] *' '/"iterations"/ { print $2 }' "$base.json")
                conv=$(awk -F'[:,] *' '/"converged"/ { print $2 }' "$base.json")
                evals=$(grep -o '[0-9]* evaluations' "$base.fit.log" | tail -1 | cut -d' ' -f1 || true)
                fit="$fcpu $fwall $frss $its $conv ${evals:--} $(awk -v c="$fcpu" -v e="${evals:-0}" \
                    'BEGIN { if (e > 0) printf "%.4f", c / e; else print "-" }')"
            fi
            # loglik: the model fitted at the smallest n, read with this n's data; K calls
            # per timing so that /usr/bin/time's 10 ms resolution is a few percent of it at most
            k=$(( (reps_rows + n - 1) / n )); ((k >= 1)) || k=1
            : > "$base.ll"
            for ((r = 0; r < reps; r++)); do
                # shellcheck disable=SC2016 # expanded by the inner bash
                timed "$base.ll.log" bash -c 'for ((i = 0; i < $3; i++)); do
                    "$0" loglik --verbose --model "$1" "$2" > "$1.ll.out" 2> "$1.ll.err" || exit 1; done' \
                    "$bin" "$out/${lik}_${ref}_$form.json" "$out/${lik}_$n.csv" "$k" >> "$base.ll"
            done
            lcpu=$(awk -v k="$k" '{ print $1 / k }' "$base.ll" | median)
            lrss=$(cut -d' ' -f3 "$base.ll" | median)
            m=$out/${lik}_${ref}_$form.json
            fact=$(grep -o '"factorisation": "[a-z-]*"' "$m.ll.out" | cut -d'"' -f4)
            bw=$(grep -o '"bandwidth": [0-9]*' "$m.ll.out" | grep -o '[0-9]*$')
            nlat=$(grep -o 'stack latent model: [0-9]*' "$m.ll.err" | grep -o '[0-9]*$' || true)
            [[ -n $nlat ]] || nlat=$(grep -o 'n = [0-9]*' "$m.ll.err" | head -1 | grep -o '[0-9]*$')
            echo "$lik $n $form $fact $bw $nlat $k $lcpu $lrss $fit" >> "$out/rows"
        done
    done
done

echo "$(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'),"\
    "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; loglik: median of $reps timings; files in $out"
echo
echo "| likelihood | kernel | form | n | latents | bandwidth | loglik CPU s | per row us | loglik peak RSS MB | fit CPU s | fit wall s | fit peak RSS MB | its | converged | evaluations | fit CPU per evaluation s |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"
awk '{ if ($10 == "-") f = "| - | - | - | - | - | - | - |"
       else f = sprintf("| %.2f | %.1f | %.0f | %s | %s | %s | %s |", $10, $11, $12 / 1024, $13, $14, $15, $16)
       printf "| %s | %s | %s | %d | %s | %s | %.4f | %.2f | %.0f %s\n", $1, $3, $4, $2, $6, $5, $8,
              1e6 * $8 / $2, $9 / 1024, f }' "$out/rows"
