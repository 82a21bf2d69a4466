#!/usr/bin/env python3
"""glm-table.py -- the models of tests/fixtures/glm/models.tsv (scripts/make-glm-fixtures.R;
asserted by tests/cli/cases/79_glm.sh) fitted by gmm-infer and compared with R's results
(ref.csv), as the Markdown table of docs/accuracy.md: per model the loglik difference
(gmm-infer minus R), the largest coefficient difference in units of R's standard error (the
fit's own where R gives none), and the largest relative differences of the standard errors
and of the likelihood's and the iid term's parameters.

    scripts/glm-table.py [BINARY]      (BINARY: build/release/gmm-infer; run from the checkout)
"""
import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile

binary = sys.argv[1] if len(sys.argv) > 1 else "build/release/gmm-infer"
fx = "tests/fixtures/glm"
ref = {}
with open(os.path.join(fx, "ref.csv")) as f:
    for r in csv.DictReader(f):
        ref.setdefault(r["model"], {})[r["name"]] = float(r["value"])

print("| model | loglik | coefficients | standard errors | variance, theta, iid variance |")
print("|---|---|---|---|---|")
with open(os.path.join(fx, "models.tsv")) as f, tempfile.TemporaryDirectory() as tmp:
    for row in csv.DictReader(f, delimiter="\t"):
        name = row["name"]
        out = os.path.join(tmp, name + ".json")
        opts = [] if row["options"] == "-" else shlex.split(row["options"])
        subprocess.run([binary, "fit", "--formula", row["formula"], "--likelihood",
                        row["likelihood"], *opts, "-o", out, row["data"]], check=True,
                       stderr=subprocess.DEVNULL)
        with open(out) as g:
            m = json.load(g)
        R, P, S = ref[name], m["parameters"], m.get("std_errors", {})
        coef = [k for k in R if k == "intercept" or k.startswith("coef.")]
        dc = max(abs(P[k] - R[k]) / R.get("se." + k, S.get(k)) for k in coef)
        se = [abs(S[k] - R["se." + k]) / R["se." + k] for k in S if "se." + k in R]
        par = [abs(P[k] - R[k]) / R[k] for k in R if k.startswith(("likelihood.", "f."))]
        fmt = lambda v: "%.1e" % v if v else "0"
        print("| %s | %s | %s | %s | %s |" % (name, fmt(m["loglik"] - R["loglik"]), fmt(dc),
                                              fmt(max(se)) if se else "--",
                                              fmt(max(par)) if par else "--"))
