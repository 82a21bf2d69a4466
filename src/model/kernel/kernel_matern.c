/* kernel_matern.c -- the Matern-(p + 1/2) kernels, p = 0, 1, 2 (state
 * dimension d = p + 1), as the SDE (D + lambda)^d f = w, lambda =
 * sqrt(2d - 1)/lengthscale, with state x = (f, f', ..., f^(d-1)).
 *
 *   F = companion matrix of (s + lambda)^d,  L = e_{d-1},
 *   Qc = variance * kappa_d * lambda^(2d-1),  kappa = 2, 4, 16/3,
 *
 * (Hartikainen & Sarkka 2010; Sarkka & Solin 2019, ch. 12).
 *
 * A(dt) = exp(-lambda dt) sum_{k<d} (N dt)^k / k!, N = F + lambda I being
 * nilpotent (N^d = 0): exact and free of cancellation for small dt.
 *
 * Q(dt) is NOT formed as Pinf - A Pinf A^T, which loses every digit of its
 * small eigenvalues when dt << lengthscale (they scale like dt^(2d-1)).
 * Instead, with g(s) = expm(F s) L = exp(-lambda s) (c_i(s))_i, c_i a
 * polynomial (g_i is the i-th derivative of s^(d-1) e^(-lambda s)/(d-1)!),
 *
 *   Q_ij(dt) = Qc sum_{m,m'} c_im c_jm' I_{m+m'}(2 lambda, dt),
 *   I_n(a, t) = int_0^t s^n e^(-a s) ds,
 *
 * with I_n evaluated to full relative accuracy (a positive series for small
 * a t, the complement of the regularised incomplete gamma function
 * otherwise).  Each Q_ij is then dominated by its leading power of dt and is
 * accurate to a few ulps relative, down to dt = 0.  Derivatives follow from
 * dI_n(2 lambda, t)/dlambda = -2 I_{n+1}(2 lambda, t).
 */
#include <math.h>
#include <stddef.h>

#include "gmm/kernel.h"
#include "../model_dense.h"

#define MAXD 3

static const gmm_kernel_param matern_param[] = {
    {"variance", 0, GMM_KDEF_VARIANCE},
    {"lengthscale", 0, GMM_KDEF_LENGTHSCALE},
};

/* I[n] = int_0^t s^n exp(-a s) ds for n = 0..nmax, a > 0, t >= 0 (t may be
 * INFINITY). */
static void exp_moments(double a, double t, int nmax, double *I)
{
    double x = a * t;
    double fact = 1.0; /* n! */
    for (int n = 0; n <= nmax; n++) {
        if (n > 0)
            fact *= n;
        if (isinf(t)) {
            I[n] = fact / pow(a, n + 1);
        } else if (x < n + 1.0) {
            /* t^(n+1)/(n+1) e^-x sum_j x^j (n+1)!/(n+1+j)!: positive terms,
             * ratio < 1, so relative accuracy holds for every x in range. */
            double term = 1.0, sum = 1.0;
            for (int j = 1; j < 200; j++) {
                term *= x / (n + 1 + j);
                sum += term;
                if (term < 1e-17 * sum)
                    break;
            }
            I[n] = pow(t, n + 1) / (n + 1) * exp(-x) * sum;
        } else {
            /* n!/a^(n+1) (1 - e^-x sum_{k<=n} x^k/k!): the bracket is >= ~0.4
             * here, so the subtraction costs at most a bit or two. */
            double term = 1.0, sum = 1.0;
            for (int k = 1; k <= n; k++) {
                term *= x / k;
                sum += term;
            }
            I[n] = fact / pow(a, n + 1) * (1.0 - exp(-x) * sum);
        }
    }
}

static double binom(int n, int k)
{
    double r = 1.0;
    for (int i = 1; i <= k; i++)
        r = r * (n - k + i) / i;
    return r;
}

static double lambda_of(size_t d, double ell) { return sqrt(2.0 * (double)d - 1.0) / ell; }

static double kappa_of(size_t d) { return d == 1 ? 2.0 : d == 2 ? 4.0 : 16.0 / 3.0; }

/* Polynomial coefficients of g_i and their lambda-derivatives. */
static void impulse_coef(size_t d, double lam, double c[MAXD][MAXD], double dc[MAXD][MAXD])
{
    double fact[MAXD] = {1.0, 1.0, 2.0};
    for (size_t i = 0; i < d; i++)
        for (size_t m = 0; m < d; m++) {
            int k = (int)d - 1 - (int)m, e = (int)i - k;
            c[i][m] = dc[i][m] = 0.0;
            if (k < 0 || e < 0)
                continue;
            double sg = (e % 2) ? -1.0 : 1.0;
            c[i][m] = binom((int)i, k) * sg * pow(lam, e) / fact[m];
            dc[i][m] = e > 0 ? binom((int)i, k) * sg * e * pow(lam, e - 1) / fact[m] : 0.0;
        }
}

/* F = companion of (s + lambda)^d, and dF/dlambda. */
static void companion(size_t d, double lam, double *F, double *dF)
{
    md_zero(d * d, F);
    if (dF)
        md_zero(d * d, dF);
    for (size_t i = 0; i + 1 < d; i++)
        F[i * d + i + 1] = 1.0;
    for (size_t k = 0; k < d; k++) {
        int e = (int)(d - k);
        F[(d - 1) * d + k] = -binom((int)d, (int)k) * pow(lam, e);
        if (dF)
            dF[(d - 1) * d + k] = -binom((int)d, (int)k) * e * pow(lam, e - 1);
    }
}

static void matern_sde(size_t d, const double *p, double *F, double *LQL)
{
    double lam = lambda_of(d, p[1]);
    if (F)
        companion(d, lam, F, NULL);
    if (LQL) {
        md_zero(d * d, LQL);
        LQL[d * d - 1] = p[0] * kappa_of(d) * pow(lam, 2.0 * (double)d - 1.0);
    }
}

/* Pinf/variance and its lambda-derivative, in closed form. */
static void matern_pinf(size_t d, double lam, double *P, double *dP)
{
    md_zero(d * d, P);
    md_zero(d * d, dP);
    P[0] = 1.0;
    if (d == 2) {
        P[3] = lam * lam;
        dP[3] = 2.0 * lam;
    } else if (d == 3) {
        double l2 = lam * lam;
        P[2] = P[6] = -l2 / 3.0;
        P[4] = l2 / 3.0;
        P[8] = l2 * l2;
        dP[2] = dP[6] = -2.0 * lam / 3.0;
        dP[4] = 2.0 * lam / 3.0;
        dP[8] = 4.0 * l2 * lam;
    }
}

static void matern_stat(size_t d, const double *p, double *P, double *dP, double *H)
{
    double v = p[0], ell = p[1], lam = lambda_of(d, ell);
    double Pu[MAXD * MAXD], dPu[MAXD * MAXD];
    matern_pinf(d, lam, Pu, dPu);
    size_t dd = d * d;
    for (size_t i = 0; i < dd; i++) {
        if (P)
            P[i] = v * Pu[i];
        if (dP) {
            dP[i] = Pu[i];                              /* d/dvariance */
            dP[dd + i] = v * dPu[i] * (-lam / ell);     /* d/dlengthscale */
        }
    }
    if (H) {
        md_zero(d, H);
        H[0] = 1.0;
    }
}

static void matern_disc(size_t d, const double *p, double dt, double *A, double *Q, double *dA,
                        double *dQ)
{
    double v = p[0], ell = p[1], lam = lambda_of(d, ell), dlam = -lam / ell;
    size_t dd = d * d;
    double F[MAXD * MAXD], dF[MAXD * MAXD];
    double Nk[MAXD][MAXD * MAXD], dNk[MAXD][MAXD * MAXD], T[MAXD * MAXD];
    companion(d, lam, F, dF);
    /* N^k and d(N^k)/dlambda, k < d. */
    md_zero(dd, Nk[0]);
    md_zero(dd, dNk[0]);
    for (size_t i = 0; i < d; i++)
        Nk[0][i * d + i] = 1.0;
    for (size_t k = 1; k < d; k++) {
        double N[MAXD * MAXD], dN[MAXD * MAXD];
        for (size_t i = 0; i < dd; i++) {
            N[i] = F[i];
            dN[i] = dF[i];
        }
        for (size_t i = 0; i < d; i++) {
            N[i * d + i] += lam;
            dN[i * d + i] += 1.0;
        }
        md_mul(d, d, d, Nk[k - 1], N, Nk[k]);
        md_mul(d, d, d, dNk[k - 1], N, dNk[k]);
        md_mul(d, d, d, Nk[k - 1], dN, T);
        md_axpy(dd, 1.0, T, dNk[k]);
    }
    double e = exp(-lam * dt);
    if (A || dA) {
        double Aa[MAXD * MAXD], dAl[MAXD * MAXD];
        md_zero(dd, Aa);
        md_zero(dd, dAl);
        double w = 1.0;
        for (size_t k = 0; k < d; k++) {
            md_axpy(dd, e * w, Nk[k], Aa);
            md_axpy(dd, e * w, dNk[k], dAl);
            w *= dt / (double)(k + 1);
        }
        md_axpy(dd, -dt, Aa, dAl);
        for (size_t i = 0; i < dd; i++) {
            if (A)
                A[i] = Aa[i];
            if (dA) {
                dA[i] = 0.0;
                dA[dd + i] = dAl[i] * dlam;
            }
        }
    }
    if (Q || dQ) {
        double c[MAXD][MAXD], dc[MAXD][MAXD], I[2 * MAXD + 1];
        double qc = v * kappa_of(d) * pow(lam, 2.0 * (double)d - 1.0);
        impulse_coef(d, lam, c, dc);
        exp_moments(2.0 * lam, dt, 2 * (int)d - 1, I);
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j <= i; j++) {
                double s = 0.0, ds = 0.0;
                for (size_t m = 0; m < d; m++)
                    for (size_t n = 0; n < d; n++) {
                        double cc = c[i][m] * c[j][n];
                        s += cc * I[m + n];
                        ds += (dc[i][m] * c[j][n] + c[i][m] * dc[j][n]) * I[m + n]
                              - 2.0 * cc * I[m + n + 1];
                    }
                double q = qc * s;
                /* dQ/dlambda = Qc' / Qc Q + Qc ds, Qc' / Qc = (2d - 1)/lambda */
                double dql = (2.0 * (double)d - 1.0) / lam * q + qc * ds;
                if (Q)
                    Q[i * d + j] = Q[j * d + i] = q;
                if (dQ) {
                    dQ[i * d + j] = dQ[j * d + i] = q / v;
                    dQ[dd + i * d + j] = dQ[dd + j * d + i] = dql * dlam;
                }
            }
    }
}

static double matern_cov(size_t d, const double *p, double tau, double *dk)
{
    double v = p[0], ell = p[1], lam = lambda_of(d, ell), r = fabs(tau), x = lam * r;
    double e = exp(-x), poly, dpoly_dlam;
    if (d == 1) {
        poly = 1.0;
        dpoly_dlam = -r;
    } else if (d == 2) {
        poly = 1.0 + x;
        dpoly_dlam = -lam * r * r;
    } else {
        poly = 1.0 + x + x * x / 3.0;
        dpoly_dlam = -lam * r * r * (1.0 + x) / 3.0;
    }
    /* dpoly_dlam above is d(poly e^-x)/dlambda / e^-x */
    if (dk) {
        dk[0] = poly * e;
        dk[1] = v * dpoly_dlam * e * (-lam / ell);
    }
    return v * poly * e;
}

#define MATERN_TYPE(D, NAME, FORMULA, MINREL, MINREL_OSC, MINROWS, MINROWS_OSC)               \
    static size_t NAME##_dim(const double *p)                                                 \
    {                                                                                         \
        (void)p;                                                                              \
        return D;                                                                             \
    }                                                                                         \
    static void NAME##_sde(const double *p, double *F, double *LQL)                           \
    {                                                                                         \
        matern_sde(D, p, F, LQL);                                                             \
    }                                                                                         \
    static void NAME##_stat(const double *p, double *P, double *dP, double *H)                \
    {                                                                                         \
        matern_stat(D, p, P, dP, H);                                                          \
    }                                                                                         \
    static void NAME##_disc(const double *p, double dt, double *A, double *Q, double *dA,     \
                            double *dQ)                                                       \
    {                                                                                         \
        matern_disc(D, p, dt, A, Q, dA, dQ);                                                  \
    }                                                                                         \
    static double NAME##_cov(const double *p, double tau, double *dk)                         \
    {                                                                                         \
        return matern_cov(D, p, tau, dk);                                                     \
    }                                                                                         \
    const gmm_kernel_type gmm_kernel_##NAME = {                                               \
        #NAME, FORMULA, 2, matern_param, NAME##_dim, 0, 1, MINREL, MINREL_OSC, MINROWS, MINROWS_OSC,                \
        NAME##_sde, NAME##_stat, NAME##_disc, NAME##_cov, NULL, 0};

/* Accuracy limits measured by tests/bench/bench_ssm_accuracy.c (worst
 * relative loglik error over 9 data sets of n = 300, see ssm.h): Matern-1/2
 * stays below 1e-10 down to dt/l = 1e-6; Matern-3/2 reaches 1e-6 near
 * dt/l = 3e-4 (2e-3 times a cosine/periodic factor); Matern-5/2 near
 * dt/l = 2e-2 (the error grows like (l/dt)^5: ~1e-5 at 1e-2).  In the
 * square-root form every one stays below 4e-9 down to dt/l = 1e-10, the
 * end of the sweep, which is taken as the limit for Matern-3/2 and -5/2;
 * Matern-1/2, whose precision grows only like l/dt, has none in either. */
MATERN_TYPE(1, matern12, "variance * exp(-r), r = |tau|/lengthscale", 0.0, 0.0, 0.0, 0.0)
MATERN_TYPE(2, matern32, "variance * (1 + r) exp(-r), r = sqrt(3)|tau|/lengthscale", 3e-4, 2e-3,
            1e-10, 1e-10)
MATERN_TYPE(3, matern52,
            "variance * (1 + r + r^2/3) exp(-r), r = sqrt(5)|tau|/lengthscale", 2e-2, 2e-2,
            1e-10, 1e-10)
