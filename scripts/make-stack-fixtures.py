#!/usr/bin/python3
"""make-stack-fixtures.py -- dense references for formulas of several f()
terms (tests/cli/cases/48_formula_stack.sh), written to tests/fixtures/stack/.

  scripts/make-stack-fixtures.py      (needs python3-numpy and python3-scipy)

The log marginal likelihood of Gaussian data under an intrinsic prior is
computed densely: rw1 on irregular values (the Wiener process: x'Qx =
sum (x_{j+1} - x_j)^2 / (s dt_j)) conditioned on sum x = 0 has covariance
s Q1^+ (Q1's null space is the constant); besag on a connected graph has
covariance s R^+ / c with c the geometric mean of diag(R^+) (the scaled
ICAR, Sorbye & Rue 2014); iid s I.  y ~ N(X beta + sum_k A_k Sigma_k A_k',
+ noise I) over the observed rows (Gaussian data without covariates are
centred by their mean first).  The rw1 local-level model's maximum
likelihood is that dense objective maximised by SciPy (L-BFGS-B on the log
variances from several starts, then Nelder-Mead to polish).

Writes: data_*.csv, edges.csv, model_*.json (parameters chosen here) and
expected.csv (case,loglik at the model file's parameters; ml rows: the
maximum, the maximiser).
"""
import json
import os
import sys

import numpy as np
from scipy.optimize import minimize

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "tests", "fixtures", "stack")
rng = np.random.default_rng(20261127)


def rw1_cov(u):
    dt = np.diff(u)
    m = len(u)
    D = np.zeros((m - 1, m))
    for j in range(m - 1):
        D[j, j], D[j, j + 1] = -1.0, 1.0
    Q = D.T @ np.diag(1.0 / dt) @ D
    return np.linalg.pinv(Q, rcond=1e-13, hermitian=True)


def besag_cov(n, edges):
    R = np.zeros((n, n))
    for i, j in edges:
        R[i, j] -= 1
        R[j, i] -= 1
        R[i, i] += 1
        R[j, j] += 1
    Rp = np.linalg.pinv(R, rcond=1e-13, hermitian=True)
    c = np.exp(np.mean(np.log(np.diag(Rp))))
    return Rp / c


def incidence(idx, m):
    A = np.zeros((len(idx), m))
    A[np.arange(len(idx)), idx] = 1.0
    return A


def gauss_loglik(r, S):
    L = np.linalg.cholesky(S)
    z = np.linalg.solve(L, r)
    return -0.5 * z @ z - np.log(np.diag(L)).sum() - 0.5 * len(r) * np.log(2 * np.pi)


def fmt(v):
    return repr(float(v))


def write_csv(name, header, rows):
    with open(os.path.join(out, name), "w") as f:
        f.write(",".join(header) + "\n")
        for r in rows:
            f.write(",".join(r) + "\n")


def model_json(name, formula, data, params, center):
    m = {"format_version": 1, "tool_version": "0.1.0", "formula": formula,
         "parameters": params, "likelihood": "gaussian",
         "center": center, "loglik": 0.0, "iterations": 0, "converged": False,
         "data": {"file": data, "x": None, "y": "y", "node": None, "exposure": None}}
    with open(os.path.join(out, name), "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")


expected = []

# --- rw1 on irregular values (some shared) + iid groups + a covariate --------
n = 48
t = np.round(np.sort(rng.uniform(0, 20, n)), 2)
t[5] = t[4]             # two rows read one level
t[30] = t[29]
g = rng.integers(0, 5, n)
x1 = np.round(rng.normal(0, 1, n), 3)
y = np.round(np.sin(t / 3) + 0.4 * g + 0.7 * x1 + rng.normal(0, 0.3, n), 4)
obs = np.ones(n, bool)
obs[17] = False         # a missing outcome: the row is predicted, not modelled
rows = []
for i in range(n):
    rows.append([fmt(t[i]), "g" + str(g[i]), fmt(x1[i]), fmt(y[i]) if obs[i] else "NaN"])
write_csv("data_rw1_iid.csv", ["t", "g", "x1", "y"], rows)
u, ti = np.unique(t, return_inverse=True)
gl, gi = np.unique(g, return_inverse=True)
A1, A2 = incidence(ti, len(u)), incidence(gi, len(gl))
C1 = rw1_cov(u)


def cov_rw1_iid(s1, s2, noise):
    return s1 * A1 @ C1 @ A1.T + s2 * A2 @ A2.T + noise * np.eye(n)


# centred, no covariate
p = {"f.t.variance": 0.35, "f.g.variance": 0.6, "likelihood.variance": 0.11}
yo = y[obs]
center = yo.mean()
S = cov_rw1_iid(0.35, 0.6, 0.11)[np.ix_(obs, obs)]
expected.append(("rw1_iid", gauss_loglik(yo - center, S)))
model_json("model_rw1_iid.json", "y ~ f(t, rw1) + f(g, iid)", "data_rw1_iid.csv", p, center)

# intercept and covariate as coefficients (not centred)
p = {"f.t.variance": 0.5, "f.g.variance": 0.25, "likelihood.variance": 0.09,
     "intercept": 0.3, "coef.x1": 0.65}
S = cov_rw1_iid(0.5, 0.25, 0.09)[np.ix_(obs, obs)]
expected.append(("rw1_iid_x1", gauss_loglik(yo - 0.3 - 0.65 * x1[obs], S)))
model_json("model_rw1_iid_x1.json", "y ~ x1 + f(t, rw1) + f(g, iid)", "data_rw1_iid.csv", p,
           None)

# --- besag on a small connected graph + rw1 over time ----------------------
nodes = 7
edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (0, 3), (2, 5)]
write_csv("edges.csv", ["i", "j"], [[str(i), str(j)] for i, j in edges])
weeks = 6
nb = nodes * weeks
node = np.repeat(np.arange(nodes), weeks)
week = np.tile(np.arange(weeks) * 1.0 + 1, nodes)
yb = np.round(0.5 * np.sin(node) + 0.3 * week + rng.normal(0, 0.4, nb), 4)
write_csv("data_besag_rw1.csv", ["node", "week", "y"],
          [[str(node[i]), fmt(week[i]), fmt(yb[i])] for i in range(nb)])
Ab = incidence(node, nodes)
uw, wi = np.unique(week, return_inverse=True)
Aw = incidence(wi, len(uw))
p = {"f.node.variance": 0.8, "f.week.variance": 0.4, "likelihood.variance": 0.2}
S = 0.8 * Ab @ besag_cov(nodes, edges) @ Ab.T + 0.4 * Aw @ rw1_cov(uw) @ Aw.T + 0.2 * np.eye(nb)
expected.append(("besag_rw1", gauss_loglik(yb - yb.mean(), S)))
model_json("model_besag_rw1.json",
           "y ~ f(node, besag, graph=tests/fixtures/stack/edges.csv) + f(week, rw1)",
           "data_besag_rw1.csv", p, yb.mean())

# --- local level: y ~ f(t, rw1) + noise, maximum likelihood ----------------
nl = 80
tl = np.arange(nl) * 1.0
tl[40:] += 0.5           # one longer interval
lev = np.cumsum(rng.normal(0, 0.3, nl))
yl = np.round(lev + rng.normal(0, 0.5, nl), 4)
write_csv("data_local_level.csv", ["t", "y"], [[fmt(tl[i]), fmt(yl[i])] for i in range(nl)])
Cl = rw1_cov(tl)
rl = yl - yl.mean()


def negll(lp):
    return -gauss_loglik(rl, np.exp(lp[0]) * Cl + np.exp(lp[1]) * np.eye(nl))


best = None
for start in ([0.0, 0.0], [-3.0, -1.0], [-1.0, -2.0]):
    r = minimize(negll, start, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-10})
    if best is None or r.fun < best.fun:
        best = r
r = minimize(negll, best.x, method="Nelder-Mead",
             options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20000})
if r.fun < best.fun:
    best = r
expected.append(("ml_local_level", -best.fun))
expected.append(("ml_local_level:f.t.variance", np.exp(best.x[0])))
expected.append(("ml_local_level:likelihood.variance", np.exp(best.x[1])))

with open(os.path.join(out, "expected.csv"), "w") as f:
    f.write("case,value\n")
    for k, v in expected:
        f.write(f"{k},{v!r}\n")
print("wrote", out, file=sys.stderr)
