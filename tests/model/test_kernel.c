/* test_kernel.c -- kernel types and composite kernels: the state space of
 * each kernel against its SDE (A = expm(F dt) by GSL, the Lyapunov equation,
 * Q = Pinf - A Pinf A^T, k(tau) = H A(tau) Pinf H^T), every derivative
 * against central differences, the small-dt accuracy of Q, the periodic
 * kernel's Bessel weights and truncation error, spec errors and defaults. */
#include <check.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_sf_bessel.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/kernel.h"
#include "gmm/spec.h"
#include "support/testutil.h"
#include "support/tu_model.h"

#define MAXD 64

/* max |a - b| / max |b| over m entries (scale floor `floor`). */
static double rel(const double *a, const double *b, size_t m, double floor)
{
    double e = 0.0, s = floor;
    for (size_t i = 0; i < m; i++) {
        if (fabs(a[i] - b[i]) > e || isnan(a[i] - b[i]))
            e = isnan(a[i] - b[i]) ? INFINITY : fabs(a[i] - b[i]);
        if (fabs(b[i]) > s)
            s = fabs(b[i]);
    }
    return e / s;
}

static void expm(size_t d, const double *F, double dt, double *out)
{
    gsl_matrix *M = gsl_matrix_alloc(d, d), *E = gsl_matrix_alloc(d, d);
    for (size_t i = 0; i < d * d; i++)
        M->data[(i / d) * M->tda + i % d] = F[i] * dt;
    ck_assert_int_eq(gsl_linalg_exponential_ss(M, E, GSL_PREC_DOUBLE), GSL_SUCCESS);
    for (size_t i = 0; i < d * d; i++)
        out[i] = E->data[(i / d) * E->tda + i % d];
    gsl_matrix_free(M);
    gsl_matrix_free(E);
}

/* R = P - A P A^T */
static void pinf_minus(size_t d, const double *A, const double *P, double *R)
{
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) {
            double s = 0.0;
            for (size_t k = 0; k < d; k++)
                for (size_t l = 0; l < d; l++)
                    s += A[i * d + k] * P[k * d + l] * A[j * d + l];
            R[i * d + j] = P[i * d + j] - s;
        }
}

/* Parameters used for each leaf type in the tests. */
static void type_params(const gmm_kernel_type *t, double *p)
{
    for (size_t i = 0; i < t->nparam; i++) {
        const char *n = t->param[i].name;
        p[i] = !strcmp(n, "variance")      ? 1.7
               : !strcmp(n, "lengthscale") ? 0.8
               : !strcmp(n, "period")      ? 1.3
                                           : 3.0; /* harmonics */
    }
}

START_TEST(test_type_table)
{
    const char *names[] = {"matern12", "matern32", "matern52", "cosine",
                           "constant", "periodic", "quasiperiodic"};
    size_t dims[] = {1, 2, 3, 2, 1, 8, 6};
    for (size_t i = 0; i < 7; i++) {
        const gmm_kernel_type *t = gmm_kernel_type_find(names[i]);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, names[i]);
        double p[GMM_KERNEL_MAXPARAM];
        type_params(t, p);
        ck_assert_uint_eq(t->dim(p), dims[i]);
        ck_assert_ptr_eq(gmm_kernel_type_at(i), t);
    }
    ck_assert_ptr_null(gmm_kernel_type_at(7));
    ck_assert_ptr_null(gmm_kernel_type_find("matern"));
}
END_TEST

/* Each type: Lyapunov, expm, Q, k(tau). */
START_TEST(test_type_state_space)
{
    for (size_t it = 0; gmm_kernel_type_at(it); it++) {
        const gmm_kernel_type *t = gmm_kernel_type_at(it);
        double p[GMM_KERNEL_MAXPARAM];
        type_params(t, p);
        size_t d = t->dim(p), dd = d * d;
        double F[MAXD], LQL[MAXD], P[MAXD], H[8], A[MAXD], Q[MAXD], E[MAXD], R[MAXD];
        t->sde(p, F, LQL);
        t->stat(p, P, NULL, H);
        /* F P + P F^T + L Qc L^T = 0 */
        double ly[MAXD], zero[MAXD] = {0};
        for (size_t i = 0; i < d; i++)
            for (size_t j = 0; j < d; j++) {
                double s = LQL[i * d + j];
                for (size_t k = 0; k < d; k++)
                    s += F[i * d + k] * P[k * d + j] + P[i * d + k] * F[j * d + k];
                ly[i * d + j] = s;
            }
        ck_assert_msg(rel(ly, zero, dd, 1.0) < 1e-13 * 100, "%s Lyapunov", t->name);
        for (int k = 0; k < 3; k++) {
            double dt = (double[]){0.05, 0.37, 2.3}[k];
            t->disc(p, dt, A, Q, NULL, NULL);
            expm(d, F, dt, E);
            ck_assert_msg(rel(A, E, dd, 1.0) < 1e-12, "%s expm dt=%g: %g", t->name, dt,
                          rel(A, E, dd, 1.0));
            pinf_minus(d, A, P, R);
            ck_assert_msg(rel(Q, R, dd, 1.0) < 1e-12 * 10, "%s Q dt=%g: %g", t->name, dt,
                          rel(Q, R, dd, 1.0));
            /* k(tau) = H A(tau) Pinf H^T */
            double kss = 0.0;
            for (size_t i = 0; i < d; i++)
                for (size_t j = 0; j < d; j++) {
                    double ap = 0.0;
                    for (size_t l = 0; l < d; l++)
                        ap += A[i * d + l] * P[l * d + j];
                    kss += H[i] * ap * H[j];
                }
            double kc = t->cov(p, dt, NULL), km = t->cov(p, -dt, NULL);
            ck_assert_msg(fabs(kss - kc) < 1e-13 * 100 * fabs(t->cov(p, 0.0, NULL)),
                          "%s cov dt=%g: %g vs %g", t->name, dt, kss, kc);
            ck_assert(kc == km);
        }
    }
}
END_TEST

/* Each type: dA, dQ, dPinf, dk against central differences. */
START_TEST(test_type_derivatives_fd)
{
    for (size_t it = 0; gmm_kernel_type_at(it); it++) {
        const gmm_kernel_type *t = gmm_kernel_type_at(it);
        double p[GMM_KERNEL_MAXPARAM];
        type_params(t, p);
        size_t d = t->dim(p), dd = d * d, np = t->nparam;
        double dA[4 * MAXD], dQ[4 * MAXD], dP[4 * MAXD], dk[4];
        for (int k = 0; k < 3; k++) {
            double dt = (double[]){0.013, 0.37, 2.3}[k];
            t->disc(p, dt, NULL, NULL, dA, dQ);
            t->stat(p, NULL, dP, NULL);
            t->cov(p, dt, dk);
            for (size_t j = 0; j < np; j++) {
                if (t->param[j].structural)
                    continue;
                double save = p[j], h = 1e-6 * save;
                double Ap[MAXD], Am[MAXD], Qp[MAXD], Qm[MAXD], Pp[MAXD], Pm[MAXD];
                double fA[MAXD], fQ[MAXD], fP[MAXD];
                p[j] = save + h;
                t->disc(p, dt, Ap, Qp, NULL, NULL);
                t->stat(p, Pp, NULL, NULL);
                double kp = t->cov(p, dt, NULL);
                p[j] = save - h;
                t->disc(p, dt, Am, Qm, NULL, NULL);
                t->stat(p, Pm, NULL, NULL);
                double km = t->cov(p, dt, NULL);
                p[j] = save;
                for (size_t i = 0; i < dd; i++) {
                    fA[i] = (Ap[i] - Am[i]) / (2 * h);
                    fQ[i] = (Qp[i] - Qm[i]) / (2 * h);
                    fP[i] = (Pp[i] - Pm[i]) / (2 * h);
                }
                double fk = (kp - km) / (2 * h);
                ck_assert_msg(rel(dA + j * dd, fA, dd, 1e-3) < 1e-6, "%s dA/d%s dt=%g: %g",
                              t->name, t->param[j].name, dt, rel(dA + j * dd, fA, dd, 1e-3));
                ck_assert_msg(rel(dQ + j * dd, fQ, dd, 1e-3) < 1e-6, "%s dQ/d%s dt=%g: %g",
                              t->name, t->param[j].name, dt, rel(dQ + j * dd, fQ, dd, 1e-3));
                ck_assert_msg(rel(dP + j * dd, fP, dd, 1e-3) < 1e-6, "%s dP/d%s: %g", t->name,
                              t->param[j].name, rel(dP + j * dd, fP, dd, 1e-3));
                ck_assert_msg(fabs(dk[j] - fk) < 1e-6 * fmax(1e-3, fabs(fk)), "%s dk/d%s",
                              t->name, t->param[j].name);
            }
        }
    }
}
END_TEST

/* Q(2 dt) = A(dt) Q(dt) A(dt)^T + Q(dt) is a sum of positive semidefinite
 * terms, so it checks Q's componentwise relative accuracy at tiny dt, where
 * Pinf - A Pinf A^T would have no correct digit left. */
START_TEST(test_matern_small_dt_semigroup)
{
    const gmm_kernel_type *ts[] = {&gmm_kernel_matern12, &gmm_kernel_matern32,
                                   &gmm_kernel_matern52};
    for (size_t it = 0; it < 3; it++) {
        const gmm_kernel_type *t = ts[it];
        double p[2] = {1.7, 0.8};
        size_t d = t->dim(p);
        for (double r = 1e-8; r < 3.0; r *= 7.0) {
            double dt = r * p[1], A[9], Q[9], Q2[9], S[9];
            t->disc(p, dt, A, Q, NULL, NULL);
            t->disc(p, 2 * dt, NULL, Q2, NULL, NULL);
            for (size_t i = 0; i < d; i++)
                for (size_t j = 0; j < d; j++) {
                    double s = Q[i * d + j];
                    for (size_t k = 0; k < d; k++)
                        for (size_t l = 0; l < d; l++)
                            s += A[i * d + k] * Q[k * d + l] * A[j * d + l];
                    S[i * d + j] = s;
                }
            /* relative to sqrt(Q_ii Q_jj): componentwise in the scaled state */
            for (size_t i = 0; i < d; i++)
                for (size_t j = 0; j < d; j++) {
                    double sc = sqrt(Q2[i * d + i] * Q2[j * d + j]);
                    double e = fabs(S[i * d + j] - Q2[i * d + j]) / sc;
                    ck_assert_msg(e < 1e-13, "%s dt/l=%g entry %zu,%zu: rel %g", t->name, r, i,
                                  j, e);
                }
        }
    }
}
END_TEST

/* exp(-z) I_n(z) by Hankel's expansion (10 terms): test reference for large z,
 * where GSL's gsl_sf_bessel_In_scaled loses up to 7 digits at odd orders
 * (measured against a quad-precision Miller recurrence: 5e-8 at z = 1e6). */
static double hankel_scaled(int n, double z)
{
    double mu = 4.0 * n * n, term = 1.0, s = 1.0;
    for (int k = 1; k <= 10; k++) {
        term *= -(mu - (2.0 * k - 1.0) * (2.0 * k - 1.0)) / (k * 8.0 * z);
        s += term;
    }
    return s / sqrt(2.0 * M_PI * z);
}

START_TEST(test_periodic_weights_and_truncation)
{
    gsl_set_error_handler_off();
    const gmm_kernel_type *t = &gmm_kernel_periodic;
    for (double ell = 0.01; ell < 300.0; ell *= 2.3) {
        double p[4] = {1.0, ell, 1.0, 6.0}, P[14 * 14];
        t->stat(p, P, NULL, NULL);
        double z = 1.0 / (ell * ell);
        for (size_t j = 0; j <= 6; j++) {
            double want;
            if (z <= 100.0) {
                gsl_sf_result r;
                if (gsl_sf_bessel_In_scaled_e((int)j, z, &r) != GSL_SUCCESS || r.val < 1e-290)
                    continue;
                want = r.val;
            } else {
                want = hankel_scaled((int)j, z);
            }
            want *= j ? 2.0 : 1.0;
            double got = P[2 * j * 14 + 2 * j];
            ck_assert_msg(fabs(got - want) <= 1e-13 * want, "ell=%g j=%zu: %.17g vs %.17g", ell,
                          j, got, want);
        }
    }
    /* z > 1e7 takes a 3-term Hankel expansion, below it Miller's recurrence */
    for (int iz = 0; iz < 3; iz++) {
        double z = (double[]){0.999e7, 1.001e7, 1e9}[iz];
        double p[4] = {1.0, 1.0 / sqrt(z), 1.0, 3.0}, P[64];
        t->stat(p, P, NULL, NULL);
        for (size_t j = 0; j < 4; j++) {
            double want = (j ? 2.0 : 1.0) * hankel_scaled((int)j, z);
            ck_assert_msg(fabs(P[2 * j * 8 + 2 * j] / want - 1.0) < 1e-13, "z=%g j=%zu", z, j);
        }
    }
    /* The truncated series against exp-sine-squared: the largest gap is at
     * tau = 0, 1 - e^-1 (I0(1) + 2 I1(1) + 2 I2(1)) = 1.854% of the variance
     * at lengthscale 1, J = 2 (documented in kernel_periodic.c). */
    double p[4] = {2.0, 1.0, 1.5, 2.0}, worst = 0.0, at = -1.0;
    for (double tau = 0.0; tau <= 3.0; tau += 0.001) {
        double s = sin(M_PI * tau / p[2]);
        double ess = p[0] * exp(-2.0 * s * s / (p[1] * p[1]));
        double e = fabs(t->cov(p, tau, NULL) - ess) / p[0];
        if (e > worst) {
            worst = e;
            at = tau;
        }
    }
    ck_assert_msg(fabs(worst - 0.018543) < 1e-5 && at == 0.0, "truncation %g at %g", worst, at);
    /* more harmonics: the gap falls fast (J = 5: 1.8e-5 of the variance) */
    double p5[4] = {2.0, 1.0, 1.5, 5.0}, gap5 = 1.0 - t->cov(p5, 0.0, NULL) / p5[0];
    ck_assert_msg(gap5 > 1.7e-5 && gap5 < 1.9e-5, "J=5 gap %g", gap5);
}
END_TEST

/* ---- composite kernels ------------------------------------------------------- */

static const char *composites[] = {
    "matern32(variance=1.3, lengthscale=0.7)",
    "matern52(variance=0.9, lengthscale=1.9) + matern12(variance=0.4, lengthscale=0.3)",
    "matern32(variance=1.1, lengthscale=2.0) * cosine(variance=0.8, period=0.9)",
    "matern32(variance=1.2, lengthscale=0.8) + quasiperiodic(variance=0.5, lengthscale=3, "
    "period=1, harmonics=2)",
    "(matern12(variance=0.7, lengthscale=1.1) + constant(variance=0.3)) * matern52(variance=1.4,"
    " lengthscale=2.1)",
    "periodic(variance=1.1, lengthscale=0.9, period=1.7, harmonics=2) * matern32(variance=0.6, "
    "lengthscale=1.5) + constant(variance=0.2)",
    "cosine(variance=1.0, period=0.8) * periodic(variance=0.7, lengthscale=1.2, period=2.1, "
    "harmonics=1)",
    "matern12(variance=1, lengthscale=1.5) * matern32(variance=0.5, lengthscale=0.9) * "
    "cosine(variance=2, period=1.1)",
};
#define NCOMP (sizeof composites / sizeof composites[0])

START_TEST(test_composite_state_space)
{
    for (size_t ic = 0; ic < NCOMP; ic++) {
        gmm_kernel *k = tu_kernel_of(composites[ic]);
        size_t d = gmm_kernel_dim(k), dd = d * d;
        gmm_kernel_work *w = gmm_kernel_work_alloc(k);
        const double *th = gmm_kernel_values_const(k);
        for (int id = 0; id < 2; id++) {
            double damp = id ? 0.3 : 0.0;
            double *F = malloc(6 * dd * sizeof *F), *LQL = F + dd, *P = LQL + dd, *A = P + dd;
            double *Q = A + dd, *R = Q + dd, H[MAXD];
            ck_assert_int_eq(gmm_kernel_sde(k, th, damp, w, F, LQL), GMM_OK);
            ck_assert_int_eq(gmm_kernel_stat(k, th, damp, w, P, H), GMM_OK);
            for (size_t i = 0; i < d; i++)
                for (size_t j = 0; j < d; j++) {
                    double s = LQL[i * d + j];
                    for (size_t l = 0; l < d; l++)
                        s += F[i * d + l] * P[l * d + j] + P[i * d + l] * F[j * d + l];
                    R[i * d + j] = s;
                }
            double zero[MAXD * MAXD] = {0};
            ck_assert_msg(rel(R, zero, dd, 1.0) < 1e-12, "%s Lyapunov", composites[ic]);
            /* demodulated (kernel.h): A is the transition between ROTATING
             * coordinates, and the observation row h(tau) carries the
             * rotation; with H(0) = the stat H */
            int mod = gmm_kernel_modulated(k);
            double h0[MAXD], h1[MAXD];
            ck_assert_int_eq(gmm_kernel_obs(k, w, 0.0, h0), GMM_OK);
            for (size_t i = 0; i < d; i++)
                ck_assert(h0[i] == H[i]);
            for (int kk = 0; kk < 3; kk++) {
                double dt = (double[]){0.03, 0.41, 1.7}[kk], tau = 0.77;
                ck_assert_int_eq(gmm_kernel_disc(k, w, dt, A, Q), GMM_OK);
                double *E = malloc(dd * sizeof *E);
                if (!mod) {
                    expm(d, F, dt, E);
                    ck_assert_msg(rel(A, E, dd, 1.0) < 1e-12, "%s expm", composites[ic]);
                }
                pinf_minus(d, A, P, E);
                ck_assert_msg(rel(Q, E, dd, 1.0) < 1e-12, "%s Q: %g", composites[ic],
                              rel(Q, E, dd, 1.0));
                /* k(dt) = h(tau + dt) A Pinf h(tau)^T (h = H when not modulated) */
                ck_assert_int_eq(gmm_kernel_obs(k, w, tau, h0), GMM_OK);
                ck_assert_int_eq(gmm_kernel_obs(k, w, tau + dt, h1), GMM_OK);
                double kss = 0.0;
                for (size_t i = 0; i < d; i++)
                    for (size_t j = 0; j < d; j++) {
                        double ap = 0.0;
                        for (size_t l = 0; l < d; l++)
                            ap += A[i * d + l] * P[l * d + j];
                        kss += h1[i] * ap * h0[j];
                    }
                double kc = gmm_kernel_cov(k, th, damp, dt);
                ck_assert_msg(fabs(kss - kc) < 1e-12 * gmm_kernel_cov(k, th, damp, 0.0),
                              "%s cov %g vs %g", composites[ic], kss, kc);
                free(E);
            }
            free(F);
        }
        gmm_kernel_work_free(w);
        gmm_kernel_free(k);
    }
}
END_TEST

typedef struct {
    gmm_kernel *k;
    gmm_kernel_work *w;
    double *theta, dt, damp;
    const double *Ab, *Qb, *Pb, *Hb;
} rev_ctx;

static double rev_obj(void *vc)
{
    rev_ctx *c = vc;
    size_t d = gmm_kernel_dim(c->k), dd = d * d;
    double *A = malloc(3 * dd * sizeof *A), *Q = A + dd, *P = Q + dd;
    ck_assert_int_eq(gmm_kernel_stat(c->k, c->theta, c->damp, c->w, P, NULL), GMM_OK);
    ck_assert_int_eq(gmm_kernel_disc(c->k, c->w, c->dt, A, Q), GMM_OK);
    double s = 0.0, h[MAXD];
    for (size_t i = 0; i < dd; i++)
        s += c->Ab[i] * A[i] + c->Qb[i] * Q[i] + c->Pb[i] * P[i];
    ck_assert_int_eq(gmm_kernel_obs(c->k, c->w, 1.9, h), GMM_OK);
    for (size_t i = 0; i < d; i++)
        s += c->Hb[i] * h[i];
    free(A);
    return s;
}

/* Reverse mode of the composite: c = <Abar, A> + <Qbar, Q> + <Pbar, Pinf> +
 * <Hbar, h(1.9)> for random adjoints, gradient against central differences. */
START_TEST(test_composite_rev_fd)
{
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (size_t ic = 0; ic < NCOMP; ic++) {
        gmm_kernel *k = tu_kernel_of(composites[ic]);
        size_t d = gmm_kernel_dim(k), dd = d * d, np = gmm_kernel_nparam(k);
        gmm_kernel_work *w = gmm_kernel_work_alloc(k);
        double *bars = malloc((3 * dd + d) * sizeof *bars), *theta = malloc(np * sizeof *theta);
        double *g = calloc(np, sizeof *g);
        for (size_t i = 0; i < 3 * dd + d; i++)
            bars[i] = tu_normal(&r);
        memcpy(theta, gmm_kernel_values_const(k), np * sizeof *theta);
        rev_ctx c = {k, w, theta, 0.37, 0.05, bars, bars + dd, bars + 2 * dd, bars + 3 * dd};
        ck_assert_int_eq(gmm_kernel_stat(k, theta, c.damp, w, NULL, NULL), GMM_OK);
        ck_assert_int_eq(gmm_kernel_disc(k, w, c.dt, NULL, NULL), GMM_OK);
        ck_assert_int_eq(gmm_kernel_rev(k, w, c.Ab, c.Qb, NULL, g), GMM_OK);
        ck_assert_int_eq(gmm_kernel_rev(k, w, NULL, NULL, c.Pb, g), GMM_OK);
        ck_assert_int_eq(gmm_kernel_obs_rev(k, w, 1.9, c.Hb, g), GMM_OK);
        for (size_t j = 0; j < np; j++) {
            double save = theta[j], h = 1e-6 * save;
            theta[j] = save + h;
            double fp = rev_obj(&c);
            theta[j] = save - h;
            double fm = rev_obj(&c);
            theta[j] = save;
            double fd = (fp - fm) / (2 * h);
            ck_assert_msg(fabs(fd - g[j]) < 1e-6 * fmax(1.0, fabs(fd)), "%s %s: %g vs fd %g",
                          composites[ic], gmm_kernel_param_name(k, j), g[j], fd);
        }
        free(bars);
        free(theta);
        free(g);
        gmm_kernel_work_free(w);
        gmm_kernel_free(k);
    }
}
END_TEST

/* gmm_kernel_cov_grad (the dense GP's gradient, for oracles) against
 * fourth-order central differences of gmm_kernel_cov, damped and not, at
 * lags from 0 to past the lengthscales; its value equals gmm_kernel_cov's.
 * At h = 1e-5 relative the truncation, O(h^4 (2 pi tau / period)^5) for a
 * period, stays below 1e-13 and the rounding ~eps / h near 2e-11 of the
 * kernel's variance (tolerance 1e-8). */
START_TEST(test_cov_grad_fd)
{
    static const double taus[] = {0.0, 1e-6, 0.013, 0.4, 2.7};
    for (size_t ic = 0; ic < NCOMP; ic++) {
        gmm_kernel *k = tu_kernel_of(composites[ic]);
        size_t np = gmm_kernel_nparam(k);
        double *th = malloc(np * sizeof *th), *g = malloc(np * sizeof *g);
        memcpy(th, gmm_kernel_values_const(k), np * sizeof *th);
        double k0 = gmm_kernel_cov(k, th, 0.0, 0.0);
        for (size_t it = 0; it < sizeof taus / sizeof taus[0]; it++)
            for (int damped = 0; damped < 2; damped++) {
                double damp = damped ? 0.05 : 0.0, tau = taus[it];
                double v = gmm_kernel_cov_grad(k, th, damp, tau, g);
                ck_assert(v == gmm_kernel_cov(k, th, damp, tau));
                for (size_t j = 0; j < np; j++) {
                    double save = th[j], h = 1e-5 * save, f[4], off[4] = {-2, -1, 1, 2};
                    for (int q = 0; q < 4; q++) {
                        th[j] = save + off[q] * h;
                        f[q] = gmm_kernel_cov(k, th, damp, tau);
                    }
                    th[j] = save;
                    double fd = (f[0] - 8.0 * f[1] + 8.0 * f[2] - f[3]) / (12.0 * h);
                    ck_assert_msg(fabs(g[j] - fd) <= 1e-8 * k0 / save, "%s d/d%s at tau %g: %g vs "
                                  "fd %g", composites[ic], gmm_kernel_param_name(k, j), tau,
                                  g[j], fd);
                }
            }
        free(th);
        free(g);
        gmm_kernel_free(k);
    }
}
END_TEST

/* The structural blocks: F, LQL, Pinf, A(dt) and Q(dt) exactly zero between
 * variables of different blocks, with and without damping, for every
 * composite; labels in order of first appearance; the counts and labels of
 * a sum of a Matern and an oscillator and of a product of two oscillators
 * (whose blocks interleave). */
START_TEST(test_blocks)
{
    for (size_t ic = 0; ic < NCOMP; ic++) {
        gmm_kernel *k = tu_kernel_of(composites[ic]);
        size_t d = gmm_kernel_dim(k), dd = d * d, blk[MAXD], nb;
        ck_assert_int_eq(gmm_kernel_blocks(k, blk, &nb), GMM_OK);
        size_t next = 0;
        for (size_t i = 0; i < d; i++) {
            ck_assert_uint_le(blk[i], next);
            if (blk[i] == next)
                next++;
        }
        ck_assert_uint_eq(next, nb);
        gmm_kernel_work *w = gmm_kernel_work_alloc(k);
        const double *th = gmm_kernel_values_const(k);
        double *M = malloc(5 * dd * sizeof *M);
        for (int id = 0; id < 2; id++) {
            double damp = id ? 0.3 : 0.0;
            ck_assert_int_eq(gmm_kernel_sde(k, th, damp, w, M, M + dd), GMM_OK);
            ck_assert_int_eq(gmm_kernel_stat(k, th, damp, w, M + 2 * dd, NULL), GMM_OK);
            for (int kk = 0; kk < 2; kk++) {
                ck_assert_int_eq(gmm_kernel_disc(k, w, kk ? 1.7 : 0.03, M + 3 * dd, M + 4 * dd),
                                 GMM_OK);
                for (size_t t = 0; t < 5; t++)
                    for (size_t i = 0; i < d; i++)
                        for (size_t j = 0; j < d; j++)
                            if (blk[i] != blk[j])
                                ck_assert_msg(M[t * dd + i * d + j] == 0.0,
                                              "%s: matrix %zu (%zu,%zu) = %g across blocks",
                                              composites[ic], t, i, j, M[t * dd + i * d + j]);
            }
        }
        free(M);
        gmm_kernel_work_free(w);
        gmm_kernel_free(k);
    }
    gmm_kernel *k = tu_kernel_of("matern32(variance=1.2, lengthscale=0.8) + quasiperiodic("
                              "variance=0.5, lengthscale=3, period=1, harmonics=2)");
    size_t blk[MAXD], nb;
    ck_assert_int_eq(gmm_kernel_blocks(k, blk, &nb), GMM_OK);
    ck_assert_uint_eq(nb, 3);
    const size_t want1[] = {0, 0, 1, 1, 2, 2};
    for (size_t i = 0; i < 6; i++)
        ck_assert_uint_eq(blk[i], want1[i]);
    gmm_kernel_free(k);
    k = tu_kernel_of("cosine(variance=1.0, period=0.8) * periodic(variance=0.7, lengthscale=1.2, "
                  "period=2.1, harmonics=1)");
    ck_assert_int_eq(gmm_kernel_blocks(k, blk, &nb), GMM_OK);
    ck_assert_uint_eq(nb, 2);
    const size_t want2[] = {0, 0, 1, 1, 0, 0, 1, 1};
    for (size_t i = 0; i < 8; i++)
        ck_assert_uint_eq(blk[i], want2[i]);
    gmm_kernel_free(k);
    k = tu_kernel_of("matern52(variance=0.9, lengthscale=1.9)");
    ck_assert_int_eq(gmm_kernel_blocks(k, blk, &nb), GMM_OK);
    ck_assert_uint_eq(nb, 1);
    gmm_kernel_free(k);
}
END_TEST

START_TEST(test_names_and_dims)
{
    gmm_kernel *k = tu_kernel_of("matern32 + quasiperiodic(period=1, harmonics=2)");
    ck_assert_uint_eq(gmm_kernel_dim(k), 6);
    ck_assert_uint_eq(gmm_kernel_nparam(k), 5);
    ck_assert_uint_eq(gmm_kernel_nleaves(k), 2);
    const char *want[] = {"0.matern32.variance", "0.matern32.lengthscale",
                          "1.quasiperiodic.variance", "1.quasiperiodic.lengthscale",
                          "1.quasiperiodic.period"};
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(gmm_kernel_param_name(k, i), want[i]);
    const double *v = gmm_kernel_values_const(k);
    ck_assert(isnan(v[0]) && isnan(v[3]) && v[4] == 1.0);
    size_t i;
    ck_assert_int_eq(gmm_kernel_param_find(k, "1.quasiperiodic.lengthscale", &i), GMM_OK);
    ck_assert_uint_eq(i, 3);
    ck_assert_int_eq(gmm_kernel_param_find(k, "noise.variance", &i), GMM_EINVAL);
    ck_assert(!gmm_kernel_damped(k));
    gmm_kernel_free(k);

    k = tu_kernel_of("(matern12 + cosine) * periodic(harmonics=3) * constant");
    ck_assert_uint_eq(gmm_kernel_dim(k), (1 + 2) * 8 * 1);
    ck_assert_str_eq(gmm_kernel_param_name(k, 0), "0.matern12.variance");
    ck_assert_str_eq(gmm_kernel_param_name(k, 7), "3.constant.variance");
    ck_assert(gmm_kernel_damped(k));
    gmm_kernel_free(k);
}
END_TEST

START_TEST(test_spec_errors_point_at_character)
{
    struct {
        const char *text;
        size_t pos;
    } bad[] = {
        {"matern32 + maternn(variance=1)", 11},
        {"matern32(variance=1, lenghtscale=2)", 21},
        {"matern32(variance=1, variance=2)", 21},
        {"periodic(harmonics=2.5)", 9},
        {"periodic(harmonics=0)", 9},
        {"cosine(period=-1)", 7},
        {"(constant * quasiperiodic(harmonics=100))", 26},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* a repeated key is already the parser's error; the rest are ours */
        gmm_spec_node *s = NULL;
        gmm_status st = gmm_spec_parse(bad[i].text, &s);
        gmm_kernel *k = (gmm_kernel *)&i;
        if (st == GMM_OK) {
            st = gmm_kernel_from_spec(s, &k);
            ck_assert_ptr_null(k);
        }
        ck_assert_int_eq(st, GMM_EPARSE);
        ck_assert_msg(gmm_error_index() == bad[i].pos, "%s: index %zu (%s)", bad[i].text,
                      gmm_error_index(), gmm_error_message());
        gmm_spec_free(s);
    }
}
END_TEST

START_TEST(test_defaults)
{
    size_t n = 101;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) {
        x[n - 1 - i] = 0.5 * (double)i; /* spacing 0.5, span 50, unsorted */
        y[i] = (i % 2) ? 1.0 : -1.0;
    }
    y[100] = NAN;
    gmm_kernel *k = tu_kernel_of("matern32(lengthscale=2) + matern12 * cosine + "
                              "quasiperiodic(period=3)");
    int def[9];
    ck_assert_int_eq(gmm_kernel_fill_defaults(k, x, y, n, def), GMM_OK);
    const double *v = gmm_kernel_values_const(k);
    /* observed y: 50 of +1 and 50 of -1 -> variance 100/99 */
    double var = 100.0 / 99.0, ell = sqrt(0.5 * 50.0);
    double want[9] = {var, 2.0, var, ell, 1.0, 1.0, var, ell, 3.0};
    int wdef[9] = {1, 0, 1, 1, 1, 1, 1, 1, 0};
    for (size_t i = 0; i < 9; i++) {
        ck_assert_msg(fabs(v[i] - want[i]) < 1e-14, "%s = %g", gmm_kernel_param_name(k, i), v[i]);
        ck_assert_int_eq(def[i], wdef[i]);
    }
    ck_assert(fabs(gmm_kernel_default_noise(y, n) - 0.1 * var) < 1e-15);
    gmm_kernel_free(k);
    /* the lengthscale cap: 50 median spacings */
    for (size_t i = 0; i < n; i++)
        x[i] = (double)i * (i + 1 < n ? 1.0 : 1e6);
    k = tu_kernel_of("matern52");
    ck_assert_int_eq(gmm_kernel_fill_defaults(k, x, y, n, NULL), GMM_OK);
    ck_assert(gmm_kernel_values_const(k)[1] == 50.0);
    gmm_kernel_free(k);
    free(x);
    free(y);
}
END_TEST

START_TEST(test_format_round_trip)
{
    for (size_t ic = 0; ic < NCOMP; ic++) {
        gmm_kernel *k = tu_kernel_of(composites[ic]);
        size_t need = gmm_kernel_format(k, NULL, NULL, 0);
        char *buf = malloc(need + 1);
        ck_assert_uint_eq(gmm_kernel_format(k, NULL, buf, need + 1), need);
        gmm_kernel *k2 = tu_kernel_of(buf);
        ck_assert_uint_eq(gmm_kernel_nparam(k2), gmm_kernel_nparam(k));
        ck_assert_uint_eq(gmm_kernel_dim(k2), gmm_kernel_dim(k));
        for (size_t i = 0; i < gmm_kernel_nparam(k); i++) {
            ck_assert_str_eq(gmm_kernel_param_name(k, i), gmm_kernel_param_name(k2, i));
            ck_assert(gmm_kernel_values_const(k)[i] == gmm_kernel_values_const(k2)[i]);
        }
        for (double tau = 0.0; tau < 3.0; tau += 0.37)
            ck_assert(gmm_kernel_cov(k, NULL, 0.0, tau) == gmm_kernel_cov(k2, NULL, 0.0, tau));
        free(buf);
        gmm_kernel_free(k);
        gmm_kernel_free(k2);
    }
}
END_TEST

extern Suite *model_kernel_suite(void);
Suite *model_kernel_suite(void)
{
    Suite *s = suite_create("model_kernel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_type_table);
    tcase_add_test(tc, test_type_state_space);
    tcase_add_test(tc, test_type_derivatives_fd);
    tcase_add_test(tc, test_matern_small_dt_semigroup);
    tcase_add_test(tc, test_periodic_weights_and_truncation);
    tcase_add_test(tc, test_composite_state_space);
    tcase_add_test(tc, test_composite_rev_fd);
    tcase_add_test(tc, test_names_and_dims);
    tcase_add_test(tc, test_spec_errors_point_at_character);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_blocks);
    tcase_add_test(tc, test_cov_grad_fd);
    tcase_add_test(tc, test_format_round_trip);
    suite_add_tcase(s, tc);
    return s;
}
