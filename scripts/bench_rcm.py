#!/usr/bin/python3
"""bench_rcm.py -- SciPy's reverse Cuthill-McKee as the reference for `gmm-infer order`.

For each graph: bandwidth and profile of the adjacency pattern in the given node order
and after scipy.sparse.csgraph.reverse_cuthill_mckee(symmetric_mode=True), and the
time RCM takes.  Graphs:
  - every data/*_edges.csv of this tree, else the shared ones
    (/work/shared/data/{chicago_road,berlin_adlershof_road,flu_bybw}_edges.csv);
    columns i,j(,...) with 0-based ids; the node count comes from the matching
    *_nodes.csv when there is one (isolated nodes count), else max id + 1;
  - a 10 x 20 grid (4-neighbour) whose labels are scrambled (fixed seed): RCM should
    get back to bandwidth about 10;
  - a perturbed 1000 x 1000 grid (1e6 nodes; 10% of the edges dropped, a diagonal
    added in 10% of the cells, labels scrambled) for timing.

Definitions (the pattern includes the diagonal):
  bandwidth = max |p(i) - p(j)| over edges,
  profile   = sum over rows r of (r - smallest column c <= r with a nonzero in row r).

Output: JSON lines on stdout
  {"impl": "scipy-rcm", "graph", "n", "edges", "bandwidth_given", "bandwidth_rcm",
   "profile_given", "profile_rcm", "ms", "min_ms", "reps"}
and a table on stderr.  --perm-dir DIR writes each RCM permutation (new position ->
old node id, one per line).  --gmm-infer PATH runs `PATH order GRAPH --perm FILE` on
the same graphs (a whole process, CSV read included, is timed), checks that the
permutation is one, recomputes bandwidth and profile from it with the definitions
above, and prints rows {"impl": "gmm-infer-order", ..., "consistent": bool}.  The
tool's "before" figures use its first-appearance numbering, not the file's ids.
"""

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from scipy.sparse.csgraph import reverse_cuthill_mckee  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = "/work/shared/data"
SHARED_GRAPHS = ["chicago_road", "berlin_adlershof_road", "flu_bybw"]


def read_edges(path):
    with open(path) as f:
        header = f.readline().strip().split(",")
    if header[:2] != ["i", "j"]:
        sys.exit(f"bench_rcm.py: {path}: expected columns i,j first, got {header}")
    e = np.loadtxt(path, delimiter=",", skiprows=1, usecols=(0, 1), ndmin=2)
    if e.size and (np.any(e != np.round(e)) or e.min() < 0):
        sys.exit(f"bench_rcm.py: {path}: node ids must be non-negative integers")
    e = e.astype(np.int64)
    n = int(e.max()) + 1 if e.size else 0
    nodes = path[: -len("_edges.csv")] + "_nodes.csv"
    if os.path.exists(nodes):
        with open(nodes) as f:
            n_nodes = sum(1 for _ in f) - 1
        if n_nodes < n:
            sys.exit(f"bench_rcm.py: {nodes}: {n_nodes} nodes but edges name node {n - 1}")
        n = n_nodes
    return n, e[:, 0], e[:, 1]


def adjacency(n, i, j):
    a = sp.coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n)).tocsr()
    a = a + a.T
    a.data[:] = 1.0
    return a.tocsr()


def bandwidth_profile(n, i, j, pos):
    """Bandwidth and profile of the pattern with node v at position pos[v]."""
    if len(i) == 0:
        return 0, 0
    pi, pj = pos[i], pos[j]
    bw = int(np.abs(pi - pj).max())
    r = np.maximum(pi, pj)
    c = np.minimum(pi, pj)
    first = np.arange(n)  # the diagonal
    np.minimum.at(first, r, c)
    return bw, int((np.arange(n) - first).sum())


def timeit(fn, min_reps, budget):
    ts, start = [], time.perf_counter()
    while len(ts) < min_reps or (time.perf_counter() - start < budget and len(ts) < 1000):
        t = time.perf_counter()
        out = fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return out, float(np.median(ts)), float(min(ts)), len(ts)


def grid(nr, nc, rng, drop=0.0, diag=0.0):
    idx = np.arange(nr * nc).reshape(nr, nc)
    i = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    j = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    if drop:
        keep = rng.random(len(i)) >= drop
        i, j = i[keep], j[keep]
    if diag:
        add = rng.random((nr - 1) * (nc - 1)) < diag
        i = np.concatenate([i, idx[:-1, :-1].ravel()[add]])
        j = np.concatenate([j, idx[1:, 1:].ravel()[add]])
    scramble = rng.permutation(nr * nc)  # old label -> new label
    return nr * nc, scramble[i], scramble[j]


def run_tool(exe, name, n, i, j, path, reps):
    """Time `exe order` on the edge file and recompute its bandwidth and profile from
    the permutation it writes, with this script's definitions."""
    tmp = tempfile.mkdtemp(prefix="bench_rcm.")
    try:
        if path is None:
            path = os.path.join(tmp, "edges.csv")
            with open(path, "w") as f:
                f.write("i,j\n")
                f.write("".join(f"{a},{b}\n" for a, b in zip(i.tolist(), j.tolist())))
        perm_path = os.path.join(tmp, "perm.csv")
        cmd = [exe, "order", path, "--perm", perm_path]
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True)
            ts.append((time.perf_counter() - t) * 1e3)
            if p.returncode != 0:
                return {"impl": "gmm-infer-order", "graph": name,
                        "error": f"exit {p.returncode}: {p.stderr.strip()[:300]}"}
        res = json.loads(p.stdout)
        pm = np.loadtxt(perm_path, delimiter=",", skiprows=1, ndmin=2).astype(np.int64)
    finally:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    node, position = pm[:, 0], pm[:, 1]
    m = len(node)
    valid = (len(np.unique(node)) == m and np.array_equal(np.sort(position), np.arange(m))
             and node.min() >= 0 and node.max() < n)
    row = {"impl": "gmm-infer-order", "graph": name, "n": res.get("nodes"),
           "edges": res.get("edges"), "bandwidth_rcm": res.get("bandwidth_after"),
           "profile_rcm": res.get("profile_after"), "bandwidth_first_appearance":
           res.get("bandwidth_before"), "profile_first_appearance": res.get("profile_before"),
           "ms": round(float(np.median(ts)), 4), "min_ms": round(min(ts), 4), "reps": reps,
           "perm_valid": bool(valid)}
    if valid:
        # Nodes on no edge are unknown to the tool: put them last (no effect on either figure).
        pos = np.full(n, -1, np.int64)
        pos[node] = position
        rest = pos < 0
        pos[rest] = m + np.arange(int(rest.sum()))
        bw, pr = bandwidth_profile(n, i, j, pos)
        row["bandwidth_recomputed"], row["profile_recomputed"] = bw, pr
        row["consistent"] = (bw == res.get("bandwidth_after") and pr == res.get("profile_after"))
    return row


def run(name, n, i, j, budget, min_reps, perm_dir):
    a = adjacency(n, i, j)
    perm, ms, mn, reps = timeit(lambda: reverse_cuthill_mckee(a, symmetric_mode=True),
                                min_reps, budget)
    pos = np.empty(n, np.int64)
    pos[perm] = np.arange(n)
    bw0, pr0 = bandwidth_profile(n, i, j, np.arange(n))
    bw1, pr1 = bandwidth_profile(n, i, j, pos)
    row = {"impl": "scipy-rcm", "scipy": scipy.__version__, "graph": name, "n": n,
           "edges": int(len(i)), "bandwidth_given": bw0, "bandwidth_rcm": bw1,
           "profile_given": pr0, "profile_rcm": pr1,
           "ms": round(ms, 4), "min_ms": round(mn, 4), "reps": reps}
    print(json.dumps(row), flush=True)
    if perm_dir:
        os.makedirs(perm_dir, exist_ok=True)
        np.savetxt(os.path.join(perm_dir, f"{name}_rcm_perm.txt"), perm, fmt="%d")
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip the 1e6-node grid")
    ap.add_argument("--big", type=int, default=1000, help="side of the big grid (default 1000)")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of repeats per graph")
    ap.add_argument("--perm-dir", help="write the RCM permutations here")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--gmm-infer", metavar="PATH",
                    help="also run `PATH order` on every graph (whole process timed)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    paths = sorted(glob.glob(os.path.join(HERE, "..", "data", "*_edges.csv")))
    if not paths:
        paths = [os.path.join(SHARED, g + "_edges.csv") for g in SHARED_GRAPHS]
    rows, tool_rows = [], []

    def both(name, n, i, j, path, budget, min_reps):
        rows.append(run(name, n, i, j, budget, min_reps, args.perm_dir))
        if args.gmm_infer:
            row = run_tool(args.gmm_infer, name, n, i, j, path, 3 if n > 1e5 else 5)
            tool_rows.append(row)
            print(json.dumps(row), flush=True)

    for p in paths:
        if not os.path.exists(p):
            print(f"skipped: {p} not found", file=sys.stderr)
            continue
        n, i, j = read_edges(p)
        both(os.path.basename(p)[: -len("_edges.csv")], n, i, j, p, args.budget, 5)
    n, i, j = grid(10, 20, rng)
    both("grid_10x20_scrambled", n, i, j, None, args.budget, 5)
    if not args.quick:
        s = args.big
        n, i, j = grid(s, s, rng, drop=0.1, diag=0.1)
        both(f"grid_{s}x{s}_perturbed", n, i, j, None, 0.0, 3)

    print(f"\n{'graph':<28} {'n':>8} {'edges':>8} {'bw given':>9} {'bw rcm':>7} "
          f"{'profile given':>14} {'profile rcm':>12} {'ms':>9}", file=sys.stderr)
    for r in rows:
        print(f"{r['graph']:<28} {r['n']:>8} {r['edges']:>8} {r['bandwidth_given']:>9} "
              f"{r['bandwidth_rcm']:>7} {r['profile_given']:>14} {r['profile_rcm']:>12} "
              f"{r['ms']:>9.3f}", file=sys.stderr)
    if tool_rows:
        print(f"\n{'gmm-infer order':<28} {'bw rcm':>7} {'profile rcm':>12} {'recomputed':>18} "
              f"{'process ms':>11}", file=sys.stderr)
        for r in tool_rows:
            if "error" in r or not r["perm_valid"]:
                print(f"{r['graph']:<28} {r.get('error', 'INVALID PERMUTATION')}", file=sys.stderr)
                continue
            rec = f"{r['bandwidth_recomputed']}/{r['profile_recomputed']}"
            print(f"{r['graph']:<28} {r['bandwidth_rcm']:>7} {r['profile_rcm']:>12} {rec:>18} "
                  f"{r['ms']:>11.3f}{'' if r['consistent'] else '  MISMATCH'}", file=sys.stderr)


if __name__ == "__main__":
    main()
