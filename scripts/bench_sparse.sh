#!/bin/bash
# bench_sparse.sh -- the sparse path's targets, measured side by side as whole
# processes on one machine (R's start, library loading and the CSV read count, as a user's
# Rscript does; gmm-infer's reading of the CSV too):
#
#   scripts/bench_sparse.sh [-g GMM_INFER] [-d DATADIR] [-o RESULTS.tsv] [-k "K..."]
#                           [-F "FACTOR..."] [-t "K..."] [-B] [-N] [CASE...]
#
#   insteval  lme4's InstEval (scripts/make-insteval-data.R: 73 421 ratings, 2972 students x
#             1128 lecturers x 14 departments): lmer(y ~ service + (1|s) + (1|d) + (1|dept),
#             REML = FALSE) and `gmm-infer fit --formula 'y ~ factor(service) + f(s, iid) +
#             f(d, iid) + f(dept, iid)'`, one row per FACTOR; the band column (minutes) only
#             with -B
#   lattice   K x K lattices (scripts/make-bench-data strip K K: Poisson counts, 4-neighbour
#             edges), besag, Poisson: for each K, CHOLMOD's supernodal factorisation of the
#             same sparsity (R's Matrix::Cholesky of R + diag(y + 1), R the lattice's
#             Laplacian; ordering and analysis included: the floor), then gmm-infer's
#             `loglik` (one Laplace log likelihood with its gradient) and `fit` per FACTOR
#             (band only for K <= 300: beyond, a factor of K^3 flops and 8 K^3 bytes);
#             TMB's Laplace fit (scripts/tmb/lattice_besag.cpp, compiled once into DATADIR,
#             not timed) for each K of -t (default 300)
#
# FACTOR (-F, default "band sparse auto") is passed as `--factor FACTOR`; "default" passes
# nothing (a binary without the sparse path: the band).  K (-k) defaults to
# "100 200 300 1000".  -N skips the baselines (lmer, Matrix, TMB).  CASE defaults to "insteval lattice".  Without -g only the
# baselines run.  Every row goes to stdout and RESULTS (default DATADIR/bench_sparse.tsv,
# appended): case, program, factor, size, what (fit, loglik, chol), loglik, wall s, CPU s
# (user + sys), the inner s (the fit, or the factorisation's median of 3, timed inside R;
# '-' for gmm-infer), max RSS MB, a note (evaluations, the factor chosen; the load average
# at the end).  One run per row (minutes each at the top sizes), but gmm-infer's loglik
# rows, seconds each, are the run of median CPU time of three (the note lists all three):
# on a loaded machine the CPU seconds are the steadier figure.  The data are made
# once in DATADIR (default bench-data/, not committed) and reused.  Needs Rscript with lme4,
# Matrix and TMB (scripts/install-deps.sh --bench).  R and TMB run under nice, one at a time.
set -euo pipefail
data=bench-data
results=
ks="100 200 300 1000"
tmb_ks="300"
factors="band sparse auto"
insteval_band=0
baselines=1
gmm=
while getopts g:d:o:k:F:t:BN opt; do
    case $opt in
    g) gmm=$(readlink -f "$OPTARG") ;;
    d) data=$OPTARG ;;
    o) results=$OPTARG ;;
    k) ks=$OPTARG ;;
    F) factors=$OPTARG ;;
    t) tmb_ks=$OPTARG ;;
    B) insteval_band=1 ;;
    N) baselines=0 ;;
    *) echo "usage: bench_sparse.sh [-g GMM_INFER] [-d DIR] [-o TSV] [-k K...] [-F FACTOR...] [-t K...] [-B] [-N] [CASE...]" >&2
       exit 2 ;;
    esac
done
shift $((OPTIND - 1))
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(insteval lattice)
here=$(dirname "$(readlink -f "$0")")
mkdir -p "$data"
data=$(readlink -f "$data")
results=${results:-$data/bench_sparse.tsv}
[[ -s $results ]] ||
    printf 'case\tprogram\tfactor\tsize\twhat\tloglik\twall_s\tcpu_s\tinner_s\tmaxrss_mb\tnote\n' > "$results"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OPENBLAS_NUM_THREADS=1 # no spinning BLAS workers in the CPU times

# One timed whole process: sets wall, cpu, rss (MB); its output in $dir/out, $dir/err.
timed() {
    /usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$@" > "$dir/out" 2> "$dir/err" || {
        echo "bench_sparse: failed: $*" >&2
        tail -5 "$dir/err" >&2
        return 1
    }
    read -r wall u s rss < <(tail -1 "$dir/time")
    cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
    rss=$(awk -v m="$rss" 'BEGIN { printf "%.0f", m / 1024 }')
}
# timed, REPS times (the loglik's rows: seconds each, and one run's CPU time moves by up to
# 40% with the host's other tenants): wall, cpu, rss of the run of median CPU time, and in
# runs the CPU seconds of all; $dir/out and $dir/err are the last run's.
REPS=3
timed_median() {
    local k all=()
    for ((k = 0; k < REPS; k++)); do
        timed "$@" || return 1
        all+=("$cpu $wall $rss")
    done
    read -r cpu wall rss < <(printf '%s\n' "${all[@]}" | sort -n | sed -n "$(((REPS + 1) / 2))p")
    runs=$(printf '%s\n' "${all[@]}" | cut -d' ' -f1 | paste -sd' ')
}
# "key value" lines printed by the R scripts, or a JSON number field
field() { sed -n "s/^$1 \\(.*\\)\$/\\1/p; s/^ *\"$1\": *\\([^,]*\\),*\$/\\1/p" "$2" | head -1; }

row() { # CASE PROGRAM FACTOR SIZE WHAT LOGLIK INNER NOTE (wall, cpu, rss from timed)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${6:--}" \
        "$wall" "$cpu" "${7:--}" "$rss" "${8:--}; load $(cut -d' ' -f1 /proc/loadavg)" |
        tee -a "$results"
}

gmm_run() { # CASE FACTOR SIZE WHAT DATA ARGS...
    local c=$1 f=$2 size=$3 what=$4 file=$5 ll note=-
    shift 5
    local flag=()
    [[ $f == default ]] || flag=(--factor "$f")
    if [[ $what == fit ]]; then
        timed "$gmm" fit "$file" "$@" "${flag[@]}" --verbose -o "$dir/model.json" || return 0
        ll=$(field loglik "$dir/model.json")
        note="iterations $(field iterations "$dir/model.json"); $(tr -d '\n ' < "$dir/model.json" |
            sed 's/.*"parameters":{\([^}]*\)}.*/\1/')"
    else
        timed_median "$gmm" loglik "$file" "$@" "${flag[@]}" --verbose || return 0
        ll=$(field loglik "$dir/out")
        note="median CPU of $REPS runs ($runs s)"
    fi
    local how
    how=$(grep -iE -m1 'factor|sparse|cholmod' "$dir/err" | sed 's/^gmm-infer [a-z]*: //' || true)
    row "$c" gmm-infer "$f" "$size" "$what" "$ll" - "$note${how:+; $how}"
}

echo "bench_sparse: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')" >&2
for c in "${cases[@]}"; do
    case $c in
    insteval)
        f=$data/insteval.csv
        [[ -s $f ]] || Rscript "$here/make-insteval-data.R" "$data"
        cat > "$dir/lmer.R" <<REOF
suppressMessages(library(lme4))
d <- read.csv("$f", colClasses = c(service = "factor", s = "factor", d = "factor",
                                   dept = "factor"))
t <- system.time(m <- lmer(y ~ service + (1 | s) + (1 | d) + (1 | dept), data = d,
                           REML = FALSE))[["elapsed"]]
cat(sprintf("fit %.3f\nloglik %.10f\nfeval %d\n", t, as.numeric(logLik(m)),
            m@optinfo\$feval))
REOF
        if [[ $baselines == 1 ]] && timed nice Rscript "$dir/lmer.R"; then
            row insteval lmer - 73421 fit "$(field loglik "$dir/out")" "$(field fit "$dir/out")" \
                "$(field feval "$dir/out") deviance evaluations"
        fi
        [[ -n $gmm ]] || continue
        for fa in $factors; do
            [[ $fa == band && $insteval_band == 0 ]] && continue
            gmm_run insteval "$fa" 73421 fit "$f" \
                --formula 'y ~ factor(service) + f(s, iid) + f(d, iid) + f(dept, iid)'
        done
        ;;
    lattice)
        for k in $ks; do
            l=$data/lattice-$k
            [[ -s $l/strip_edges.csv ]] || "$here/make-bench-data" strip "$k" "$k" "$l"
            cat > "$dir/chol.R" <<REOF
suppressMessages(library(Matrix))
e <- read.csv("$l/strip_edges.csv")
y <- read.csv("$l/strip_nodes.csv")\$count
n <- length(y)
A <- sparseMatrix(i = e\$i + 1, j = e\$j + 1, x = 1, dims = c(n, n), symmetric = TRUE)
Q <- as(Diagonal(x = rowSums(A) + y + 1) - A, "CsparseMatrix")
# A first factorisation loads CHOLMOD's code; the timed ones (median of 3) do not.
invisible(Cholesky(as(Diagonal(2), "CsparseMatrix"), super = TRUE))
t <- u <- numeric(3)
for (r in 1:3) {
    t[r] <- system.time(L <- Cholesky(Q, perm = TRUE, LDL = FALSE, super = TRUE))[["elapsed"]]
    u[r] <- system.time(L <- update(L, Q))[["elapsed"]]
}
t <- median(t)
u <- median(u)
cat(sprintf("fit %.3f\nupdate %.3f\nnnzL %.0f\n", t, u, sum(diff(as(L, "CsparseMatrix")@p))))
REOF
            if [[ $baselines == 1 ]] && timed nice Rscript "$dir/chol.R"; then
                row lattice Matrix::Cholesky - "$k" chol - "$(field fit "$dir/out")" \
                    "numeric refactor $(field update "$dir/out") s; nnz(L) $(field nnzL "$dir/out")"
            fi
            if [[ -n $gmm ]]; then
                for fa in $factors; do
                    [[ $fa == band && $k -gt 300 ]] && continue
                    for what in loglik fit; do
                        gmm_run lattice "$fa" "$k" "$what" "$l/strip_nodes.csv" \
                            --likelihood poisson \
                            --formula "count ~ f(node, besag, graph=$l/strip_edges.csv)"
                    done
                done
            fi
            [[ $baselines == 1 && " $tmb_ks " == *" $k "* ]] || continue
            mkdir -p "$data/tmb"
            cp -u "$here/tmb/lattice_besag.cpp" "$data/tmb/"
            [[ -s $data/tmb/lattice_besag.so ]] ||
                (cd "$data/tmb" && nice Rscript -e 'TMB::compile("lattice_besag.cpp")' >&2)
            cat > "$dir/tmb.R" <<REOF
suppressMessages(library(TMB))
suppressMessages(library(Matrix))
dyn.load(dynlib("$data/tmb/lattice_besag"))
e <- read.csv("$l/strip_edges.csv")
y <- read.csv("$l/strip_nodes.csv")\$count
n <- length(y)
A <- sparseMatrix(i = e\$i + 1, j = e\$j + 1, x = 1, dims = c(n, n), symmetric = TRUE)
R <- as(as(Diagonal(x = rowSums(A)) - A, "CsparseMatrix"), "generalMatrix")
t <- system.time({
    obj <- MakeADFun(list(y = y, R = R, eps = 1e-5),
                     list(b = log(mean(y)), log_tau = 0, x = numeric(n)),
                     random = "x", DLL = "lattice_besag", silent = TRUE)
    opt <- nlminb(obj\$par, obj\$fn, obj\$gr)
})[["elapsed"]]
cat(sprintf("fit %.3f\nloglik %.10f\nevals %d %d\nb %.8f\nvariance %.8g\nconv %d\n", t,
            -opt\$objective, opt\$evaluations[[1]], opt\$evaluations[[2]], opt\$par[["b"]],
            exp(-opt\$par[["log_tau"]]), opt\$convergence))
REOF
            if timed nice Rscript "$dir/tmb.R"; then
                row lattice TMB - "$k" fit "$(field loglik "$dir/out")" "$(field fit "$dir/out")" \
                    "nlminb fn/gr evaluations $(field evals "$dir/out"); b $(field b "$dir/out"); unscaled variance $(field variance "$dir/out"); loglik up to a constant"
            fi
        done
        ;;
    *) echo "bench_sparse: unknown case '$c' (insteval, lattice)" >&2; exit 2 ;;
    esac
done
