/* test_stack_corr.c -- the CORR component of the stacked latent (stack.h,
 * stack_corr.c): correlated effects per level, lme4's (1 + x | g).
 *
 * The assembled Q against a dense block-diagonal Sigma^-1 whose Sigma is
 * built here from the partial-correlation recursion (not the Cholesky
 * construction the library uses), the log-determinant and the prior's
 * reverse mode against differences, the Gaussian marginal likelihood and
 * its gradient against a dense N(0, H S H' + noise I), and a new row's
 * prior variance z' Sigma z. */
#include <check.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/band.h"
#include "gmm/latent.h"
#include "gmm/stack.h"
#include "support/testutil.h"

#define NR 40
#define NL 6
#define NIID 5

static int report(void) { return getenv("GMM_TEST_REPORT") != NULL; }

/* Case i: k = 1, 2, 3 correlated effects per level, beside an iid term. */
typedef struct {
    size_t k, lev[NR], lev2[NR];
    double z[NR * 3];
    gmm_latent *l;
    double th[16];
    size_t np;
} ccase;

static const char *const eff[] = {"(Intercept)", "Days", "w"};

static void ccase_make(ccase *c, size_t k)
{
    tu_rng r;
    tu_rng_seed(&r, 17 + k);
    c->k = k;
    for (size_t i = 0; i < NR; i++) {
        c->lev[i] = (i * 7 + 3) % NL;
        c->lev2[i] = (i * 3 + 1) % NIID;
        c->z[i * k] = 1.0;
        for (size_t a = 1; a < k; a++)
            c->z[i * k + a] = tu_normal(&r);
    }
    gmm_stack_term t[2] = {
        {.model = GMM_STACK_CORR, .name = "f.g", .nlevel = NL, .level = c->lev, .neffect = k,
         .z = c->z, .effect = eff},
        {.model = GMM_STACK_IID, .name = "f.h", .nlevel = NIID, .level = c->lev2,
         .variance = 0.6}};
    ck_assert_int_eq(gmm_latent_stack_alloc(NR, 2, t, 0, &c->l), GMM_OK);
    c->np = gmm_latent_nparam(c->l);
    ck_assert_uint_eq(c->np, k * (k + 1) / 2 + 1);
    static const double var[] = {0.8, 1.7, 0.4}, cor[] = {0.6, -0.35, 0.5};
    for (size_t a = 0; a < k; a++)
        c->th[a] = var[a];
    for (size_t p = 0; p < k * (k - 1) / 2; p++)
        c->th[k + p] = cor[p];
    c->th[c->np - 1] = 0.6;
}

/* Sigma from the variances and the partial correlations: R_10 = z_10,
 * R_20 = z_20, R_21 = z_20 z_10 + z_21 sqrt((1 - z_20^2)(1 - z_10^2)). */
static void sigma_dense(const ccase *c, double *S)
{
    size_t k = c->k;
    double R[9] = {0};
    for (size_t a = 0; a < k; a++)
        R[a * k + a] = 1.0;
    if (k >= 2)
        R[1 * k + 0] = R[0 * k + 1] = c->th[k];
    if (k == 3) {
        double z10 = c->th[3], z20 = c->th[4], z21 = c->th[5];
        R[2 * k + 0] = R[0 * k + 2] = z20;
        R[2 * k + 1] = R[1 * k + 2] = z20 * z10 + z21 * sqrt((1 - z20 * z20) * (1 - z10 * z10));
    }
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++)
            S[a * k + b] = sqrt(c->th[a] * c->th[b]) * R[a * k + b];
}

START_TEST(test_corr_names)
{
    ccase c;
    ccase_make(&c, 3);
    ck_assert_str_eq(gmm_latent_param_name(c.l, 0), "f.g.variance.(Intercept)");
    ck_assert_str_eq(gmm_latent_param_name(c.l, 3), "f.g.pcor.(Intercept).Days");
    ck_assert_str_eq(gmm_latent_param_name(c.l, 5), "f.g.pcor.Days.w");
    ck_assert_int_eq(gmm_latent_param_domain(c.l, 3), GMM_PARAM_SIGNED);
    ck_assert_int_eq(gmm_latent_param_domain(c.l, 1), GMM_PARAM_POSITIVE);
    gmm_latent_free(c.l);
    ccase_make(&c, 2);
    ck_assert_str_eq(gmm_latent_param_name(c.l, 2), "f.g.cor.(Intercept).Days");
    ck_assert_uint_eq(gmm_latent_bandwidth(c.l) >= 1, 1);
    gmm_latent_free(c.l);
}
END_TEST

/* Q = blockdiag(Sigma^-1 per level, 1/0.6 I) in the latent's order, and
 * log det Q from GSL's Cholesky of the dense matrix. */
START_TEST(test_corr_q_dense)
{
    ccase c;
    ccase_make(&c, 1 + (size_t)_i);
    size_t k = c.k, n = gmm_latent_dim(c.l);
    ck_assert_uint_eq(n, NL * k + NIID);
    double S[9];
    sigma_dense(&c, S);
    gsl_matrix *Si = gsl_matrix_alloc(k, k);
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < k; b++)
            gsl_matrix_set(Si, a, b, S[a * k + b]);
    gsl_linalg_cholesky_decomp1(Si);
    double ldS = 0.0;
    for (size_t a = 0; a < k; a++)
        ldS += 2.0 * log(gsl_matrix_get(Si, a, a));
    gsl_linalg_cholesky_invert(Si);
    double *E = calloc(n * n, sizeof *E);
    for (size_t g = 0; g < NL; g++)
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++)
                E[gmm_latent_stack_index(c.l, 0, g * k + a) * n +
                  gmm_latent_stack_index(c.l, 0, g * k + b)] = gsl_matrix_get(Si, a, b);
    for (size_t j = 0; j < NIID; j++) {
        size_t p = gmm_latent_stack_index(c.l, 1, j);
        E[p * n + p] = 1.0 / 0.6;
    }
    gmm_band *Q = gmm_band_alloc(n, gmm_latent_bandwidth(c.l), 0, GMM_BAND_SYMMETRIC);
    double ld, worst = 0.0;
    ck_assert_int_eq(gmm_latent_prior(c.l, c.th, Q, &ld), GMM_OK);
    double *D = tu_band_to_dense(Q);
    for (size_t i = 0; i < n * n; i++)
        worst = fmax(worst, fabs(D[i] - E[i]));
    ck_assert_msg(worst < 1e-12, "k = %zu: Q off by %g", k, worst);
    ck_assert_uint_eq(gmm_latent_bandwidth(c.l) >= k - 1, 1);
    double lde = -NL * ldS + NIID * log(1.0 / 0.6), ldl;
    ck_assert_int_eq(gmm_latent_stack_logdet(c.l, c.th, &ldl), GMM_OK);
    if (report())
        fprintf(stderr, "corr k = %zu: Q %.1e, logdet %.15g vs %.15g\n", k, worst, ldl, lde);
    ck_assert_msg(fabs(ldl - lde) < 1e-11 * fabs(lde) + 1e-11, "logdet %.15g vs %.15g", ldl,
                  lde);
    free(D);
    free(E);
    gsl_matrix_free(Si);
    gmm_band_free(Q);
    gmm_latent_free(c.l);
}
END_TEST

/* The prior's reverse mode: sum Qbar . Q(theta) against fourth-order
 * differences (log det Q's gradient: the Gaussian likelihood's, below). */
typedef struct {
    ccase *c;
    gmm_band *Q;
    const gmm_band *Qbar;
} pctx;

static double prior_dot(void *p)
{
    pctx *q = p;
    double ld;
    ck_assert_int_eq(gmm_latent_prior(q->c->l, q->c->th, q->Q, &ld), GMM_OK);
    double s = 0.0;
    for (size_t j = 0; j < q->Q->n; j++)
        for (size_t i = j; i < q->Q->n && i <= j + q->Q->kl; i++)
            s += gmm_band_get(q->Qbar, i, j) * gmm_band_get(q->Q, i, j);
    return s;
}

START_TEST(test_corr_prior_rev)
{
    ccase c;
    ccase_make(&c, 1 + (size_t)_i);
    size_t n = gmm_latent_dim(c.l), kl = gmm_latent_bandwidth(c.l);
    gmm_band *Q = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Qb = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
    tu_rng r;
    tu_rng_seed(&r, 5);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + kl; i++)
            *gmm_band_ptr(Qb, i, j) = tu_normal(&r);
    pctx p = {&c, Q, Qb};
    double ld, tb[16] = {0};
    ck_assert_int_eq(gmm_latent_prior(c.l, c.th, Q, &ld), GMM_OK);
    ck_assert_int_eq(gmm_latent_prior_rev(c.l, Qb, 0.0, tb), GMM_OK);
    double err = tu_fd_check4(c.th, c.np, tb, prior_dot, &p, 1e-3, 1.0, NULL);
    if (report())
        fprintf(stderr, "corr k = %zu Q reverse: %.2e\n", c.k, err);
    ck_assert_msg(err < 1e-7, "k = %zu: reverse rel err %g", c.k, err);
    gmm_band_free(Q);
    gmm_band_free(Qb);
    gmm_latent_free(c.l);
}
END_TEST

/* log N(y; 0, H S H' + noise I) densely, S = Q^-1: the rows' weights z. */
typedef struct {
    ccase *c;
    const double *y;
    double noise;
} gctx;

static double dense_loglik(const ccase *c, const double *y, double noise)
{
    size_t k = c->k;
    double S[9];
    sigma_dense(c, S);
    gsl_matrix *C = gsl_matrix_alloc(NR, NR);
    for (size_t i = 0; i < NR; i++)
        for (size_t j = 0; j < NR; j++) {
            double v = (i == j ? noise : 0.0) + (c->lev2[i] == c->lev2[j] ? 0.6 : 0.0);
            if (c->lev[i] == c->lev[j])
                for (size_t a = 0; a < k; a++)
                    for (size_t b = 0; b < k; b++)
                        v += c->z[i * k + a] * S[a * k + b] * c->z[j * k + b];
            gsl_matrix_set(C, i, j, v);
        }
    gsl_linalg_cholesky_decomp1(C);
    gsl_vector *u = gsl_vector_alloc(NR);
    for (size_t i = 0; i < NR; i++)
        gsl_vector_set(u, i, y[i]);
    gsl_vector_view L = gsl_matrix_diagonal(C);
    double ld = 0.0, q = 0.0;
    for (size_t i = 0; i < NR; i++)
        ld += 2.0 * log(gsl_vector_get(&L.vector, i));
    gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, C, u);
    for (size_t i = 0; i < NR; i++)
        q += gsl_vector_get(u, i) * gsl_vector_get(u, i);
    gsl_matrix_free(C);
    gsl_vector_free(u);
    return -0.5 * (NR * log(2.0 * M_PI) + ld + q);
}

static double gauss_fn(void *p)
{
    gctx *g = p;
    double ll;
    ck_assert_int_eq(gmm_latent_gaussian(g->c->l, g->c->th, g->y, g->noise, &ll, NULL, NULL),
                     GMM_OK);
    return ll;
}

START_TEST(test_corr_gaussian)
{
    ccase c;
    ccase_make(&c, 1 + (size_t)_i);
    tu_rng r;
    tu_rng_seed(&r, 9);
    double y[NR], ll, tb[16], nb;
    for (size_t i = 0; i < NR; i++)
        y[i] = 2.0 * tu_normal(&r);
    ck_assert_int_eq(gmm_latent_gaussian(c.l, c.th, y, 0.3, &ll, tb, &nb), GMM_OK);
    double de = dense_loglik(&c, y, 0.3);
    gctx g = {&c, y, 0.3};
    double err = tu_fd_check4(c.th, c.np, tb, gauss_fn, &g, 1e-3, 1.0, NULL);
    if (report())
        fprintf(stderr, "corr k = %zu gaussian %.15g dense %.15g, grad %.2e\n", c.k, ll, de, err);
    ck_assert_msg(fabs(ll - de) < 1e-10 * fabs(de), "k = %zu: %.15g vs dense %.15g", c.k, ll,
                  de);
    ck_assert_msg(err < 1e-7, "k = %zu: gradient rel err %g", c.k, err);
    gmm_latent_free(c.l);
}
END_TEST

/* A new row at a data level reads z at the level's effects; at a new level
 * it is the prior: no reads, variance z' Sigma z. */
START_TEST(test_corr_new_row)
{
    ccase c;
    ccase_make(&c, 3);
    double z[3] = {1.0, -0.7, 2.1}, S[9], w[16], ev, want = 0.0;
    size_t idx[16], nnz;
    sigma_dense(&c, S);
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            want += z[a] * S[a * 3 + b] * z[b];
    gmm_stack_at at[2] = {{GMM_NO_INDEX, NAN, z}, {1, NAN, NULL}};
    ck_assert_uint_eq(gmm_latent_stack_row_max(c.l) <= 16, 1);
    ck_assert_int_eq(gmm_latent_stack_row(c.l, c.th, at, idx, w, &nnz, &ev), GMM_OK);
    ck_assert_uint_eq(nnz, 1);
    ck_assert_msg(fabs(ev - want) < 1e-12 * want, "new level variance %g vs %g", ev, want);
    at[0].level = 4;
    ck_assert_int_eq(gmm_latent_stack_row(c.l, c.th, at, idx, w, &nnz, &ev), GMM_OK);
    ck_assert_uint_eq(nnz, 4);
    ck_assert(ev == 0.0);
    for (size_t a = 0; a < 3; a++) {
        ck_assert_uint_eq(idx[a], gmm_latent_stack_index(c.l, 0, 4 * 3 + a));
        ck_assert(w[a] == z[a]);
    }
    at[0].z = NULL;
    ck_assert_int_eq(gmm_latent_stack_row(c.l, c.th, at, idx, w, &nnz, &ev), GMM_EINVAL);
    /* out of the domain */
    c.th[4] = 1.0;
    gmm_band *Q = gmm_band_alloc(gmm_latent_dim(c.l), gmm_latent_bandwidth(c.l), 0,
                                 GMM_BAND_SYMMETRIC);
    double ld;
    ck_assert_int_eq(gmm_latent_prior(c.l, c.th, Q, &ld), GMM_EDOM);
    gmm_band_free(Q);
    gmm_latent_free(c.l);
}
END_TEST

Suite *model_stack_corr_suite(void)
{
    Suite *s = suite_create("model_stack_corr");
    TCase *tc = tcase_create("corr");
    tcase_add_test(tc, test_corr_names);
    tcase_add_loop_test(tc, test_corr_q_dense, 0, 3);
    tcase_add_loop_test(tc, test_corr_prior_rev, 0, 3);
    tcase_add_loop_test(tc, test_corr_gaussian, 0, 3);
    tcase_add_test(tc, test_corr_new_row);
    suite_add_tcase(s, tc);
    return s;
}
