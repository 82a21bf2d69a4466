#!/usr/bin/python3
"""baseline_gamma_poisson.py -- the independent per-node baseline of the VI
experiment: counts y_i ~ Poisson(e_i r_i), rates r_i ~ Gamma(a, b) i.i.d.,
(a, b) by empirical Bayes (maximising the negative-binomial marginal
likelihood of the training counts), each held-out count scored by its
posterior predictive given its own node's training count (negative
binomial: a node with no training count is not scored minus infinity).

  scripts/baseline_gamma_poisson.py TRAIN.csv TEST.csv --node COL --y COL --exposure COL [--rows]

--rows: the files hold several rows per node (a space-time table): a node's
training rows are pooled (counts and exposures summed; rows whose count is
NaN skipped), and every test row is scored on its own.

Prints JSON {"lpd": total, "n": rows, "mean_lpd": ..., "a": ..., "b": ...}.
Needs python3-scipy (scripts/install-deps.sh --bench).
"""
import argparse
import csv
import json
import math
import sys

from scipy.optimize import minimize
from scipy.special import gammaln


def read(path, node, y, e):
    out = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            out[row[node].strip()] = (float(row[y]), float(row[e]))
    return out


def read_rows(path, node, y, e):
    with open(path, newline="") as f:
        return [(row[node].strip(), float(row[y]), float(row[e])) for row in csv.DictReader(f)]


def pooled(rows):
    out = {}
    for v, k, e in rows:
        if math.isnan(k):
            continue
        k0, e0 = out.get(v, (0.0, 0.0))
        out[v] = (k0 + k, e0 + e)
    return out


def nb_logpmf(k, a, b, e):
    """log p(k) for k ~ Poisson(e r), r ~ Gamma(a, rate b)."""
    return (gammaln(k + a) - gammaln(a) - gammaln(k + 1)
            + a * math.log(b / (b + e)) + k * math.log(e / (b + e)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("--node", required=True)
    ap.add_argument("--y", required=True)
    ap.add_argument("--exposure", required=True)
    ap.add_argument("--rows", action="store_true")
    o = ap.parse_args()
    if o.rows:
        tr = pooled(read_rows(o.train, o.node, o.y, o.exposure))
        te = [r for r in read_rows(o.test, o.node, o.y, o.exposure) if not math.isnan(r[1])]
    else:
        tr = read(o.train, o.node, o.y, o.exposure)
        te = [(v, k, e) for v, (k, e) in read(o.test, o.node, o.y, o.exposure).items()]

    def negml(u):
        a, b = math.exp(u[0]), math.exp(u[1])
        return -sum(nb_logpmf(k, a, b, e) for k, e in tr.values())

    rate = sum(k for k, _ in tr.values()) / sum(e for _, e in tr.values())
    res = minimize(negml, [0.0, math.log(1.0 / rate)], method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    a, b = math.exp(res.x[0]), math.exp(res.x[1])
    lpd, n = 0.0, 0
    for v, k, e in te:
        if v not in tr:
            sys.exit(f"node {v} of {o.test} is not in {o.train}")
        k0, e0 = tr[v]
        # posterior Gamma(a + k0, b + e0), predictive for the test exposure e
        lpd += nb_logpmf(k, a + k0, b + e0, e)
        n += 1
    print(json.dumps({"lpd": lpd, "n": n, "mean_lpd": lpd / n, "a": a, "b": b}, indent=2))


if __name__ == "__main__":
    main()
