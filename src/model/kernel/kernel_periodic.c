/* kernel_periodic.c -- kernels built from oscillators: constant, cosine,
 * periodic (Solin & Sarkka 2014) and quasiperiodic (the paper's Matern-1/2
 * times a sum of cosines).
 *
 * A harmonic of angular frequency w is the state (c, s) with F = [0 -w; w 0],
 * A(dt) = R(w dt) the rotation by w dt, Pinf = q^2 I and H = (1, 0), so that
 * H A(tau) Pinf H^T = q^2 cos(w tau).  A rotation keeps q^2 I invariant, so
 * Q(dt) = Pinf - A Pinf A^T = 0: constant, cosine and periodic have zero
 * process noise (see kernel.h for the regularisation); quasiperiodic damps
 * every harmonic by exp(-dt/lengthscale), which gives
 * Q(dt) = variance (1 - exp(-2 dt/lengthscale)) I, exact via expm1.
 *
 * PERIODIC.  With z = 1/lengthscale^2 and w0 = 2 pi/period,
 *
 *   v exp(-2 sin^2(w0 tau/2) z) = v e^-z exp(z cos(w0 tau))
 *                               = v e^-z [I_0(z) + 2 sum_{j>=1} I_j(z) cos(j w0 tau)]
 *
 * (generating function of the modified Bessel functions I_j).  The kernel
 * used here IS the series truncated to j = 0..J, weights q_0^2 = v e^-z
 * I_0(z), q_j^2 = 2 v e^-z I_j(z): with the scaled e^-z I_j(z) nothing
 * overflows however small the lengthscale.  Since the full series sums to v
 * at tau = 0, the truncation error is at most v (1 - sum_j q_j^2 / v),
 * attained at tau = 0 (measured in tests/model/test_kernel.c: 1.9% of v at
 * lengthscale 1, J = 2; it shrinks fast as the lengthscale grows and tends
 * to 1 as it shrinks).  The j = 0 harmonic has w = 0 (a constant) and keeps
 * its 2-dimensional block (the second coordinate is never observed), giving
 * state dimension 2(J + 1).
 */
#include <math.h>
#include <stddef.h>

#include "gmm/kernel.h"
#include "../model_dense.h"

#define TWO_PI 6.283185307179586476925286766559

/* ---- shared helpers ------------------------------------------------------- */

/* Set the 2x2 block at (2b, 2b) of the d x d row-major M to
 * s * [cos t, -sin t; sin t, cos t]. */
static void rot_block(double *M, size_t d, size_t b, double s, double c, double sn)
{
    size_t r = 2 * b;
    M[r * d + r] = s * c;
    M[r * d + r + 1] = -s * sn;
    M[(r + 1) * d + r] = s * sn;
    M[(r + 1) * d + r + 1] = s * c;
}

/* dR(t)/dt scaled: s * [-sin t, -cos t; cos t, -sin t]. */
static void drot_block(double *M, size_t d, size_t b, double s, double c, double sn)
{
    size_t r = 2 * b;
    M[r * d + r] = -s * sn;
    M[r * d + r + 1] = -s * c;
    M[(r + 1) * d + r] = s * c;
    M[(r + 1) * d + r + 1] = -s * sn;
}

static void diag_fill(double *M, size_t d, double v)
{
    md_zero(d * d, M);
    for (size_t i = 0; i < d; i++)
        M[i * d + i] = v;
}

/* H = (1, 0, 1, 0, ...). */
static void harmonic_H(double *H, size_t d)
{
    for (size_t i = 0; i < d; i++)
        H[i] = (i % 2 == 0) ? 1.0 : 0.0;
}

/* Phase 2 pi j tau / period, the same expression everywhere so that the
 * state space and k(tau) agree to the last bit. */
static double phase(double j, double tau, double period) { return TWO_PI * j * tau / period; }

static size_t harmonics_of(const double *p, size_t i) { return (size_t)p[i]; }

/* w[n] = exp(-z) I_n(z), n = 0..nmax, z > 0.  Miller's backward recurrence
 * I_{k-1} = I_{k+1} + (2k/z) I_k from an order N far beyond nmax, normalised
 * by the exact identity exp(-z) (I_0 + 2 sum_{k>=1} I_k) = 1 (the generating
 * function at angle 0).  I_k/I_0 ~ exp(-k^2/(2z)) for large z, so N = nmax +
 * 25 + 9 sqrt(z) leaves a tail below 1e-17.  For z > 1e7 the Hankel
 * expansion with three correction terms (relative error < 1e-15 for
 * n <= 65) is used instead.  Tested against GSL's gsl_sf_bessel_In_scaled. */
static void bessel_scaled(double z, int nmax, double *w)
{
    if (z > 1e7) {
        for (int n = 0; n <= nmax; n++) {
            double mu = 4.0 * n * n, t = 8.0 * z;
            double s = 1.0 - (mu - 1.0) / t + (mu - 1.0) * (mu - 9.0) / (2.0 * t * t)
                       - (mu - 1.0) * (mu - 9.0) * (mu - 25.0) / (6.0 * t * t * t);
            w[n] = s / sqrt(TWO_PI * z);
        }
        return;
    }
    int N = nmax + 25 + (int)ceil(9.0 * sqrt(z));
    double ip1 = 0.0, ik = 1e-280, sum = 0.0;
    for (int n = 0; n <= nmax; n++)
        w[n] = 0.0;
    for (int k = N; k >= 1; k--) {
        if (k <= nmax)
            w[k] = ik;
        sum += 2.0 * ik;
        double im1 = ip1 + (2.0 * k / z) * ik;
        ip1 = ik;
        ik = im1;
        if (ik > 1e250) {
            ip1 *= 1e-250;
            ik *= 1e-250;
            sum *= 1e-250;
            for (int n = k; n <= nmax; n++)
                w[n] *= 1e-250;
        }
    }
    sum += ik;
    w[0] = ik;
    for (int n = 0; n <= nmax; n++)
        w[n] /= sum;
}

/* Periodic weights q_j^2 / v and d(q_j^2/v)/dlengthscale, j = 0..J. */
static void periodic_weights(double ell, size_t J, double *q, double *dq)
{
    double z = 1.0 / (ell * ell), dz = -2.0 * z / ell;
    double w[GMM_KERNEL_MAXHARMONICS + 2] = {0};
    bessel_scaled(z, (int)J + 1, w);
    for (size_t j = 0; j <= J; j++) {
        /* d/dz (e^-z I_j) = e^-z ((I_{j-1} + I_{j+1})/2 - I_j), I_{-1} = I_1 */
        double wm = j == 0 ? w[1] : w[j - 1];
        double dw = 0.5 * (wm + w[j + 1]) - w[j];
        double f = j == 0 ? 1.0 : 2.0;
        q[j] = f * w[j];
        if (dq)
            dq[j] = f * dw * dz;
    }
}

/* ---- constant(variance) ---------------------------------------------------- */

static const gmm_kernel_param constant_param[] = {{"variance", 0, GMM_KDEF_VARIANCE}};

static size_t constant_dim(const double *p)
{
    (void)p;
    return 1;
}

static void constant_sde(const double *p, double *F, double *LQL)
{
    (void)p;
    if (F)
        F[0] = 0.0;
    if (LQL)
        LQL[0] = 0.0;
}

static void constant_stat(const double *p, double *P, double *dP, double *H)
{
    if (P)
        P[0] = p[0];
    if (dP)
        dP[0] = 1.0;
    if (H)
        H[0] = 1.0;
}

static void constant_disc(const double *p, double dt, double *A, double *Q, double *dA,
                          double *dQ)
{
    (void)p;
    (void)dt;
    if (A)
        A[0] = 1.0;
    if (Q)
        Q[0] = 0.0;
    if (dA)
        dA[0] = 0.0;
    if (dQ)
        dQ[0] = 0.0;
}

static double constant_cov(const double *p, double tau, double *dk)
{
    (void)tau;
    if (dk)
        dk[0] = 1.0;
    return p[0];
}

const gmm_kernel_type gmm_kernel_constant = {
    "constant", "variance", 1, constant_param, constant_dim, 1, 1, 0.0, 0.0, 0.0, 0.0,
    constant_sde, constant_stat, constant_disc, constant_cov, NULL, 0};

/* ---- cosine(variance, period) ---------------------------------------------- */

static const gmm_kernel_param cosine_param[] = {
    {"variance", 0, GMM_KDEF_VARIANCE},
    {"period", 0, GMM_KDEF_ONE},
};

static size_t cosine_dim(const double *p)
{
    (void)p;
    return 2;
}

static void cosine_sde(const double *p, double *F, double *LQL)
{
    double w = TWO_PI / p[1];
    if (F) {
        md_zero(4, F);
        F[1] = -w;
        F[2] = w;
    }
    if (LQL)
        md_zero(4, LQL);
}

static void cosine_stat(const double *p, double *P, double *dP, double *H)
{
    if (P)
        diag_fill(P, 2, p[0]);
    if (dP) {
        diag_fill(dP, 2, 1.0);
        md_zero(4, dP + 4);
    }
    if (H)
        harmonic_H(H, 2);
}

static void cosine_disc(const double *p, double dt, double *A, double *Q, double *dA,
                        double *dQ)
{
    double t = phase(1.0, dt, p[1]), c = cos(t), s = sin(t);
    if (A)
        rot_block(A, 2, 0, 1.0, c, s);
    if (Q)
        md_zero(4, Q);
    if (dA) {
        md_zero(4, dA);
        drot_block(dA + 4, 2, 0, -t / p[1], c, s); /* dt/dperiod = -t/period */
    }
    if (dQ)
        md_zero(8, dQ);
}

static double cosine_cov(const double *p, double tau, double *dk)
{
    double t = phase(1.0, tau, p[1]);
    if (dk) {
        dk[0] = cos(t);
        dk[1] = p[0] * sin(t) * t / p[1];
    }
    return p[0] * cos(t);
}

/* h(tau) = (1, 0) R(t) = (cos t, -sin t), t = 2 pi tau/period. */
static void cosine_hmod(const double *p, double tau, double *h, double *dh)
{
    double t = phase(1.0, tau, p[1]), c = cos(t), s = sin(t), dt_dp = -t / p[1];
    h[0] = c;
    h[1] = -s;
    if (dh) {
        dh[0] = dh[1] = 0.0;
        dh[2] = -s * dt_dp;
        dh[3] = -c * dt_dp;
    }
}

const gmm_kernel_type gmm_kernel_cosine = {
    "cosine", "variance * cos(2 pi tau/period)", 2, cosine_param, cosine_dim, 1, 2, 0.0, 0.0,
    0.0, 0.0, cosine_sde, cosine_stat, cosine_disc, cosine_cov, cosine_hmod, 2};

/* ---- periodic(variance, lengthscale, period, harmonics) --------------------- */

static const gmm_kernel_param periodic_param[] = {
    {"variance", 0, GMM_KDEF_VARIANCE},
    {"lengthscale", 0, GMM_KDEF_ONE},
    {"period", 0, GMM_KDEF_ONE},
    {"harmonics", 1, GMM_KDEF_HARMONICS},
};

static size_t periodic_dim(const double *p) { return 2 * (harmonics_of(p, 3) + 1); }

static void periodic_sde(const double *p, double *F, double *LQL)
{
    size_t J = harmonics_of(p, 3), d = 2 * (J + 1);
    if (F) {
        md_zero(d * d, F);
        for (size_t j = 0; j <= J; j++) {
            double w = TWO_PI * (double)j / p[2];
            F[2 * j * d + 2 * j + 1] = -w;
            F[(2 * j + 1) * d + 2 * j] = w;
        }
    }
    if (LQL)
        md_zero(d * d, LQL);
}

static void periodic_stat(const double *p, double *P, double *dP, double *H)
{
    size_t J = harmonics_of(p, 3), d = 2 * (J + 1), dd = d * d;
    double q[GMM_KERNEL_MAXHARMONICS + 1], dq[GMM_KERNEL_MAXHARMONICS + 1];
    periodic_weights(p[1], J, q, dq);
    if (P)
        md_zero(dd, P);
    if (dP)
        md_zero(3 * dd, dP);
    for (size_t j = 0; j <= J; j++)
        for (size_t i = 2 * j; i < 2 * j + 2; i++) {
            if (P)
                P[i * d + i] = p[0] * q[j];
            if (dP) {
                dP[i * d + i] = q[j];
                dP[dd + i * d + i] = p[0] * dq[j];
            }
        }
    if (H)
        harmonic_H(H, d);
}

static void periodic_disc(const double *p, double dt, double *A, double *Q, double *dA,
                          double *dQ)
{
    size_t J = harmonics_of(p, 3), d = 2 * (J + 1), dd = d * d;
    if (A)
        md_zero(dd, A);
    if (dA)
        md_zero(3 * dd, dA);
    for (size_t j = 0; j <= J; j++) {
        double t = phase((double)j, dt, p[2]), c = cos(t), s = sin(t);
        if (A)
            rot_block(A, d, j, 1.0, c, s);
        if (dA)
            drot_block(dA + 2 * dd, d, j, -t / p[2], c, s);
    }
    if (Q)
        md_zero(dd, Q);
    if (dQ)
        md_zero(3 * dd, dQ);
}

static double periodic_cov(const double *p, double tau, double *dk)
{
    size_t J = harmonics_of(p, 3);
    double q[GMM_KERNEL_MAXHARMONICS + 1], dq[GMM_KERNEL_MAXHARMONICS + 1];
    periodic_weights(p[1], J, q, dq);
    double k = 0.0, kl = 0.0, kp = 0.0;
    for (size_t j = 0; j <= J; j++) {
        double t = phase((double)j, tau, p[2]), c = cos(t);
        k += q[j] * c;
        kl += dq[j] * c;
        kp += q[j] * sin(t) * t / p[2];
    }
    if (dk) {
        dk[0] = k;
        dk[1] = p[0] * kl;
        dk[2] = p[0] * kp;
    }
    return p[0] * k;
}

static void periodic_hmod(const double *p, double tau, double *h, double *dh)
{
    size_t J = harmonics_of(p, 3), d = 2 * (J + 1);
    if (dh)
        md_zero(3 * d, dh);
    for (size_t j = 0; j <= J; j++) {
        double t = phase((double)j, tau, p[2]), c = cos(t), s = sin(t), dt_dp = -t / p[2];
        h[2 * j] = c;
        h[2 * j + 1] = -s;
        if (dh) {
            dh[2 * d + 2 * j] = -s * dt_dp;
            dh[2 * d + 2 * j + 1] = -c * dt_dp;
        }
    }
}

const gmm_kernel_type gmm_kernel_periodic = {
    "periodic",
    "variance * exp(-2 sin^2(pi tau/period)/lengthscale^2), as its cosine series "
    "truncated to harmonics 0..harmonics",
    4, periodic_param, periodic_dim, 1, 4, 0.0, 0.0, 0.0, 0.0,
    periodic_sde, periodic_stat, periodic_disc, periodic_cov, periodic_hmod, 2};

/* ---- quasiperiodic(variance, lengthscale, period, harmonics) ---------------- */

static const gmm_kernel_param quasi_param[] = {
    {"variance", 0, GMM_KDEF_VARIANCE},
    {"lengthscale", 0, GMM_KDEF_LENGTHSCALE},
    {"period", 0, GMM_KDEF_ONE},
    {"harmonics", 1, GMM_KDEF_HARMONICS},
};

static size_t quasi_dim(const double *p) { return 2 * harmonics_of(p, 3); }

static void quasi_sde(const double *p, double *F, double *LQL)
{
    size_t J = harmonics_of(p, 3), d = 2 * J;
    if (F) {
        diag_fill(F, d, -1.0 / p[1]);
        for (size_t j = 0; j < J; j++) {
            double w = TWO_PI * (double)(j + 1) / p[2];
            F[2 * j * d + 2 * j + 1] = -w;
            F[(2 * j + 1) * d + 2 * j] = w;
        }
    }
    if (LQL)
        diag_fill(LQL, d, 2.0 * p[0] / p[1]);
}

static void quasi_stat(const double *p, double *P, double *dP, double *H)
{
    size_t d = quasi_dim(p), dd = d * d;
    if (P)
        diag_fill(P, d, p[0]);
    if (dP) {
        diag_fill(dP, d, 1.0);
        md_zero(2 * dd, dP + dd);
    }
    if (H)
        harmonic_H(H, d);
}

static void quasi_disc(const double *p, double dt, double *A, double *Q, double *dA, double *dQ)
{
    size_t J = harmonics_of(p, 3), d = 2 * J, dd = d * d;
    double v = p[0], ell = p[1], e = exp(-dt / ell);
    if (A)
        md_zero(dd, A);
    if (dA)
        md_zero(3 * dd, dA);
    for (size_t j = 0; j < J; j++) {
        double t = phase((double)(j + 1), dt, p[2]), c = cos(t), s = sin(t);
        if (A)
            rot_block(A, d, j, e, c, s);
        if (dA) {
            rot_block(dA + dd, d, j, e * dt / (ell * ell), c, s);
            drot_block(dA + 2 * dd, d, j, -e * t / p[2], c, s);
        }
    }
    double g = -expm1(-2.0 * dt / ell);          /* 1 - exp(-2 dt/l), exact */
    double dg = -exp(-2.0 * dt / ell) * 2.0 * dt / (ell * ell);
    if (Q)
        diag_fill(Q, d, v * g);
    if (dQ) {
        diag_fill(dQ, d, g);
        diag_fill(dQ + dd, d, v * dg);
        md_zero(dd, dQ + 2 * dd);
    }
}

static double quasi_cov(const double *p, double tau, double *dk)
{
    size_t J = harmonics_of(p, 3);
    double r = fabs(tau), e = exp(-r / p[1]), s = 0.0, sp = 0.0;
    for (size_t j = 1; j <= J; j++) {
        double t = phase((double)j, tau, p[2]);
        s += cos(t);
        sp += sin(t) * t / p[2];
    }
    if (dk) {
        dk[0] = e * s;
        dk[1] = p[0] * e * s * r / (p[1] * p[1]);
        dk[2] = p[0] * e * sp;
    }
    return p[0] * e * s;
}

const gmm_kernel_type gmm_kernel_quasiperiodic = {
    "quasiperiodic",
    "variance * exp(-|tau|/lengthscale) * sum_{j=1..harmonics} cos(2 pi j tau/period)",
    4, quasi_param, quasi_dim, 0, 1, 0.0, 0.0, 0.0, 0.0,
    quasi_sde, quasi_stat, quasi_disc, quasi_cov, NULL, 2};
