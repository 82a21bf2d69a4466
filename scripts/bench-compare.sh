#!/bin/bash
# bench-compare.sh OLD_REV [NEW_REV] -- `make bench`'s C benchmarks (quick
# sizes) and whole-process runs of the CLI, for two revisions side by side in
# one run: both are built in temporary worktrees, then each benchmark runs
# for both in turn, ROUNDS times (default 5), so that load on the machine
# falls on both alike.  Prints one row per timing: the median ms of each
# revision, the ratio new/old of the medians and of the best (fastest)
# rounds, and the spread of the per-round ratios; then, per operation, the
# geometric means of its rows' ratios.  The best-of-rounds ratio is the one
# least moved by other work on the machine.  NEW_REV defaults
# to HEAD.  Run it on an idle machine: comparing a revision with itself
# shows the noise (single rows of sub-millisecond timings move by 10% and
# more under load; the per-operation means much less).
#
# A row whose median ratio is above 1.03 and whose per-round ratios all lie
# above 1 is flagged "slower".
# The accuracy benchmarks (bench_*_accuracy) measure errors, not time, and are
# left out.  BENCHES (default: all the others) names the C benchmarks to run;
# BENCHES= (empty) runs the CLI jobs alone.  The CLI jobs include models the
# band serves whatever the factorisation chooser decides (beside the sparse
# path nothing may get slower): a lattice (bei, 5000 cells, bandwidth
# 50), a 20 x 2000 strip besag, random slopes (sleepstudy).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 OLD_REV [NEW_REV]" >&2; exit 2; }
top=$(git rev-parse --show-toplevel)
old=$(git -C "$top" rev-parse "$1"); new=$(git -C "$top" rev-parse "${2:-HEAD}")
ROUNDS=${ROUNDS:-5}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d); trap 'git -C "$top" worktree remove --force "$tmp/old" 2>/dev/null;
  git -C "$top" worktree remove --force "$tmp/new" 2>/dev/null; rm -rf "$tmp"' EXIT
benches=${BENCHES-bench_band bench_band_solve_prod bench_hmc bench_laplace bench_rcm bench_ssm bench_stack bench_vi}
for side in old new; do
    rev=${!side}
    git -C "$top" worktree add -q --detach "$tmp/$side" "$rev"
    make -C "$tmp/$side" -s -j2 gmm-infer $(for b in $benches; do echo build/release/bench/$b; done) \
        >"$tmp/$side.build" 2>&1 || { cat "$tmp/$side.build" >&2; exit 1; }
done

# Whole processes: jobs of the README, the demos and the battery, timed by
# the shell.  Both sides read the new tree's data/ for the bei lattice (the
# old one may not have it) and one strip made here.
cli_names='fit_co2 fit_coal fit_chicago vi_chicago fit_bym2 fit_bei fit_strip fit_sleep'
"$top/scripts/make-bench-data" strip 20 2000 "$tmp/strip"
cli_job() {  # NAME BINARY TREE SCRATCH
    local B=$2 D=$3/data F=$3/tests/fixtures/battery S=$4 N=$4/new/data
    local ou='edge-ou(variance=1, lengthscale=100)'
    case $1 in
    fit_co2) "$B" fit "$D/co2_train.csv" ;;
    fit_coal) "$B" fit "$D/coal.csv" --likelihood poisson --exposure exposure --kernel matern32 ;;
    fit_chicago) "$B" fit "$D/chicago_road_nodes.csv" --graph "$D/chicago_road_edges.csv" --node node \
        --y count --exposure weight --likelihood poisson --precision "$ou" ;;
    vi_chicago) "$B" vi "$D/chicago_train.csv" --graph "$D/chicago_road_edges.csv" --node node \
        --y count --exposure weight --likelihood poisson --precision "$ou" --learn-hyper -o "$S/vi.json" ;;
    fit_bym2) "$B" fit "$F/areal_counts.csv" --likelihood poisson --exposure E \
        --formula "y ~ x + f(node, bym2, graph=$F/lattice_edges.csv)" ;;
    fit_bei) "$B" fit "$N/bei_grid_cells.csv" --likelihood poisson \
        --formula "count ~ elev + grad + f(cell, besag, graph=$N/bei_grid_edges.csv)" ;;
    fit_strip) "$B" fit "$S/strip/strip_nodes.csv" --likelihood poisson \
        --formula "count ~ f(node, besag, graph=$S/strip/strip_edges.csv)" ;;
    fit_sleep) "$B" fit "$D/sleepstudy.csv" --formula 'Reaction ~ Days + (Days | Subject)' ;;
    esac
}

# Each benchmark runs for old then new (new first in even rounds), so that
# drift in the machine's load falls on both.
for r in $(seq "$ROUNDS"); do
    order='old new'; [ $((r % 2)) -eq 0 ] && order='new old'
    for b in $benches; do
        for side in $order; do
            (cd "$tmp/$side" && BENCH_QUICK=1 BENCH_CSV="$tmp/$side.$r.csv" build/release/bench/$b >/dev/null)
        done
    done
    for name in $cli_names; do
        for side in $order; do
            s=$(date +%s%N)
            cli_job "$name" "$tmp/$side/build/release/gmm-infer" "$tmp/$side" "$tmp" >/dev/null 2>&1 ||
                { echo "$side: $name failed" >&2; exit 1; }
            e=$(date +%s%N)
            [ -e "$tmp/$side.$r.csv" ] || echo "op,n,l,impl,ms" >"$tmp/$side.$r.csv"
            awk -v n="cli_$name" -v us=$(( (e - s) / 1000 )) \
                'BEGIN { printf "%s,0,0,gmm,%.3f\n", n, us / 1000 }' >>"$tmp/$side.$r.csv"
        done
    done
done

python3 - "$tmp" "$ROUNDS" <<'EOF'
import sys, statistics as st
tmp, rounds = sys.argv[1], int(sys.argv[2])
def load(side):
    out = {}
    for r in range(1, rounds + 1):
        # some op names hold commas: the last four fields are n, l, impl, ms
        for line in open(f"{tmp}/{side}.{r}.csv").read().splitlines()[1:]:
            f = line.split(",")
            key = (",".join(f[:-4]), f[-4], f[-3], f[-2])
            out.setdefault(key, {}).setdefault(r, []).append(float(f[-1]))
    return out
old, new = load("old"), load("new")
print(f"{'op':28s} {'n':>8s} {'l':>5s} {'impl':>10s} {'old ms':>10s} {'new ms':>10s} {'ratio':>6s} {'best':>6s}  per-round")
slower = 0
for key in sorted(old, key=lambda k: (k[0], float(k[1] or 0), k[2], k[3])):
    if key not in new: continue
    o = {r: st.median(v) for r, v in old[key].items()}
    n = {r: st.median(v) for r, v in new[key].items()}
    rs = [n[r] / o[r] for r in o if r in n and o[r] > 0]
    if not rs: continue
    mo, mn = st.median(o.values()), st.median(n.values())
    ratio = mn / mo if mo > 0 else float("nan")
    best = min(n.values()) / min(o.values()) if min(o.values()) > 0 else float("nan")
    flag = "  slower" if ratio > 1.03 and min(rs) > 1 else ""
    slower += bool(flag)
    print(f"{key[0]:28s} {key[1]:>8s} {key[2]:>5s} {key[3]:>10s} {mo:10.3f} {mn:10.3f} {ratio:6.3f} {best:6.3f}  "
          f"{min(rs):.3f}-{max(rs):.3f}{flag}")
print(f"{slower} row(s) slower by more than 3% in every round")
# Per operation: the geometric mean over its rows of the median ratio.
import math
ops = {}
for key in old:
    if key not in new: continue
    o = [st.median(v) for v in old[key].values()]
    n = [st.median(v) for v in new[key].values()]
    if min(o) > 0 and min(n) > 0:
        ops.setdefault(key[0].split("(")[0], []).append(
            (math.log(st.median(n) / st.median(o)), math.log(min(n) / min(o))))
print()
print(f"{'operation':28s} {'rows':>5s} {'median ratio':>13s} {'best ratio':>11s}  (geometric means over rows)")
gm = lambda xs: math.exp(st.mean(xs))
for op in sorted(ops):
    print(f"{op:28s} {len(ops[op]):5d} {gm([a for a, b in ops[op]]):13.3f} {gm([b for a, b in ops[op]]):11.3f}")
allr = [x for v in ops.values() for x in v]
print(f"{'all':28s} {len(allr):5d} {gm([a for a, b in allr]):13.3f} {gm([b for a, b in allr]):11.3f}")
EOF
