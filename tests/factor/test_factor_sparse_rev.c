/* test_factor_sparse_rev.c -- gmm_factor_selinv_sparse_rev (the sparse
 * factor's: Takahashi's reverse and the sparse Cholesky's) on the grid,
 * crossed and random SPD patterns of tu_sparse_spd.h, for
 * c(Q) = <Sbar, selinv(Q)> with a fixed Sbar on Q's pattern:
 *
 *  - against the dense formula: with W the symmetric matrix Sbar stands for
 *    (W(i,i) = Sbar(i,i), W(i,j) = W(j,i) = Sbar(i,j)/2), dc = -<Sigma W
 *    Sigma, dQ>, so Qbar(i,i) = -(Sigma W Sigma)(i,i) and Qbar(i,j) =
 *    -2 (Sigma W Sigma)(i,j) under the symmetric convention (a stored entry
 *    moves both (i,j) and (j,i)); 1e-10 relative to the largest entry (the
 *    dense side's error ~ cond^2 n eps ~ 1e-11 for these matrices);
 *  - against the band factor's reverse (1e-10 relative, the same bar);
 *  - against central differences of c in each stored entry of Q (all of
 *    them for n <= 60, a fixed sample of 40 beyond), h = 1e-5 max(1, |Q_e|):
 *    truncation h^2 |c'''| ~ 1e-10 and rounding eps |c| / h ~ 1e-11 relative,
 *    so 1e-6 relative (floor 1e-8 for entries whose derivative is ~0)
 *    leaves room for neither to fail by chance while catching any wrong
 *    term (an error is O(1) relative). */
#include <check.h>
#include <float.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/band.h"
#include "gmm/factor.h"
#include "gmm/sparse.h"
#include "support/testutil.h"
#include "tu_sparse_spd.h"

static const struct {
    int kind;
    size_t k;
} cases[] = {
    {TU_GRID, 5}, {TU_GRID, 17}, {TU_CROSSED, 40}, {TU_CROSSED, 200}, {TU_RANDOM, 30},
    {TU_RANDOM, 260},
};
#define NCASES (sizeof cases / sizeof cases[0])

typedef struct {
    gmm_factor *f;
    gmm_sparse *Q, *S, *Sbar;
} fd_ctx;

static double objective(void *ctx)
{
    fd_ctx *c = ctx;
    ck_assert_int_eq(gmm_factor_decomp_sparse(c->f, c->Q), GMM_OK);
    ck_assert_int_eq(gmm_factor_selinv_sparse(c->f, c->S), GMM_OK);
    double t = 0.0;
    for (size_t p = 0; p < c->S->nnz; p++)
        t += c->Sbar->val[p] * c->S->val[p];
    return t;
}

/* Qbar by the dense formula above, on Q's pattern. */
static void dense_qbar(const tu_spd *m, const gmm_sparse *Sbar, gmm_sparse *Qbar)
{
    size_t n = m->n;
    double *Sig = malloc(n * n * sizeof *Sig), *W = calloc(n * n, sizeof *W);
    double *T = malloc(n * n * sizeof *T), *U = malloc(n * n * sizeof *U);
    memcpy(Sig, m->D, n * n * sizeof *Sig);
    gsl_matrix_view Sv = gsl_matrix_view_array(Sig, n, n);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(&Sv.matrix), 0);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(&Sv.matrix), 0);
    for (size_t j = 0; j < n; j++)
        for (size_t p = Sbar->colptr[j]; p < Sbar->colptr[j + 1]; p++) {
            size_t i = Sbar->rowind[p];
            double v = i == j ? Sbar->val[p] : 0.5 * Sbar->val[p];
            W[i + n * j] = W[j + n * i] = v;
        }
    /* T = W Sigma, U = Sigma T (all symmetric, row/column order alike) */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double t = 0.0;
            for (size_t k = 0; k < n; k++)
                t += W[i + n * k] * Sig[k + n * j];
            T[i + n * j] = t;
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double t = 0.0;
            for (size_t k = 0; k < n; k++)
                t += Sig[i + n * k] * T[k + n * j];
            U[i + n * j] = t;
        }
    for (size_t j = 0; j < n; j++)
        for (size_t p = Qbar->colptr[j]; p < Qbar->colptr[j + 1]; p++) {
            size_t i = Qbar->rowind[p];
            Qbar->val[p] = (i == j ? -1.0 : -2.0) * U[i + n * j];
        }
    free(Sig);
    free(W);
    free(T);
    free(U);
}

static double max_rel(const gmm_sparse *A, const gmm_sparse *B)
{
    double e = 0.0, s = 0.0;
    for (size_t p = 0; p < A->nnz; p++) {
        e = fmax(e, fabs(A->val[p] - B->val[p]));
        s = fmax(s, fabs(B->val[p]));
    }
    return e / fmax(s, DBL_MIN);
}

START_TEST(test_sparse_selinv_rev)
{
    tu_rng r;
    tu_rng_seed(&r, 3111);
    for (size_t c = 0; c < NCASES; c++) {
        tu_spd m = tu_spd_make(cases[c].kind, cases[c].k, &r);
        size_t n = m.n;
        fd_ctx ctx = {gmm_factor_sparse_alloc(m.A), m.A, gmm_sparse_alloc_like(m.A),
                      gmm_sparse_alloc_like(m.A)};
        for (size_t p = 0; p < ctx.Sbar->nnz; p++)
            ctx.Sbar->val[p] = tu_normal(&r);
        gmm_sparse *Qbar = gmm_sparse_alloc_like(m.A), *Qd = gmm_sparse_alloc_like(m.A);
        gmm_sparse *Qb = gmm_sparse_alloc_like(m.A);
        objective(&ctx);
        ck_assert_int_eq(gmm_factor_selinv_sparse_rev(ctx.f, ctx.S, ctx.Sbar, Qbar), GMM_OK);

        dense_qbar(&m, ctx.Sbar, Qd);
        double e = max_rel(Qbar, Qd);
        ck_assert_msg(e <= 1e-10, "%s n %zu: reverse vs dense %g", m.what, n, e);

        /* the band factor's reverse, through the band's own modes */
        size_t kl = tu_spd_bandwidth(m.A);
        gmm_factor *fb = gmm_factor_band_alloc(n, kl);
        gmm_band *Q = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
        gmm_band_set_zero(Q);
        for (size_t j = 0; j < n; j++)
            for (size_t p = m.A->colptr[j]; p < m.A->colptr[j + 1]; p++)
                *gmm_band_ptr(Q, m.A->rowind[p], j) = m.A->val[p];
        ck_assert_int_eq(gmm_factor_decomp(fb, Q), GMM_OK);
        ck_assert_int_eq(gmm_factor_selinv_sparse_rev(fb, ctx.S, ctx.Sbar, Qb), GMM_OK);
        e = max_rel(Qbar, Qb);
        ck_assert_msg(e <= 1e-10, "%s n %zu: sparse vs band reverse %g", m.what, n, e);

        /* adjoints are added into Qbar */
        ck_assert_int_eq(gmm_factor_selinv_sparse_rev(ctx.f, ctx.S, ctx.Sbar, Qbar), GMM_OK);
        for (size_t p = 0; p < Qbar->nnz; p++)
            Qbar->val[p] *= 0.5;
        e = max_rel(Qbar, Qd);
        ck_assert_msg(e <= 1e-10, "%s n %zu: accumulated reverse %g", m.what, n, e);

        size_t worst = 0;
        double err = tu_fd_check_sample(m.A->val, m.A->nnz, Qbar->val, objective, &ctx, 1e-5,
                                        1e-8, 40, &r, &worst);
        ck_assert_msg(err <= 1e-6, "%s n %zu: finite differences %g at entry %zu", m.what, n,
                      err, worst);

        gmm_factor_free(ctx.f);
        gmm_factor_free(fb);
        gmm_band_free(Q);
        gmm_sparse_free(ctx.S);
        gmm_sparse_free(ctx.Sbar);
        gmm_sparse_free(Qbar);
        gmm_sparse_free(Qd);
        gmm_sparse_free(Qb);
        tu_spd_free(&m);
    }
}
END_TEST

START_TEST(test_sparse_selinv_rev_errors)
{
    tu_rng r;
    tu_rng_seed(&r, 3112);
    tu_spd m = tu_spd_make(TU_GRID, 4, &r);
    gmm_factor *f = gmm_factor_sparse_alloc(m.A);
    gmm_sparse *S = gmm_sparse_alloc_like(m.A), *Qbar = gmm_sparse_alloc_like(m.A), *W = NULL;
    ck_assert_int_eq(gmm_factor_selinv_sparse_rev(f, S, S, Qbar), GMM_EINVAL); /* no factor */
    ck_assert_int_eq(gmm_factor_decomp_sparse(f, m.A), GMM_OK);
    ck_assert_int_eq(gmm_factor_selinv_sparse_rev(f, S, S, Qbar), GMM_EINVAL); /* no selinv */
    ck_assert_int_eq(gmm_factor_selinv_sparse(f, S), GMM_OK);
    ck_assert_int_eq(gmm_factor_selinv_sparse_rev(f, S, S, NULL), GMM_EINVAL);
    size_t ei = 3, ej = 0;
    ck_assert_int_eq(gmm_sparse_from_entries(5, 1, &ei, &ej, &W), GMM_OK);
    ck_assert_int_eq(gmm_factor_selinv_sparse_rev(f, S, W, Qbar), GMM_EDIM); /* 5 x 5 */
    ck_assert_int_eq(gmm_factor_selinv_sparse_rev(f, S, S, Qbar), GMM_OK);
    gmm_factor_free(f);
    gmm_sparse_free(S);
    gmm_sparse_free(Qbar);
    gmm_sparse_free(W);
    tu_spd_free(&m);
}
END_TEST

Suite *factor_sparse_rev_suite(void)
{
    Suite *s = suite_create("factor_sparse_rev");
    TCase *tc = tcase_create("selinv_rev");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sparse_selinv_rev);
    tcase_add_test(tc, test_sparse_selinv_rev_errors);
    suite_add_tcase(s, tc);
    return s;
}
