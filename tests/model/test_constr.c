/* test_constr.c -- constr.h without pins (P = L L' positive definite, as
 * variational inference's q): the conditioned moments (kriged mean,
 * Sigma_c's band, log|A Sigma A'|) against dense GSL formulas, and the
 * reverse mode gmm_constr_rev against fourth-order central differences of
 * the forward functional, on every slot of L's band and every entry of m.
 * GMM_TEST_REPORT=1 prints the measured errors. */
#include <check.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/constr.h"
#include "gmm/factor.h"
#include "gmm/sparse.h"
#include "support/testutil.h"

static int report(void) { return getenv("GMM_TEST_REPORT") != NULL; }

#define N 17
#define B 3
#define K 3

typedef struct {
    gmm_band *L, *S, *Sbar;
    double A[K * N], m[N], mcbar[N], mc[N];
    size_t pin[K];
    gmm_constr *c;
} cctx;

/* A: a dense row, a row on the first half, a local row (a small
 * component's sum); L random with a dominant positive diagonal. */
static void cctx_make(cctx *x, tu_rng *r)
{
    memset(x->A, 0, sizeof x->A);
    for (size_t j = 0; j < N; j++) {
        x->A[j] = 1.0;
        x->A[N + j] = j < N / 2 ? 0.5 + tu_uniform(r) : 0.0;
    }
    x->A[2 * N + 11] = x->A[2 * N + 12] = x->A[2 * N + 13] = 1.0;
    for (size_t i = 0; i < K; i++)
        x->pin[i] = 4 * i + 1;
    x->L = gmm_band_alloc(N, B, 0, GMM_BAND_LOWER);
    x->S = gmm_band_alloc(N, B + 1, 0, GMM_BAND_SYMMETRIC);
    x->Sbar = gmm_band_alloc(N, B + 1, 0, GMM_BAND_SYMMETRIC);
    tu_band_fill_random(x->L, r);
    for (size_t j = 0; j < N; j++) {
        *gmm_band_ptr(x->L, j, j) = 1.5 + tu_uniform(r);
        for (size_t i = j + 1; i <= j + B && i < N; i++)
            *gmm_band_ptr(x->L, i, j) *= 0.4;
    }
    tu_band_fill_random(x->Sbar, r);
    for (size_t j = 0; j < N; j++) {
        x->m[j] = tu_normal(r);
        x->mcbar[j] = tu_normal(r);
    }
    x->c = gmm_constr_alloc(N, K, x->A, x->pin);
    ck_assert_ptr_nonnull(x->c);
}

static void cctx_free(cctx *x)
{
    gmm_band_free(x->L);
    gmm_band_free(x->S);
    gmm_band_free(x->Sbar);
    gmm_constr_free(x->c);
}

/* f = mcbar' krig(m) + sum over stored slots of Sbar . (-band(V V')). */
static double fval(void *p)
{
    cctx *x = p;
    ck_assert_int_eq(gmm_constr_factor(x->c, x->L, 0.0), GMM_OK);
    memcpy(x->mc, x->m, sizeof x->m);
    gmm_constr_krig(x->c, x->mc);
    gmm_band_set_zero(x->S);
    gmm_constr_band(x->c, x->S);
    double f = 0.0;
    for (size_t j = 0; j < N; j++) {
        f += x->mcbar[j] * x->mc[j];
        for (size_t i = j; i <= j + B + 1 && i < N; i++)
            f += gmm_band_get(x->Sbar, i, j) * gmm_band_get(x->S, i, j);
    }
    return f;
}

static double *dense_of(const gmm_band *b)
{
    double *D = tu_band_to_dense(b); /* column-major */
    return D;
}

/* The dense reference of x: Pd = L L' (row-major; NULL: not wanted),
 * Pi = P^-1, U = P^-1 A' (N x K, row-major), Gi = (A U)^-1 and *ldg =
 * log|A U|, by GSL's Cholesky. */
static void dense_ref(const cctx *x, double *Pd, gsl_matrix *Pi, double *U, gsl_matrix *Gi,
                      double *ldg)
{
    double *Ld = dense_of(x->L);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0.0;
            for (size_t t = 0; t < N; t++)
                s += Ld[t * N + i] * Ld[t * N + j];
            gsl_matrix_set(Pi, i, j, s);
            if (Pd)
                Pd[i * N + j] = s;
        }
    free(Ld);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(Pi), GSL_SUCCESS);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(Pi), GSL_SUCCESS);
    for (size_t i = 0; i < N; i++)
        for (size_t a = 0; a < K; a++) {
            double s = 0.0;
            for (size_t t = 0; t < N; t++)
                s += gsl_matrix_get(Pi, i, t) * x->A[a * N + t];
            U[i * K + a] = s;
        }
    for (size_t a = 0; a < K; a++)
        for (size_t b = 0; b < K; b++) {
            double s = 0.0;
            for (size_t t = 0; t < N; t++)
                s += x->A[a * N + t] * U[t * K + b];
            gsl_matrix_set(Gi, a, b, s);
        }
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(Gi), GSL_SUCCESS);
    *ldg = 0.0;
    for (size_t a = 0; a < K; a++)
        *ldg += 2.0 * log(gsl_matrix_get(Gi, a, a));
    ck_assert_int_eq(gsl_linalg_cholesky_invert(Gi), GSL_SUCCESS);
}

START_TEST(test_constr_forward)
{
    tu_rng r;
    tu_rng_seed(&r, 71);
    cctx x;
    cctx_make(&x, &r);
    ck_assert_int_eq(gmm_band_chol_selinv(x.L, x.S), GMM_OK);
    fval(&x); /* factor, krig */
    ck_assert_int_eq(gmm_band_chol_selinv(x.L, x.S), GMM_OK);
    gmm_constr_band(x.c, x.S);
    /* dense: Sigma = (L L')^-1, G = A Sigma A', Sigma_c, m_c */
    gsl_matrix *P = gsl_matrix_calloc(N, N), *G = gsl_matrix_calloc(K, K);
    double U[N * K], ldg;
    dense_ref(&x, NULL, P, U, G, &ldg);
    double am[K], em = 0.0, es = 0.0;
    for (size_t a = 0; a < K; a++) {
        am[a] = 0.0;
        for (size_t t = 0; t < N; t++)
            am[a] += x.A[a * N + t] * x.m[t];
    }
    for (size_t i = 0; i < N; i++) {
        double mc = x.m[i];
        for (size_t a = 0; a < K; a++)
            for (size_t b = 0; b < K; b++)
                mc -= U[i * K + a] * gsl_matrix_get(G, a, b) * am[b];
        em = fmax(em, fabs(mc - x.mc[i]));
        for (size_t j = i; j <= i + B + 1 && j < N; j++) {
            double s = gsl_matrix_get(P, i, j);
            for (size_t a = 0; a < K; a++)
                for (size_t b = 0; b < K; b++)
                    s -= U[i * K + a] * gsl_matrix_get(G, a, b) * U[j * K + b];
            es = fmax(es, fabs(s - gmm_band_get(x.S, j, i)));
        }
    }
    double el = fabs(ldg - gmm_constr_logdet(x.c));
    if (report())
        fprintf(stderr, "constr no pins: mean %.2e, Sigma_c band %.2e, log|G| %.2e\n", em, es,
                el);
    ck_assert_msg(em < 1e-13 && es < 1e-13 && el < 1e-12, "mean %g, band %g, logdet %g", em, es,
                  el);
    gsl_matrix_free(P);
    gsl_matrix_free(G);
    cctx_free(&x);
}
END_TEST

/* Through a sparse gmm_factor of P~ = P + tau E_S E_S' (P = L L' of the
 * band above, stored sparse): gmm_constr_factor_solve_with's v against
 * Sigma_c v by the dense formula P^-1 v - U G^-1 A P^-1 v (U = P^-1 A',
 * G = A U), with pins (tau > 0) and without, and against
 * gmm_constr_factor_with followed by gmm_constr_solve_with. */
START_TEST(test_constr_factor_solve_with)
{
    tu_rng r;
    tu_rng_seed(&r, 73);
    cctx x;
    cctx_make(&x, &r);
    gsl_matrix *Pi = gsl_matrix_alloc(N, N), *G = gsl_matrix_alloc(K, K);
    double Pd[N * N], U[N * K], v[N], pv[N], ref[N], ldg;
    dense_ref(&x, Pd, Pi, U, G, &ldg);
    size_t ei[N * B], ej[N * B], m = 0;
    for (size_t j = 0; j < N; j++)
        for (size_t i = j + 1; i <= j + B && i < N; i++) {
            ei[m] = i;
            ej[m++] = j;
        }
    gmm_sparse *P = NULL;
    ck_assert_int_eq(gmm_sparse_from_entries(N, m, ei, ej, &P), GMM_OK);
    /* Sigma_c v, dense */
    for (size_t i = 0; i < N; i++)
        v[i] = tu_normal(&r);
    for (size_t i = 0; i < N; i++) {
        pv[i] = 0.0;
        for (size_t t = 0; t < N; t++)
            pv[i] += gsl_matrix_get(Pi, i, t) * v[t];
    }
    double apv[K];
    for (size_t a = 0; a < K; a++) {
        apv[a] = 0.0;
        for (size_t t = 0; t < N; t++)
            apv[a] += x.A[a * N + t] * pv[t];
    }
    for (size_t i = 0; i < N; i++) {
        ref[i] = pv[i];
        for (size_t a = 0; a < K; a++)
            for (size_t b = 0; b < K; b++)
                ref[i] -= U[i * K + a] * gsl_matrix_get(G, a, b) * apv[b];
    }
    double scale = 0.0;
    for (size_t i = 0; i < N; i++)
        scale = fmax(scale, fabs(ref[i]));
    for (int pins = 0; pins < 2; pins++) {
        for (size_t j = 0; j < N; j++)
            for (size_t p = P->colptr[j]; p < P->colptr[j + 1]; p++)
                P->val[p] = Pd[P->rowind[p] * N + j];
        double tau = pins ? 2.5 : 0.0;
        gmm_constr_pin_sparse(x.c, tau, P);
        gmm_factor *F = gmm_factor_sparse_alloc(P);
        ck_assert_ptr_nonnull(F);
        ck_assert_int_eq(gmm_factor_decomp_sparse(F, P), GMM_OK);
        gmm_constr *c2 = gmm_constr_alloc(N, K, x.A, x.pin);
        double v1[N], v2[N], e1 = 0.0, e2 = 0.0;
        memcpy(v1, v, sizeof v);
        memcpy(v2, v, sizeof v);
        ck_assert_int_eq(gmm_constr_factor_with(x.c, F, tau), GMM_OK);
        ck_assert_int_eq(gmm_constr_solve_with(x.c, F, v1), GMM_OK);
        ck_assert_int_eq(gmm_constr_factor_solve_with(c2, F, tau, v2), GMM_OK);
        for (size_t i = 0; i < N; i++) {
            e1 = fmax(e1, fabs(v1[i] - ref[i]));
            e2 = fmax(e2, fabs(v2[i] - ref[i]));
        }
        double l1 = gmm_constr_logdet(x.c), l2 = gmm_constr_logdet(c2);
        if (report())
            fprintf(stderr, "constr through a factor, tau %g: %.2e, fused %.2e, log %.2e\n",
                    tau, e1 / scale, e2 / scale, fabs(l1 - l2));
        ck_assert_msg(e1 <= 1e-12 * scale && e2 <= 1e-12 * scale, "tau %g: %g, fused %g", tau,
                      e1, e2);
        ck_assert_double_le(fabs(l1 - l2), 1e-12 * fmax(1.0, fabs(l1)));
        gmm_constr_free(c2);
        gmm_factor_free(F);
    }
    gsl_matrix_free(Pi);
    gsl_matrix_free(G);
    gmm_sparse_free(P);
    cctx_free(&x);
}
END_TEST

/* gmm_constr_project: the result satisfies A x = 0 and differs from the
 * input by A' lambda (the two properties of the Euclidean projection),
 * lambda from GSL's least squares. */
START_TEST(test_constr_project)
{
    tu_rng r;
    tu_rng_seed(&r, 74);
    cctx x;
    cctx_make(&x, &r);
    double v[N], p[N], d[N];
    for (size_t i = 0; i < N; i++)
        v[i] = p[i] = tu_normal(&r);
    ck_assert_int_eq(gmm_constr_project(x.c, p), GMM_OK);
    double ea = 0.0, er = 0.0;
    for (size_t a = 0; a < K; a++) {
        double s = 0.0;
        for (size_t t = 0; t < N; t++)
            s += x.A[a * N + t] * p[t];
        ea = fmax(ea, fabs(s));
    }
    gsl_matrix *At = gsl_matrix_alloc(N, K), *T = gsl_matrix_alloc(N, K);
    gsl_vector *tau = gsl_vector_alloc(K), *lam = gsl_vector_alloc(K), *res = gsl_vector_alloc(N);
    for (size_t t = 0; t < N; t++) {
        d[t] = v[t] - p[t];
        for (size_t a = 0; a < K; a++)
            gsl_matrix_set(At, t, a, x.A[a * N + t]);
    }
    gsl_matrix_memcpy(T, At);
    gsl_vector_view dv = gsl_vector_view_array(d, N);
    ck_assert_int_eq(gsl_linalg_QR_decomp(T, tau), GSL_SUCCESS);
    ck_assert_int_eq(gsl_linalg_QR_lssolve(T, tau, &dv.vector, lam, res), GSL_SUCCESS);
    for (size_t t = 0; t < N; t++)
        er = fmax(er, fabs(gsl_vector_get(res, t)));
    if (report())
        fprintf(stderr, "constr project: |A x| %.2e, off the row space %.2e\n", ea, er);
    ck_assert_msg(ea < 1e-13 && er < 1e-13, "|A x| %g, residual %g", ea, er);
    gsl_matrix_free(At);
    gsl_matrix_free(T);
    gsl_vector_free(tau);
    gsl_vector_free(lam);
    gsl_vector_free(res);
    cctx_free(&x);
}
END_TEST

START_TEST(test_constr_rev)
{
    tu_rng r;
    tu_rng_seed(&r, 72);
    cctx x;
    cctx_make(&x, &r);
    fval(&x);
    gmm_band *Lbar = gmm_band_alloc(N, B, 0, GMM_BAND_LOWER);
    double mbar[N] = {0};
    gmm_band_set_zero(Lbar);
    ck_assert_int_eq(gmm_constr_rev(x.c, x.L, x.m, x.mc, x.mcbar, x.Sbar, Lbar, mbar), GMM_OK);
    size_t wi = 0, wj = 0, wm = 0;
    double eL = tu_fd_check_band(x.L, Lbar, fval, &x, 1e-5, 1.0, (size_t)-1, &r, &wi, &wj);
    double em = tu_fd_check4(x.m, N, mbar, fval, &x, 1e-3, 1.0, &wm);
    if (report())
        fprintf(stderr, "constr rev: L %.2e at (%zu, %zu), m %.2e at %zu\n", eL, wi, wj, em, wm);
    ck_assert_msg(eL < 1e-7, "Lbar(%zu, %zu) %.10g: relative error %.3g", wi, wj,
                  gmm_band_get(Lbar, wi, wj), eL);
    ck_assert_msg(em < 1e-9, "mbar[%zu] %.10g: relative error %.3g", wm, mbar[wm], em);
    /* after a factor with pins there is no reverse mode; the next factor
     * without them has it again (the tau is the factor's, nothing to reset) */
    ck_assert_int_eq(gmm_constr_factor(x.c, x.L, 1.0), GMM_OK);
    ck_assert_int_eq(gmm_constr_rev(x.c, x.L, x.m, x.mc, x.mcbar, x.Sbar, Lbar, mbar),
                     GMM_EINVAL);
    ck_assert_int_eq(gmm_constr_factor(x.c, x.L, 0.0), GMM_OK);
    ck_assert_int_eq(gmm_constr_rev(x.c, x.L, x.m, x.mc, x.mcbar, x.Sbar, Lbar, mbar), GMM_OK);
    gmm_band_free(Lbar);
    cctx_free(&x);
}
END_TEST

extern Suite *model_constr_suite(void);
Suite *model_constr_suite(void)
{
    Suite *s = suite_create("model_constr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_constr_forward);
    tcase_add_test(tc, test_constr_rev);
    tcase_add_test(tc, test_constr_factor_solve_with);
    tcase_add_test(tc, test_constr_project);
    suite_add_tcase(s, tc);
    return s;
}
