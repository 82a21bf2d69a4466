#!/usr/bin/env python3
"""bench_hmc_adapt.py -- NUTS's warm-up adaptation under the Laplace map, variants side by side.

    scripts/bench_hmc_adapt.py --dir DIR --variant NAME=BINARY[:EXTRA ARGS] ... CASE=MODEL:CHAINS:WARMUP:DRAWS ...

Runs `BINARY hmc --model MODEL --chains CHAINS --warmup WARMUP --draws DRAWS --threads 1
--seed S --quiet -o DIR/...` for every case, variant and seed (--seeds, default 1, from --first-seed, default 1), then
prints one markdown row per case and variant: mean leapfrog steps per iteration (kept
draws), divergences, the step sizes, min bulk ESS of the latents f, ESS per 1000 gradients
(warm-up included), ESS per CPU second (user + system of the process, warm-up and output
included), max R-hat of f, and the means of f against the first variant's of the same seed:
max |z| (count above 3) and the rms of z, z = (m1 - m2) / sqrt(sd1^2 / ess1 + sd2^2 / ess2).
With several seeds the figures are the seeds' means (max |z|: the largest).  Summaries by
`BINARY summary` (the first variant's binary).
"""
import argparse
import csv
import json
import math
import os
import resource
import subprocess
import sys


def run(cmd):
    """CPU seconds (user + system) of the child running cmd."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def summary(binary, draws):
    out = subprocess.run([binary, "summary", draws], check=True, capture_output=True, text=True)
    rows = list(csv.DictReader(out.stdout.splitlines()))
    return {r["variable"]: r for r in rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("cases", nargs="+")
    a = ap.parse_args()
    variants = []
    for v in a.variant:
        name, rest = v.split("=", 1)
        binary, _, extra = rest.partition(":")
        variants.append((name, binary, extra.split() if extra else []))
    os.makedirs(a.dir, exist_ok=True)
    sumbin = variants[0][1]
    print("| case | variant | leapfrog/iteration | divergences | step size | min bulk ESS f "
          "| ESS per 1000 gradients | ESS per CPU s | max R-hat f | max abs z (> 3), rms z |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for case in a.cases:
        cname, spec = case.split("=", 1)
        model, chains, warmup, ndraw = spec.split(":")
        res = {}
        for seed in range(a.first_seed, a.first_seed + a.seeds):
            for name, binary, extra in variants:
                out = os.path.join(a.dir, f"{cname}_{name}_{seed}.csv")
                cmd = [binary, "hmc", "--model", model, "--chains", chains, "--warmup", warmup,
                       "--draws", ndraw, "--threads", "1", "--seed", str(seed), "--quiet",
                       "-o", out] + extra
                cpu = run(cmd)
                info = json.load(open(out + ".json"))
                s = summary(sumbin, out)
                fs = {k: v for k, v in s.items() if k.startswith("f[")}
                ess = min(float(v["ess_bulk"]) for v in fs.values())
                rhat = max(float(v["rhat"]) for v in fs.values())
                lw, ld = info["leapfrog_steps"]["warmup"], info["leapfrog_steps"]["draws"]
                grads = sum(lw) + sum(ld)
                iters = int(chains) * int(ndraw)
                res[(name, seed)] = dict(
                    leap=sum(ld) / iters, div=sum(info["divergences"]),
                    eps=info["step_size"], ess=ess, per_grad=1000.0 * ess / grads,
                    per_cpu=ess / cpu, rhat=rhat, f=fs, cpu=cpu)
                print(f"{cname} {name} seed {seed}: cpu {cpu:.2f} s, leapfrog {res[(name, seed)]['leap']:.1f}, "
                      f"ess {ess:.0f}", file=sys.stderr)
        for name, _, _ in variants:
            rs = [res[(name, s)] for s in range(a.first_seed, a.first_seed + a.seeds)]
            mean = lambda k: sum(r[k] for r in rs) / len(rs)
            eps = [e for r in rs for e in r["eps"]]
            zcol = "--"
            if name != variants[0][0]:
                zmax, nbig, z2, nz = 0.0, 0, 0.0, 0
                for s in range(a.first_seed, a.first_seed + a.seeds):
                    f1, f2 = res[(variants[0][0], s)]["f"], res[(name, s)]["f"]
                    for k in f1:
                        m1, m2 = float(f1[k]["mean"]), float(f2[k]["mean"])
                        v = (float(f1[k]["sd"]) ** 2 / float(f1[k]["ess_bulk"]) +
                             float(f2[k]["sd"]) ** 2 / float(f2[k]["ess_bulk"]))
                        z = (m1 - m2) / math.sqrt(v)
                        zmax = max(zmax, abs(z))
                        nbig += abs(z) > 3
                        z2 += z * z
                        nz += 1
                zcol = f"{zmax:.2f} ({nbig}), {math.sqrt(z2 / nz):.2f}"
            print(f"| {cname} | {name} | {mean('leap'):.1f} | {sum(r['div'] for r in rs)} "
                  f"| {min(eps):.3g}-{max(eps):.3g} | {mean('ess'):.0f} | {mean('per_grad'):.1f} "
                  f"| {mean('per_cpu'):.0f} | {max(r['rhat'] for r in rs):.3f} | {zcol} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
