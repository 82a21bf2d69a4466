/* test_band_composite.c -- gradients THROUGH chains of band operators, the
 * way the models use them, against finite differences and against dense
 * closed forms:
 *
 *   (1) the Gaussian log density with a banded COVARIANCE Q,
 *         c(Q, y) = -n/2 log 2pi - 1/2 log|Q| - 1/2 y' Q^{-1} y,
 *       computed as L = chol(Q), -1/2 logdet(L), z = L^{-1} y, -1/2 |z|^2:
 *       the Cholesky, log-determinant and triangular-solve reverse modes
 *       together; and with a banded PRECISION Q,
 *         c(Q, y) = -n/2 log 2pi + 1/2 log|Q| - 1/2 y' Q y,
 *       computed with z = L^T y by gmm_band_gemv on the LOWER factor;
 *   (2) the VI trace term c(Q1, Q2) = trace(Q1^{-1} Q2), computed as
 *       S = selinv(chol(Q1)) on Q2's (wider) band and gmm_band_dot(S, Q2):
 *       the Cholesky, selected inverse and dot reverse modes together.
 *
 * Gradients are w.r.t. the STORED entries of the symmetric inputs (band.h's
 * convention), which is what perturbing one stored entry measures. */
#include <check.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/band.h"
#include "support/testutil.h"

/* Central differences: h = FD_STEP max(1, |p|), balancing truncation (~h^2)
 * against rounding, which is absolute (~eps |c| / h, |c| up to ~100 for the
 * log density).  Worst errors at h = 1e-4 / 3e-5 / 1e-5: log density
 * 1.3e-6 / 1.1e-7 / 2.1e-8, trace 4.8e-8 / 6.1e-8 / 1.8e-7.  An entry is
 * compared relative to max(|analytic|, |fd|, FD_FLOOR * the gradient's
 * largest entry); entries below that scale are pinned by the dense
 * closed-form gradient instead (agreement ~1e-15). */
#define FD_STEP 3e-5
#define FD_RTOL 1e-6
#define FD_FLOOR 1e-2
#define ALL ((size_t)-1) /* tu_fd_check_band: every stored slot */

static double band_absmax(const gmm_band *A)
{
    double m = 0.0;
    for (size_t j = 0; j < A->n; j++)
        for (size_t i = j; i < A->n && i <= j + A->kl; i++)
            m = fmax(m, fabs(*gmm_band_ptr(A, i, j)));
    return m;
}

static double vec_absmax(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

/* ---- (1) log N(y | 0, Q), Q a banded covariance -------------------------- */

typedef struct {
    gmm_band *Q, *L;
    double *y, *z;
    int precision; /* Q is the precision (else the covariance) */
} lik_ctx;

static double lik_value(void *vctx)
{
    lik_ctx *c = vctx;
    size_t n = c->Q->n;
    ck_assert_int_eq(gmm_band_chol_decomp(c->Q, c->L), GMM_OK);
    if (c->precision) {
        ck_assert_int_eq(gmm_band_gemv(GMM_TRANS, 1.0, c->L, c->y, 0.0, c->z), GMM_OK);
    } else {
        memcpy(c->z, c->y, n * sizeof *c->z);
        ck_assert_int_eq(gmm_band_tri_solve_vec(c->L, GMM_NOTRANS, c->z), GMM_OK);
    }
    double zz = 0.0;
    for (size_t i = 0; i < n; i++)
        zz += c->z[i] * c->z[i];
    double sign = c->precision ? 1.0 : -1.0;
    return -0.5 * (double)n * log(2.0 * M_PI) + 0.5 * sign * gmm_band_chol_logdet(c->L) - 0.5 * zz;
}

/* Dense oracle: the value and the full-matrix gradients.  Covariance:
 * dc/dQ = (x x^T - Q^{-1}) / 2, dc/dy = -x, x = Q^{-1} y.  Precision:
 * dc/dQ = (Q^{-1} - y y^T) / 2, dc/dy = -Q y. */
static double lik_dense(const gmm_band *Q, const double *y, int precision, double *G, double *yg)
{
    size_t n = Q->n;
    double *Qd = tu_band_to_dense(Q), *Qy = calloc(n, sizeof *Qy);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            Qy[i] += Qd[j * n + i] * y[j];
    gsl_matrix_view Qv = gsl_matrix_view_array(Qd, n, n);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(&Qv.matrix), 0);
    double logdet = 0.0;
    for (size_t i = 0; i < n; i++)
        logdet += 2.0 * log(gsl_matrix_get(&Qv.matrix, i, i));
    gsl_vector *x = gsl_vector_alloc(n);
    gsl_vector_const_view yv = gsl_vector_const_view_array(y, n);
    ck_assert_int_eq(gsl_linalg_cholesky_solve(&Qv.matrix, &yv.vector, x), 0);
    double yx = 0.0;
    for (size_t i = 0; i < n; i++)
        yx += y[i] * gsl_vector_get(x, i);
    double yQy = 0.0;
    for (size_t i = 0; i < n; i++)
        yQy += y[i] * Qy[i];
    ck_assert_int_eq(gsl_linalg_cholesky_invert(&Qv.matrix), 0);
    for (size_t j = 0; j < n; j++) {
        double xj = gsl_vector_get(x, j);
        yg[j] = precision ? -Qy[j] : -xj;
        for (size_t i = 0; i < n; i++) {
            double qinv = gsl_matrix_get(&Qv.matrix, i, j);
            G[j * n + i] = precision ? 0.5 * (qinv - y[i] * y[j])
                                     : 0.5 * (gsl_vector_get(x, i) * xj - qinv);
        }
    }
    gsl_vector_free(x);
    free(Qd);
    free(Qy);
    double c0 = -0.5 * (double)n * log(2.0 * M_PI);
    return precision ? c0 + 0.5 * logdet - 0.5 * yQy : c0 - 0.5 * logdet - 0.5 * yx;
}

/* Largest |stored Abar - folded dense G| relative to max |G|. */
static double vs_dense_grad(const gmm_band *Abar, const double *G)
{
    size_t n = Abar->n;
    double e = 0.0, m = 1e-300;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + Abar->kl; i++) {
            double want = i == j ? G[j * n + i] : G[j * n + i] + G[i * n + j];
            m = fmax(m, fabs(want));
            e = fmax(e, fabs(*gmm_band_ptr(Abar, i, j) - want));
        }
    return e / m;
}

/* One case: value and gradient against the dense closed form, then against
 * central differences of at most nsample stored entries of Q (and all of y).
 * w[0..2] collect the worst value, dense-gradient and FD errors. */
static void loglik_case(size_t n, size_t l, int precision, size_t nsample, tu_rng *r,
                        double w[3])
{
    lik_ctx c;
    c.precision = precision;
    c.Q = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    c.L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    c.y = malloc(n * sizeof *c.y);
    c.z = malloc(n * sizeof *c.z);
    gmm_band *Lbar = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    gmm_band *Qbar = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    double *ybar = calloc(n, sizeof *ybar), *zbar = malloc(n * sizeof *zbar);
    double *G = malloc(n * n * sizeof *G), *yg = malloc(n * sizeof *yg);
    /* tu_band_fill_spd's diagonal grows with l (~0.8 per off-diagonal); scaled
     * to a unit largest diagonal the gradient stays O(1) at every l, so the
     * FD's absolute rounding error (~eps |c| / h) does not swamp it. */
    tu_band_fill_spd(c.Q, r);
    double dmax = 0.0;
    for (size_t i = 0; i < n; i++)
        dmax = fmax(dmax, *gmm_band_ptr(c.Q, i, i));
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + c.Q->kl; i++)
            *gmm_band_ptr(c.Q, i, j) /= dmax;
    for (size_t i = 0; i < n; i++)
        c.y[i] = tu_normal(r);

    double v = lik_value(&c);
    /* Reverse sweep, cbar = 1. */
    ck_assert_int_eq(gmm_band_chol_logdet_rev(c.L, precision ? 0.5 : -0.5, Lbar), GMM_OK);
    for (size_t i = 0; i < n; i++)
        zbar[i] = -c.z[i];
    if (precision)
        ck_assert_int_eq(gmm_band_gemv_rev(GMM_TRANS, 1.0, c.L, c.y, zbar, Lbar, ybar), GMM_OK);
    else
        ck_assert_int_eq(
            gmm_band_tri_solve_vec_rev(c.L, GMM_NOTRANS, c.z, zbar, ybar, Lbar, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(c.L, Lbar, Qbar), GMM_OK);

    double vd = lik_dense(c.Q, c.y, precision, G, yg);
    double ev = fabs(v - vd) / fmax(1.0, fabs(vd));
    double eg = fmax(vs_dense_grad(Qbar, G), tu_max_rel_diff(ybar, yg, n));
    ck_assert_msg(ev <= 1e-12, "n %zu l %zu prec %d: value %.17g vs dense %.17g", n, l,
                  precision, v, vd);
    ck_assert_msg(eg <= 1e-11, "n %zu l %zu prec %d: gradient vs dense %.3g", n, l, precision,
                  eg);

    double fl = FD_FLOOR * fmax(band_absmax(Qbar), vec_absmax(ybar, n));
    double eQ = tu_fd_check_band(c.Q, Qbar, lik_value, &c, FD_STEP, fl, nsample, r, NULL, NULL);
    double ey = tu_fd_check(c.y, n, ybar, lik_value, &c, FD_STEP, fl, NULL);
    ck_assert_msg(eQ <= FD_RTOL && ey <= FD_RTOL, "n %zu l %zu prec %d: FD rel err Q %.3g y %.3g",
                  n, l, precision, eQ, ey);
    w[0] = fmax(w[0], ev);
    w[1] = fmax(w[1], eg);
    w[2] = fmax(w[2], fmax(eQ, ey));

    gmm_band_free(c.Q);
    gmm_band_free(c.L);
    gmm_band_free(Lbar);
    gmm_band_free(Qbar);
    free(c.y);
    free(c.z);
    free(ybar);
    free(zbar);
    free(G);
    free(yg);
}

START_TEST(test_composite_gaussian_loglik)
{
    static const size_t ns[] = {1, 2, 5, 30};
    double w[3] = {0.0, 0.0, 0.0};
    tu_rng r;
    tu_rng_seed(&r, 31);
    for (int prec = 0; prec <= 1; prec++) {
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t l = 0; l <= 4; l++)
                loglik_case(ns[a], l, prec, ALL, &r, w);
        /* Bandwidths from CHOL_BLOCKED_MIN (40) up take the blocked Cholesky. */
        loglik_case(100, 45, prec, 60, &r, w);
    }
    if (getenv("COMPOSITE_STATS"))
        fprintf(stderr, "loglik: value %.3g, grad vs dense %.3g, FD %.3g\n", w[0], w[1], w[2]);
}
END_TEST

/* ---- (2) trace(Q1^{-1} Q2) through selinv on Q2's band ---------------------- */

typedef struct {
    gmm_band *Q1, *Q2, *L, *S;
} trace_ctx;

static double tr_value(void *vctx)
{
    trace_ctx *c = vctx;
    ck_assert_int_eq(gmm_band_chol_decomp(c->Q1, c->L), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_selinv(c->L, c->S), GMM_OK);
    return gmm_band_dot(c->S, c->Q2);
}

/* One case, as loglik_case; Q2's band (l2) is at least Q1's (l1). */
static void trace_case(size_t n, size_t l1, size_t l2, size_t nsample, tu_rng *r, double w[3])
{
    trace_ctx c;
    c.Q1 = gmm_band_alloc(n, l1, 0, GMM_BAND_SYMMETRIC);
    c.Q2 = gmm_band_alloc(n, l2, 0, GMM_BAND_SYMMETRIC);
    c.L = gmm_band_alloc(n, l1, 0, GMM_BAND_LOWER);
    c.S = gmm_band_alloc(n, l2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Sbar = gmm_band_alloc(n, l2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Lbar = gmm_band_alloc(n, l1, 0, GMM_BAND_LOWER);
    gmm_band *Q1bar = gmm_band_alloc(n, l1, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Q2bar = gmm_band_alloc(n, l2, 0, GMM_BAND_SYMMETRIC);
    tu_band_fill_spd(c.Q1, r);
    tu_band_fill_random(c.Q2, r);

    double v = tr_value(&c);
    ck_assert_int_eq(gmm_band_dot_rev(c.S, c.Q2, 1.0, Sbar, Q2bar), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(c.L, c.S, Sbar, Lbar), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(c.L, Lbar, Q1bar), GMM_OK);

    /* Dense: c = trace(Q1^{-1} Q2), dc/dQ1 = -Q1^{-1} Q2 Q1^{-1},
     * dc/dQ2 = Q1^{-1} (full matrices, folded into stored entries). */
    double *P = tu_band_to_dense(c.Q1), *B = tu_band_to_dense(c.Q2);
    double *G1 = calloc(n * n, sizeof *G1), *T = calloc(n * n, sizeof *T);
    gsl_matrix_view Pv = gsl_matrix_view_array(P, n, n);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(&Pv.matrix), 0);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(&Pv.matrix), 0);
    double vd = 0.0;
    for (size_t i = 0; i < n * n; i++)
        vd += P[i] * B[i];
    for (size_t j = 0; j < n; j++)
        for (size_t k = 0; k < n; k++)
            for (size_t i = 0; i < n; i++)
                T[j * n + i] += B[k * n + i] * P[j * n + k];
    for (size_t j = 0; j < n; j++)
        for (size_t k = 0; k < n; k++)
            for (size_t i = 0; i < n; i++)
                G1[j * n + i] -= P[k * n + i] * T[j * n + k];
    double ev = fabs(v - vd) / fmax(1.0, fabs(vd));
    double eg = fmax(vs_dense_grad(Q1bar, G1), vs_dense_grad(Q2bar, P));
    ck_assert_msg(ev <= 1e-12, "n %zu l1 %zu l2 %zu: value %.17g vs dense %.17g", n, l1, l2, v,
                  vd);
    ck_assert_msg(eg <= 1e-11, "n %zu l1 %zu l2 %zu: gradient vs dense %.3g", n, l1, l2, eg);

    double fl = FD_FLOOR * fmax(band_absmax(Q1bar), band_absmax(Q2bar));
    double e1 = tu_fd_check_band(c.Q1, Q1bar, tr_value, &c, FD_STEP, fl, nsample, r, NULL, NULL);
    double e2 = tu_fd_check_band(c.Q2, Q2bar, tr_value, &c, FD_STEP, fl, nsample, r, NULL, NULL);
    ck_assert_msg(e1 <= FD_RTOL && e2 <= FD_RTOL, "n %zu l1 %zu l2 %zu: FD rel err Q1 %.3g Q2 %.3g",
                  n, l1, l2, e1, e2);
    w[0] = fmax(w[0], ev);
    w[1] = fmax(w[1], eg);
    w[2] = fmax(w[2], fmax(e1, e2));

    free(P);
    free(B);
    free(G1);
    free(T);
    gmm_band_free(c.Q1);
    gmm_band_free(c.Q2);
    gmm_band_free(c.L);
    gmm_band_free(c.S);
    gmm_band_free(Sbar);
    gmm_band_free(Lbar);
    gmm_band_free(Q1bar);
    gmm_band_free(Q2bar);
}

START_TEST(test_composite_trace_selinv)
{
    static const size_t ns[] = {1, 3, 10, 25};
    double w[3] = {0.0, 0.0, 0.0};
    tu_rng r;
    tu_rng_seed(&r, 47);
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t l1 = 0; l1 <= 2; l1++)
            for (size_t dl = 0; dl <= 3; dl++) /* dl = 3: Q2 the whole matrix */
                trace_case(ns[a], l1, l1 + (dl == 3 ? ns[a] : dl), ALL, &r, w);
    /* Through the blocked Cholesky (l1 >= 40). */
    trace_case(100, 42, 55, 60, &r, w);
    if (getenv("COMPOSITE_STATS"))
        fprintf(stderr, "trace: value %.3g, grad vs dense %.3g, FD %.3g\n", w[0], w[1], w[2]);
}
END_TEST

Suite *band_composite_suite(void)
{
    Suite *s = suite_create("band_composite");
    TCase *tc = tcase_create("composite");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_composite_gaussian_loglik);
    tcase_add_test(tc, test_composite_trace_selinv);
    suite_add_tcase(s, tc);
    return s;
}
