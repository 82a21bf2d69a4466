#!/usr/bin/python3
"""make-stack-merge-fixtures.py -- dense references for --merge-tol on a kernel
term stacked with other f() terms (tests/cli/cases/49_formula_stack_kernel.sh),
written to tests/fixtures/stack_merge/.

  scripts/make-stack-merge-fixtures.py      (needs python3-numpy)

Index values t at least 0.05 apart, five of them followed by a near-tie a
few thousandths above (at most 0.0095 < merge_tol = 0.01).  Inputs within
merge_tol of the first input of their group share its state (ssm.h, MODEL),
so the model is a Gaussian process over the MERGED inputs tm (each t
replaced by its group's first value), written from matern32's closed form
s (1 + a) exp(-a), a = sqrt(3) |tau| / l, plus iid group effects and a
covariate:

  y ~ N(b0 + b1 x1, K(tm, tm) + sg Z Z' + noise I).

Writes data.csv; model.json (those parameters, "merge_tol": 0.01);
expected.csv (case,loglik: merged, the dense log marginal likelihood over tm;
unmerged, the same over t, which the fixture keeps apart from it);
rows_expected.csv (row,mean,var: the posterior of the linear predictor at
the data rows); new.csv with new_expected.csv (row,mean,var: at new rows --
within merge_tol above and below a state, on a merged data value, between
states, before the first and after the last; a value within merge_tol of a
state is that state's, the lower one first); terms.csv (term,level,mean,sd:
the posterior of f(t) at each state's value and of each group's effect).
"""
import json
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "tests", "fixtures", "stack_merge")
rng = np.random.default_rng(20261127)
TOL = 0.01


def k32(s, l, tau):
    a = np.sqrt(3.0) * np.abs(tau) / l
    return s * (1.0 + a) * np.exp(-a)


def fmt(v):
    return repr(float(v))


def gauss_loglik(r, S):
    L = np.linalg.cholesky(S)
    z = np.linalg.solve(L, r)
    return -0.5 * z @ z - np.log(np.diag(L)).sum() - 0.5 * len(r) * np.log(2 * np.pi)


def merged(v, firsts):
    """Each value's group first: the largest first <= v (groups as ssm.h's)."""
    return np.array([firsts[firsts <= x].max() for x in v])


def snap(v, firsts):
    """A query within TOL of a first (the lower one first) is that first."""
    res = []
    for x in v:
        lo, hi = firsts[firsts <= x], firsts[firsts > x]
        if lo.size and x - lo.max() <= TOL:
            res.append(lo.max())
        elif hi.size and hi.min() - x <= TOL:
            res.append(hi.min())
        else:
            res.append(x)
    return np.array(res)


os.makedirs(out, exist_ok=True)
m = 25
base = np.round(np.cumsum(0.05 + 0.6 * rng.uniform(size=m)), 3)
near = np.sort(rng.choice(m, 5, replace=False))
ties = np.round(base[near] + rng.choice([0.004, 0.006, 0.0095], 5), 4)
t = np.concatenate([base, ties])
n = len(t)
perm = rng.permutation(n)           # rows in no particular order
t = t[perm]
g = rng.integers(0, 3, n)
x1 = np.round(rng.normal(0, 1, n), 3)
y = np.round(0.3 + 0.5 * x1 + np.sin(t) + 0.4 * (g - 1) + rng.normal(0, 0.2, n), 4)
with open(os.path.join(out, "data.csv"), "w") as fh:
    fh.write("t,g,x1,y\n")
    for i in range(n):
        fh.write(f"{fmt(t[i])},g{g[i]},{fmt(x1[i])},{fmt(y[i])}\n")

# the groups, by ssm.h's rule on the sorted values
firsts = []
for v in np.sort(t):
    if not firsts or v > firsts[-1] + TOL:
        firsts.append(v)
firsts = np.array(firsts)
assert len(firsts) == m and len(np.unique(t)) == m + 5
tm = merged(t, firsts)

p = {"f.t.matern32.variance": 0.8, "f.t.matern32.lengthscale": 0.9,
     "f.g.variance": 0.2, "likelihood.variance": 0.03, "intercept": 0.3,
     "coef.x1": 0.5}
formula = "y ~ x1 + f(t, 'matern32') + f(g, iid)"
model = {"format_version": 1, "tool_version": "0.1.0", "formula": formula,
         "parameters": p, "likelihood": "gaussian", "center": None, "loglik": 0.0,
         "iterations": 0, "converged": False,
         "data": {"file": "data.csv", "x": None, "y": "y", "node": None, "exposure": None},
         "merge_tol": TOL}
with open(os.path.join(out, "model.json"), "w") as fh:
    json.dump(model, fh, indent=2)
    fh.write("\n")


def kf(a, b):
    return k32(p["f.t.matern32.variance"], p["f.t.matern32.lengthscale"],
               a[:, None] - b[None, :])


sg, noise = p["f.g.variance"], p["likelihood.variance"]
Z = (g[:, None] == np.arange(3)[None, :]).astype(float)
r = y - p["intercept"] - p["coef.x1"] * x1
C = kf(tm, tm) + sg * Z @ Z.T
S = C + noise * np.eye(n)
ll = gauss_loglik(r, S)
ll_raw = gauss_loglik(r, kf(t, t) + sg * Z @ Z.T + noise * np.eye(n))
assert abs(ll - ll_raw) > 1e-4 * abs(ll)   # merging is visible at 1e-8
with open(os.path.join(out, "expected.csv"), "w") as fh:
    fh.write("case,loglik\n")
    fh.write(f"merged,{fmt(ll)}\nunmerged,{fmt(ll_raw)}\n")

# the posterior of the linear predictor at the data rows
Sr = np.linalg.solve(S, np.column_stack([r, C]))
mr = p["intercept"] + p["coef.x1"] * x1 + C @ Sr[:, 0]
vr = np.diag(C - C @ Sr[:, 1:])
with open(os.path.join(out, "rows_expected.csv"), "w") as fh:
    fh.write("row,mean,var\n")
    for i in range(n):
        fh.write(f"{i + 1},{fmt(mr[i])},{fmt(vr[i])}\n")

# new rows: their values snapped onto a state within TOL, the dense
# augmented posterior there (known groups only: no new-level variance)
s0, s1 = firsts[7], firsts[12]
tn = np.array([s0 + 0.006, s1 - 0.008, ties[1], 0.5 * (firsts[3] + firsts[4]),
               firsts[0] - 0.7, firsts[-1] + 0.009, firsts[-1] + 1.5])
gn = np.array([0, 1, 2, 0, 1, 2, 0])
xn = np.round(rng.normal(0, 1, len(tn)), 3)
with open(os.path.join(out, "new.csv"), "w") as fh:
    fh.write("t,g,x1\n")
    for i in range(len(tn)):
        fh.write(f"{fmt(tn[i])},g{gn[i]},{fmt(xn[i])}\n")
ts = snap(tn, firsts)
assert ts[0] == s0 and ts[1] == s1 and ts[5] == firsts[-1] and ts[3] == tn[3]
Zn = (gn[:, None] == np.arange(3)[None, :]).astype(float)
Cnd = kf(ts, tm) + sg * Zn @ Z.T
Cnn = kf(ts, ts) + sg * Zn @ Zn.T
Sn = np.linalg.solve(S, np.column_stack([r, Cnd.T]))
mn = p["intercept"] + p["coef.x1"] * xn + Cnd @ Sn[:, 0]
vn = np.diag(Cnn - Cnd @ Sn[:, 1:])
with open(os.path.join(out, "new_expected.csv"), "w") as fh:
    fh.write("row,mean,var\n")
    for i in range(len(tn)):
        fh.write(f"{i + 1},{fmt(mn[i])},{fmt(vn[i])}\n")

# predict --terms: f(t) at each state's value, each group's effect
Cu = kf(firsts, tm)
Cg = sg * Z.T
with open(os.path.join(out, "terms.csv"), "w") as fh:
    fh.write("term,level,mean,sd\n")
    for term, M, prior, lab in (("f.t", Cu, p["f.t.matern32.variance"], [fmt(v) for v in firsts]),
                                ("f.g", Cg, sg, [f"g{j}" for j in range(3)])):
        X = np.linalg.solve(S, np.column_stack([r, M.T]))
        mu = M @ X[:, 0]
        v = prior - np.einsum("ij,ji->i", M, X[:, 1:])
        for j in range(len(lab)):
            fh.write(f"{term},{lab[j]},{fmt(mu[j])},{fmt(np.sqrt(v[j]))}\n")
