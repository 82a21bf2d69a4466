#!/usr/bin/python3
"""rw_co2_dense.py -- the dense baseline of the paper's CO2 experiment.

Rasmussen & Williams' CO2 kernel (GPML, eq. 5.19), fitted as an exact GP with
scikit-learn on data/co2_train.csv (observed rows) and scored on
data/co2_test.csv by the test mean log predictive density of y:

    mlpd = mean_i log N(y_i | m_i, v_i + s^2)

where m_i, v_i are the posterior mean and variance of the latent function
(which includes the correlated "noise" RBF term k4) and s^2 the white noise.

    k1 = t1^2 exp(-r^2 / (2 t2^2))                              long-term trend
    k2 = t3^2 exp(-r^2 / (2 t4^2) - 2 sin^2(pi r) / t5^2)       seasonal, decaying
    k3 = t6^2 (1 + r^2 / (2 t8 t7^2))^(-t8)                      medium term
    k4 = t9^2 exp(-r^2 / (2 t10^2)) + t11^2 delta                correlated + white noise

The period is fixed at one year, as in GPML.  y is centred by its training
mean (as gmm-infer does).  The fit maximises the log marginal likelihood with
L-BFGS-B (scikit-learn's default) from R&W's published values, then from
--restarts further starts drawn around them (log-normal, fixed seed), and
keeps the best.

Prints one JSON object on stdout:
  {"model": "rasmussen-williams-5.19", "mlpd": ..., "n_train": ..., "n_test": ...,
   "params": {...}, "seconds": ...}
Progress goes to stderr.  Needs Debian's python3-sklearn (scripts/install-deps.sh --bench).
"""

import os

# One BLAS thread, as every baseline here is timed; must precede numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from scipy.linalg import cho_factor, cho_solve  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: E402
from sklearn.gaussian_process.kernels import (  # noqa: E402
    RBF, ConstantKernel, ExpSineSquared, RationalQuadratic, WhiteKernel)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")

# GPML section 5.4.3: their fitted values (ppm and years; t10 = 1.6 months).
RW_VALUES = {
    "t1_long_magnitude": 66.0, "t2_long_lengthscale": 67.0,
    "t3_seasonal_magnitude": 2.4, "t4_seasonal_decay_lengthscale": 90.0,
    "t5_seasonal_smoothness": 1.3,
    "t6_medium_magnitude": 0.66, "t7_medium_lengthscale": 1.2, "t8_medium_shape": 0.78,
    "t9_noise_magnitude": 0.18, "t10_noise_lengthscale": 1.6 / 12.0,
    "t11_white_noise": 0.19,
}
WIDE = (1e-5, 1e5)


def make_kernel(t):
    k1 = ConstantKernel(t["t1_long_magnitude"] ** 2, WIDE) * RBF(t["t2_long_lengthscale"], WIDE)
    k2 = (ConstantKernel(t["t3_seasonal_magnitude"] ** 2, WIDE)
          * RBF(t["t4_seasonal_decay_lengthscale"], WIDE)
          * ExpSineSquared(t["t5_seasonal_smoothness"], 1.0, WIDE, "fixed"))
    k3 = ConstantKernel(t["t6_medium_magnitude"] ** 2, WIDE) * RationalQuadratic(
        t["t7_medium_lengthscale"], t["t8_medium_shape"], WIDE, WIDE)
    k4 = (ConstantKernel(t["t9_noise_magnitude"] ** 2, WIDE) * RBF(t["t10_noise_lengthscale"], WIDE)
          + WhiteKernel(t["t11_white_noise"] ** 2, (1e-8, 1e3)))
    return k1 + k2 + k3 + k4


def kernel_values(k):
    """Map a fitted sklearn kernel back to R&W's theta (magnitudes as std devs)."""
    p = k.get_params()
    # k = ((k1 + k2) + k3) + k4, built left to right by make_kernel.
    k1, k2, k3, k4 = (p["k1__k1__k1"], p["k1__k1__k2"], p["k1__k2"], p["k2"])
    return {
        "t1_long_magnitude": float(np.sqrt(k1.k1.constant_value)),
        "t2_long_lengthscale": float(k1.k2.length_scale),
        "t3_seasonal_magnitude": float(np.sqrt(k2.k1.k1.constant_value)),
        "t4_seasonal_decay_lengthscale": float(k2.k1.k2.length_scale),
        "t5_seasonal_smoothness": float(k2.k2.length_scale),
        "t6_medium_magnitude": float(np.sqrt(k3.k1.constant_value)),
        "t7_medium_lengthscale": float(k3.k2.length_scale),
        "t8_medium_shape": float(k3.k2.alpha),
        "t9_noise_magnitude": float(np.sqrt(k4.k1.k1.constant_value)),
        "t10_noise_lengthscale": float(k4.k1.k2.length_scale),
        "t11_white_noise": float(np.sqrt(k4.k2.noise_level)),
    }


def load(path):
    a = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    with open(path) as f:
        header = f.readline().strip()
    if header != "decimal_year,co2_ppm":
        sys.exit(f"rw_co2_dense.py: {path}: unexpected header '{header}'")
    ok = np.isfinite(a[:, 1])
    return a[ok, 0], a[ok, 1], int((~ok).sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", default=os.path.join(DATA, "co2_train.csv"))
    ap.add_argument("--test", default=os.path.join(DATA, "co2_test.csv"))
    ap.add_argument("--restarts", type=int, default=3,
                    help="starts besides R&W's values (default 3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-fit", action="store_true",
                    help="score R&W's published values without fitting")
    args = ap.parse_args()

    t0 = time.perf_counter()
    x, y, n_missing = load(args.train)
    xt, yt, n_missing_test = load(args.test)
    y_mean = float(y.mean())
    yc = y - y_mean
    X, Xt = x[:, None], xt[:, None]
    print(f"rw_co2_dense.py: train {len(x)} observed ({n_missing} missing dropped), "
          f"test {len(xt)} observed", file=sys.stderr)

    rng = np.random.default_rng(args.seed)
    starts = [dict(RW_VALUES)]
    for _ in range(0 if args.no_fit else args.restarts):
        # Log-normal spread of about a factor 2 around R&W's values.
        starts.append({k: v * float(np.exp(0.7 * rng.standard_normal())) for k, v in RW_VALUES.items()})

    best, runs = None, []
    for i, start in enumerate(starts):
        gp = GaussianProcessRegressor(make_kernel(start), alpha=0.0,
                                      optimizer=None if args.no_fit else "fmin_l_bfgs_b",
                                      normalize_y=False, copy_X_train=False)
        ts = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            gp.fit(X, yc)
        lml = float(gp.log_marginal_likelihood_value_)
        conv = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        runs.append({"start": i, "loglik": lml, "converged": conv})
        print(f"rw_co2_dense.py: start {i}: log marginal likelihood {lml:.6f}"
              f"{'' if conv else ' (not converged)'} in {time.perf_counter() - ts:.1f} s",
              file=sys.stderr)
        if best is None or lml > best.log_marginal_likelihood_value_:
            best = gp

    # Predictive moments of y, computed from the fitted kernel directly so it is
    # explicit that the white noise enters the variance once and the
    # cross-covariance not at all.
    k = best.kernel_
    noise = k.get_params()["k2"].k2.noise_level
    K = k(X)  # includes the white noise on the diagonal
    c = cho_factor(K, lower=True)
    alpha = cho_solve(c, yc)
    Ks = k.k1(Xt, X) + k.k2.k1(Xt, X)  # latent part only (white noise is 0 off the diagonal)
    mean = Ks @ alpha + y_mean
    var_f = k.k1.diag(Xt) + k.k2.k1.diag(Xt) - np.einsum("ij,ji->i", Ks, cho_solve(c, Ks.T))
    var_y = var_f + noise
    m_sk, s_sk = best.predict(Xt, return_std=True)
    assert np.allclose(m_sk + y_mean, mean, rtol=0, atol=1e-6), "mean disagrees with sklearn"
    assert np.allclose(s_sk ** 2, var_y, rtol=1e-6, atol=1e-9), "variance disagrees with sklearn"
    lpd = -0.5 * (np.log(2 * np.pi * var_y) + (yt - mean) ** 2 / var_y)

    out = {
        "model": "rasmussen-williams-5.19",
        "mlpd": float(lpd.mean()),
        "n_train": int(len(x)),
        "n_test": int(len(xt)),
        "params": kernel_values(k),
        "seconds": round(time.perf_counter() - t0, 3),
        "log_marginal_likelihood": float(best.log_marginal_likelihood_value_),
        "train_mean": y_mean,
        "test_rmse": float(np.sqrt(np.mean((yt - mean) ** 2))),
        "fitted": not args.no_fit,
        "starts": runs,
        "n_train_missing_dropped": n_missing,
        "n_test_missing_dropped": n_missing_test,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
