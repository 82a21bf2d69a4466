#!/usr/bin/python3
"""make-stack-kernel-fixtures.py -- dense references for formulas that stack a
kernel spec with other f() terms (tests/cli/cases/49_formula_stack_kernel.sh),
written to tests/fixtures/stack_kernel/.

  scripts/make-stack-kernel-fixtures.py      (needs python3-numpy)

A Gaussian process on irregular values with repeats, written from the
kernels' closed forms (matern32: s (1 + a) exp(-a), a = sqrt(3) |tau| / l;
matern52: s (1 + a + a^2 / 3) exp(-a), a = sqrt(5) |tau| / l), plus iid
group effects and a covariate:

  y ~ N(b0 + b1 x1, K(t, t) + sg Z Z' + noise I).

Writes data.csv; model_m32.json and model_sum.json (Gaussian, 'matern32' and
'matern32 + matern52'), model_pois.json (Poisson counts, 'matern32' + iid,
intercept); expected.csv (case,loglik: the dense log marginal likelihood,
and for the Poisson model the Laplace approximation by Rasmussen & Williams'
Algorithm 3.1; loo_m32: the m32 model's exact leave-one-out log predictive density, summed); new.csv with new_expected.csv (row,mean,var,lpd: the
Gaussian m32 model's posterior of the linear predictor at new rows -- values
before, between, on and after the data's, a group the data never met -- and
log N(y; mean, var + noise)); terms_m32.csv (term,level,mean,sd: the
posterior of f(t) at each distinct value and of each group's effect);
rows_expected.csv (row,mean,var: the m32 model's posterior of the linear
predictor at the data rows).  The damped periodic models (below): expected_damped.csv,
rows_damped.csv, new_damped.csv and new_damped_pois.csv (the Poisson one's
Laplace posterior of the linear predictor at new.csv's rows).
"""
import json
import os

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "tests", "fixtures", "stack_kernel")
rng = np.random.default_rng(20261128)


def k32(s, l, tau):
    a = np.sqrt(3.0) * np.abs(tau) / l
    return s * (1.0 + a) * np.exp(-a)


def k52(s, l, tau):
    a = np.sqrt(5.0) * np.abs(tau) / l
    return s * (1.0 + a + a * a / 3.0) * np.exp(-a)


def fmt(v):
    return repr(float(v))


def gauss_loglik(r, S):
    L = np.linalg.cholesky(S)
    z = np.linalg.solve(L, r)
    return -0.5 * z @ z - np.log(np.diag(L)).sum() - 0.5 * len(r) * np.log(2 * np.pi)


def model_json(name, formula, params, lik="gaussian"):
    m = {"format_version": 1, "tool_version": "0.1.0", "formula": formula,
         "parameters": params, "likelihood": lik,
         "center": None, "loglik": 0.0, "iterations": 0, "converged": False,
         "data": {"file": "data.csv", "x": None, "y": formula.split("~")[0].strip(),
                  "node": None, "exposure": None}}
    with open(os.path.join(out, name), "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")


def laplace_rw(K, b, counts, maxit=300, mode=False):
    """Rasmussen & Williams' Algorithm 3.1 for Poisson counts with log rate
    b + f, f ~ N(0, K): the Laplace approximation's log q(y) (and, with
    mode, the mode f^ too)."""
    lgam = np.array([np.sum(np.log(np.arange(1, c + 1))) for c in counts])
    fl = np.zeros(len(counts))
    obj = None
    for it in range(maxit):
        lam = np.exp(b + fl)
        sW = np.sqrt(lam)
        L = np.linalg.cholesky(np.eye(len(counts)) + sW[:, None] * K * sW[None, :])
        bb = lam * fl + counts - lam
        a = bb - sW * np.linalg.solve(L.T, np.linalg.solve(L, sW * (K @ bb)))
        fl = K @ a
        eta = b + fl
        lp = np.sum(counts * eta - np.exp(eta) - lgam)
        sW = np.sqrt(np.exp(eta))
        L = np.linalg.cholesky(np.eye(len(counts)) + sW[:, None] * K * sW[None, :])
        new = -0.5 * a @ fl + lp - np.log(np.diag(L)).sum()
        if obj is not None and abs(new - obj) < 1e-15 * abs(new):
            return (new, fl) if mode else new
        obj = new
    return (obj, fl) if mode else obj


def write_rows(name, C, S, r, mean0):
    """The Gaussian posterior of the linear predictor at the data rows, C the
    latent part's covariance there, S = C + noise I, r = y - mean0: name's
    row,mean,var."""
    X = np.linalg.solve(S, np.column_stack([r, C]))
    m = mean0 + C @ X[:, 0]
    v = np.diag(C - C @ X[:, 1:])
    with open(os.path.join(out, name), "w") as fh:
        fh.write("row,mean,var\n")
        for i in range(len(m)):
            fh.write(f"{i + 1},{fmt(m[i])},{fmt(v[i])}\n")


def write_new_rows(name, Cnd, Cnn, S, r, mean0, yn, noise):
    """The same at new rows (the dense augmented posterior), Cnd their
    covariance with the data's latent part and Cnn their own, with log N(yn;
    mean, var + noise): name's row,mean,var,lpd."""
    X = np.linalg.solve(S, np.column_stack([r, Cnd.T]))
    m = mean0 + Cnd @ X[:, 0]
    v = np.diag(Cnn - Cnd @ X[:, 1:])
    lpd = -0.5 * np.log(2 * np.pi * (v + noise)) - 0.5 * (yn - m) ** 2 / (v + noise)
    with open(os.path.join(out, name), "w") as fh:
        fh.write("row,mean,var,lpd\n")
        for i in range(len(m)):
            fh.write(f"{i + 1},{fmt(m[i])},{fmt(v[i])},{fmt(lpd[i])}\n")


os.makedirs(out, exist_ok=True)
n = 40
t = np.round(np.sort(rng.uniform(0, 15, n)), 2)
t[6] = t[5]
t[21] = t[20]
perm = rng.permutation(n)           # rows in no particular order
t = t[perm]
g = rng.integers(0, 4, n)
x1 = np.round(rng.normal(0, 1, n), 3)
f = np.sin(t / 2.0)
y = np.round(0.2 + 0.6 * x1 + f + 0.3 * (g - 1.5) + rng.normal(0, 0.3, n), 4)
cnt = rng.poisson(np.exp(0.5 + 0.8 * f + 0.2 * (g - 1.5)))
with open(os.path.join(out, "data.csv"), "w") as fh:
    fh.write("t,g,x1,y,n\n")
    for i in range(n):
        fh.write(f"{fmt(t[i])},g{g[i]},{fmt(x1[i])},{fmt(y[i])},{cnt[i]}\n")

Z = (g[:, None] == np.arange(4)[None, :]).astype(float)
tau = t[:, None] - t[None, :]
expected = []

# --- Gaussian, matern32 + iid + x1 ------------------------------------------
p32 = {"f.t.matern32.variance": 0.7, "f.t.matern32.lengthscale": 2.2,
       "f.g.variance": 0.15, "likelihood.variance": 0.09, "intercept": 0.25,
       "coef.x1": 0.55}
model_json("model_m32.json", "y ~ x1 + f(t, 'matern32') + f(g, iid)", p32)


def kf32(a, b):
    return k32(p32["f.t.matern32.variance"], p32["f.t.matern32.lengthscale"], a[:, None] - b[None, :])


C = kf32(t, t) + p32["f.g.variance"] * Z @ Z.T
S = C + p32["likelihood.variance"] * np.eye(n)
r = y - p32["intercept"] - p32["coef.x1"] * x1
expected.append(("m32", gauss_loglik(r, S)))
# exact leave-one-out at these parameters: y_i | y_-i has mean y_i - (S^-1 r)_i / (S^-1)_ii and
# variance 1 / (S^-1)_ii
Si = np.linalg.inv(S)
dd = np.diag(Si)
z = Si @ r
expected.append(("loo_m32", np.sum(0.5 * np.log(dd / (2 * np.pi)) - 0.5 * z * z / dd)))

# --- Gaussian, matern32 + matern52 + iid + x1 --------------------------------
psum = {"f.t.matern32.variance": 0.5, "f.t.matern32.lengthscale": 3.0,
        "f.t.matern52.variance": 0.2, "f.t.matern52.lengthscale": 0.8,
        "f.g.variance": 0.2, "likelihood.variance": 0.08, "intercept": 0.1,
        "coef.x1": 0.6}
model_json("model_sum.json", "y ~ x1 + f(t, 'matern32 + matern52') + f(g, iid)", psum)
Ssum = (k32(psum["f.t.matern32.variance"], psum["f.t.matern32.lengthscale"], tau) +
        k52(psum["f.t.matern52.variance"], psum["f.t.matern52.lengthscale"], tau) +
        psum["f.g.variance"] * Z @ Z.T + psum["likelihood.variance"] * np.eye(n))
expected.append(("sum", gauss_loglik(y - psum["intercept"] - psum["coef.x1"] * x1, Ssum)))

# --- Poisson, matern32 + iid, intercept: Rasmussen & Williams Alg. 3.1 -------
ppo = {"f.t.matern32.variance": 0.5, "f.t.matern32.lengthscale": 2.5,
       "f.g.variance": 0.1, "intercept": 0.45}
model_json("model_pois.json", "n ~ f(t, 'matern32') + f(g, iid)", ppo, "poisson")
K = k32(ppo["f.t.matern32.variance"], ppo["f.t.matern32.lengthscale"], tau) + \
    ppo["f.g.variance"] * Z @ Z.T
expected.append(("pois", laplace_rw(K, ppo["intercept"], cnt)))

with open(os.path.join(out, "expected.csv"), "w") as fh:
    fh.write("case,loglik\n")
    for k, v in expected:
        fh.write(f"{k},{fmt(v)}\n")

# --- new rows of the m32 model: the dense augmented posterior ---------------
tn = np.array([t.min() - 1.3, t.min() + 0.013, t[3], 0.5 * (t.min() + t.max()) + 0.0271,
               t.max() + 0.7, t.max() + 5.0])
gn = np.array([0, 1, 2, 3, 9, 1])   # 9: a group the data never met
xn = np.round(rng.normal(0, 1, len(tn)), 3)
yn = np.round(0.2 + 0.6 * xn + np.sin(tn / 2.0) + rng.normal(0, 0.3, len(tn)), 4)
with open(os.path.join(out, "new.csv"), "w") as fh:
    fh.write("t,g,x1,y\n")
    for i in range(len(tn)):
        fh.write(f"{fmt(tn[i])},g{gn[i]},{fmt(xn[i])},{fmt(yn[i])}\n")
sg, noise = p32["f.g.variance"], p32["likelihood.variance"]
Zn = (gn[:, None] == np.arange(4)[None, :]).astype(float)
Cnd = kf32(tn, t) + sg * Zn @ Z.T                     # cov(new f, data f)
Cnn = kf32(tn, tn) + sg * (Zn @ Zn.T + np.diag((gn >= 4).astype(float)))
write_new_rows("new_expected.csv", Cnd, Cnn, S, r, p32["intercept"] + p32["coef.x1"] * xn, yn,
               noise)

# --- the m32 model's posterior of the linear predictor at the data rows -----
write_rows("rows_expected.csv", C, S, r, p32["intercept"] + p32["coef.x1"] * x1)

# --- predict --terms of the m32 model ---------------------------------------
u = np.unique(t)
Cu = kf32(u, t)                                        # cov(f(u), data latent part)
Cg = sg * Z.T                                          # cov(group effects, data)
with open(os.path.join(out, "terms_m32.csv"), "w") as fh:
    fh.write("term,level,mean,sd\n")
    for M, prior, lab in ((Cu, np.full(len(u), p32["f.t.matern32.variance"]), [fmt(v) for v in u]),
                          (Cg, np.full(4, sg), [f"g{j}" for j in range(4)])):
        term = "f.t" if lab[0][0] != "g" else "f.g"
        X = np.linalg.solve(S, np.column_stack([r, M.T]))
        m = M @ X[:, 0]
        v = prior - np.einsum("ij,ji->i", M, X[:, 1:])
        for j in range(len(lab)):
            fh.write(f"{term},{lab[j]},{fmt(m[j])},{fmt(np.sqrt(v[j]))}\n")

# --- a damped periodic summand (stack.h, SQUARE-ROOT FORM) -------------------
# periodic(period=P) is Solin & Sarkka's series truncated at J = 2 harmonics:
# v sum_j q_j cos(j w tau), q_0 = e^-z I_0(z), q_j = 2 e^-z I_j(z), z = 1/l^2,
# times exp(-damp |tau|), damp = max(2e-8, 800 eps K^2) / span (ssm.h; K
# distinct values).  Gaussian: y ~ x1 + f(t, 'matern32 + periodic(period=5)')
# + f(g, iid); Poisson: n ~ the same without x1; both again with an
# intrinsic rw1 on x1 instead of the iid groups.  expected_damped.csv.


def ive(j, z):
    """e^-z I_j(z) by its power series (z of order 1 here)."""
    s, term, k = 0.0, (z / 2.0) ** j / np.prod(np.arange(1, j + 1, dtype=float)), 0
    while term > 1e-18 * max(s, 1e-300) or k < 5:
        s += term
        k += 1
        term *= (z / 2.0) ** 2 / (k * (k + j))
    return s * np.exp(-z)


def kper(v, l, period, tau, damp, J=2):
    z = 1.0 / (l * l)
    w = 2.0 * np.pi / period
    k = sum((1.0 if j == 0 else 2.0) * ive(j, z) * np.cos(j * w * tau) for j in range(J + 1))
    return v * k * np.exp(-damp * np.abs(tau))


K_distinct = len(np.unique(t))
damp = max(2e-8, 800.0 * np.finfo(float).eps * K_distinct ** 2) / (t.max() - t.min())
expected_d = []
pper = {"f.t.matern32.variance": 0.5, "f.t.matern32.lengthscale": 3.0,
        "f.t.periodic.variance": 0.4, "f.t.periodic.lengthscale": 1.2,
        "f.t.periodic.period": 5.0, "f.g.variance": 0.15, "likelihood.variance": 0.09,
        "intercept": 0.2, "coef.x1": 0.6}
model_json("model_per.json", "y ~ x1 + f(t, 'matern32 + periodic(period=5)') + f(g, iid)", pper)
Kper = (k32(pper["f.t.matern32.variance"], pper["f.t.matern32.lengthscale"], tau) +
        kper(pper["f.t.periodic.variance"], pper["f.t.periodic.lengthscale"],
             pper["f.t.periodic.period"], tau, damp) + pper["f.g.variance"] * Z @ Z.T)
Sper = Kper + pper["likelihood.variance"] * np.eye(n)
rper = y - pper["intercept"] - pper["coef.x1"] * x1
expected_d.append(("per", gauss_loglik(rper, Sper)))
Sip = np.linalg.inv(Sper)            # exact leave-one-out, as loo_m32's
zp = Sip @ rper
expected_d.append(("loo_per", np.sum(0.5 * np.log(np.diag(Sip) / (2 * np.pi)) -
                                     0.5 * zp * zp / np.diag(Sip))))
write_rows("rows_damped.csv", Kper, Sper, rper, pper["intercept"] + pper["coef.x1"] * x1)

ppp = {"f.t.matern32.variance": 0.4, "f.t.matern32.lengthscale": 3.0,
       "f.t.periodic.variance": 0.3, "f.t.periodic.lengthscale": 1.2,
       "f.t.periodic.period": 5.0, "f.g.variance": 0.1, "intercept": 0.45}
model_json("model_per_pois.json", "n ~ f(t, 'matern32 + periodic(period=5)') + f(g, iid)", ppp,
           "poisson")
Kp = (k32(ppp["f.t.matern32.variance"], ppp["f.t.matern32.lengthscale"], tau) +
      kper(ppp["f.t.periodic.variance"], ppp["f.t.periodic.lengthscale"],
           ppp["f.t.periodic.period"], tau, damp) + ppp["f.g.variance"] * Z @ Z.T)
res_pp = laplace_rw(Kp, ppp["intercept"], cnt, mode=True)
expected_d.append(("per_pois", res_pp[0]))
b, fl = ppp["intercept"], res_pp[1]
# its new rows (new.csv): the Laplace posterior of the linear predictor, b +
# k*'K^-1 f^ and k** - k*'(K + W^-1)^-1 k*, W the weights at the mode f^
tp = tn[:, None] - t[None, :]
tpp = tn[:, None] - tn[None, :]
Cpnd = (k32(ppp["f.t.matern32.variance"], ppp["f.t.matern32.lengthscale"], tp) +
        kper(ppp["f.t.periodic.variance"], ppp["f.t.periodic.lengthscale"],
             ppp["f.t.periodic.period"], tp, damp) + ppp["f.g.variance"] * Zn @ Z.T)
Cpnn = (k32(ppp["f.t.matern32.variance"], ppp["f.t.matern32.lengthscale"], tpp) +
        kper(ppp["f.t.periodic.variance"], ppp["f.t.periodic.lengthscale"],
             ppp["f.t.periodic.period"], tpp, damp) +
        ppp["f.g.variance"] * (Zn @ Zn.T + np.diag((gn >= 4).astype(float))))
mpn = b + Cpnd @ np.linalg.solve(Kp, fl)
vpn = np.diag(Cpnn - Cpnd @ np.linalg.solve(Kp + np.diag(1.0 / np.exp(b + fl)), Cpnd.T))
with open(os.path.join(out, "new_damped_pois.csv"), "w") as fh:
    fh.write("row,mean,var\n")
    for i in range(len(tn)):
        fh.write(f"{i + 1},{fmt(mpn[i])},{fmt(vpn[i])}\n")

# the same kernel beside an intrinsic rw1 on x1 (sum-to-zero): the
# constrained prior's covariance V (V'QV)^-1 V' (V an orthonormal basis of
# {sum x = 0}), Q the Wiener walk's precision on the sorted distinct x1
ux = np.unique(x1)
Dw = np.zeros((len(ux) - 1, len(ux)))
for j in range(len(ux) - 1):
    Dw[j, j], Dw[j, j + 1] = -1.0, 1.0
    Dw[j] /= np.sqrt(ux[j + 1] - ux[j])
Vb = np.linalg.svd(np.ones((1, len(ux))))[2][1:].T
Hx = (x1[:, None] == ux[None, :]).astype(float)


def rw1_cov(v):
    Qw = Dw.T @ Dw / v
    return Hx @ Vb @ np.linalg.inv(Vb.T @ Qw @ Vb) @ Vb.T @ Hx.T


prw = {"f.t.matern32.variance": 0.5, "f.t.matern32.lengthscale": 3.0,
       "f.t.periodic.variance": 0.4, "f.t.periodic.lengthscale": 1.2,
       "f.t.periodic.period": 5.0, "f.x1.variance": 0.3, "likelihood.variance": 0.09,
       "intercept": 0.2, "coef.x1": 0.6}
model_json("model_per_rw1.json",
           "y ~ x1 + f(t, 'matern32 + periodic(period=5)') + f(x1, rw1)", prw)
Krw = (k32(prw["f.t.matern32.variance"], prw["f.t.matern32.lengthscale"], tau) +
       kper(prw["f.t.periodic.variance"], prw["f.t.periodic.lengthscale"],
            prw["f.t.periodic.period"], tau, damp) + rw1_cov(prw["f.x1.variance"]))
rrw = y - prw["intercept"] - prw["coef.x1"] * x1
Srw = Krw + prw["likelihood.variance"] * np.eye(n)
expected_d.append(("per_rw1", gauss_loglik(rrw, Srw)))
write_rows("rows_damped_rw1.csv", Krw, Srw, rrw, prw["intercept"] + prw["coef.x1"] * x1)
pprw = {k: v for k, v in prw.items() if k not in ("likelihood.variance", "coef.x1")}
model_json("model_per_rw1_pois.json", "n ~ f(t, 'matern32 + periodic(period=5)') + f(x1, rw1)",
           pprw, "poisson")
expected_d.append(("per_rw1_pois", laplace_rw(Krw, pprw["intercept"], cnt)))
with open(os.path.join(out, "expected_damped.csv"), "w") as fh:
    fh.write("case,loglik\n")
    for k, v in expected_d:
        fh.write(f"{k},{fmt(v)}\n")

# new rows of the damped Gaussian model (new.csv): the dense augmented posterior
def kfper(a, b):
    tt = a[:, None] - b[None, :]
    return (k32(pper["f.t.matern32.variance"], pper["f.t.matern32.lengthscale"], tt) +
            kper(pper["f.t.periodic.variance"], pper["f.t.periodic.lengthscale"],
                 pper["f.t.periodic.period"], tt, damp))


sgp, noisep = pper["f.g.variance"], pper["likelihood.variance"]
Cnd = kfper(tn, t) + sgp * Zn @ Z.T
Cnn = kfper(tn, tn) + sgp * (Zn @ Zn.T + np.diag((gn >= 4).astype(float)))
write_new_rows("new_damped.csv", Cnd, Cnn, Sper, rper, pper["intercept"] + pper["coef.x1"] * xn,
               yn, noisep)
