/* test_band_selinv.c -- the sparse inverse subset (Takahashi) and its
 * reverse mode: forward against a dense GSL inverse, reverse against central
 * differences, over n in {1, 2, 3, 10, 57}, every factor bandwidth l (and
 * beyond n - 1, clamped) and every requested band l' >= l (and beyond). */
#include <check.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_math.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmm/band.h"
#include "support/testutil.h"

static const size_t sizes[] = {1, 2, 3, 10, 57};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Sigma = (L L^T)^{-1} densely (column-major n x n, caller frees) and the
 * 2-norm condition number of L L^T. */
static double *dense_inverse(const gmm_band *L, double *cond)
{
    size_t n = L->n;
    double *Ld = tu_band_to_dense(L);
    double *Q = calloc(n * n, sizeof *Q);
    double *E = calloc(n * n, sizeof *E);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (size_t k = 0; k < n; k++)
                s += Ld[k * n + i] * Ld[k * n + j];
            Q[j * n + i] = s;
            E[j * n + i] = s;
        }
    /* Symmetric, so row- versus column-major does not matter to GSL. */
    gsl_matrix_view Qv = gsl_matrix_view_array(Q, n, n);
    gsl_matrix_view Ev = gsl_matrix_view_array(E, n, n);
    gsl_vector *ev = gsl_vector_alloc(n);
    gsl_eigen_symm_workspace *w = gsl_eigen_symm_alloc(n);
    ck_assert_int_eq(gsl_eigen_symm(&Ev.matrix, ev, w), 0);
    *cond = gsl_vector_max(ev) / gsl_vector_min(ev);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(&Qv.matrix), 0);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(&Qv.matrix), 0);
    gsl_eigen_symm_free(w);
    gsl_vector_free(ev);
    free(E);
    free(Ld);
    return Q;
}

/* max |S - Sigma| over S's stored band, relative to max |Sigma|. */
static double band_err(const gmm_band *S, const double *Sigma)
{
    size_t n = S->n;
    double e = 0.0, m = 0.0;
    for (size_t k = 0; k < n * n; k++)
        m = fmax(m, fabs(Sigma[k]));
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i <= j + S->kl && i < n; i++) {
            double d = fabs(*gmm_band_ptr(S, i, j) - Sigma[j * n + i]);
            if (!(d <= e))
                e = d;
        }
    return e / m;
}

/* Forward error of Takahashi's recurrence grows like n eps cond(L L^T); the
 * constant is stated here; the largest observed error is ~0.13 of the bound
 * (SELINV_STATS=1 prints it). */
#define SELINV_C 4.0

START_TEST(test_selinv_vs_dense)
{
    tu_rng r;
    double worst = 0.0;
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        for (size_t l = 0; l <= n + 1; l++) {
            tu_rng_seed(&r, 1000 * n + l);
            gmm_band *L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
            ck_assert_ptr_nonnull(L);
            tu_band_fill_lower(L, &r);
            double cond;
            double *Sigma = dense_inverse(L, &cond);
            double tol = SELINV_C * (double)n * DBL_EPSILON * cond;
            for (size_t lp = l; lp <= n + 2; lp++) {
                gmm_band *S = gmm_band_alloc(n, lp, 0, GMM_BAND_SYMMETRIC);
                ck_assert_ptr_nonnull(S);
                tu_band_fill_random(S, &r); /* garbage the forward must overwrite */
                ck_assert_int_eq(gmm_band_chol_selinv(L, S), GMM_OK);
                double e = band_err(S, Sigma);
                ck_assert_msg(e <= tol, "n %zu l %zu l' %zu: err %.3g > %.3g (cond %.3g)", n, l,
                              lp, e, tol, cond);
                worst = fmax(worst, e / tol);
                gmm_band_free(S);
            }
            free(Sigma);
            gmm_band_free(L);
        }
    }
    if (getenv("SELINV_STATS"))
        fprintf(stderr, "selinv forward: worst err/tol %.3g\n", worst);
}
END_TEST

START_TEST(test_selinv_errors)
{
    gmm_band *L = gmm_band_alloc(5, 2, 0, GMM_BAND_LOWER);
    gmm_band *S1 = gmm_band_alloc(5, 1, 0, GMM_BAND_SYMMETRIC);
    gmm_band *S2 = gmm_band_alloc(5, 2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *S6 = gmm_band_alloc(6, 2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *G = gmm_band_alloc(5, 2, 0, GMM_BAND_GENERAL);
    gmm_band *Lb = gmm_band_alloc(5, 2, 0, GMM_BAND_LOWER);
    gmm_band *Lb1 = gmm_band_alloc(5, 1, 0, GMM_BAND_LOWER);
    tu_rng r;
    tu_rng_seed(&r, 7);
    tu_band_fill_lower(L, &r);

    ck_assert_int_eq(gmm_band_chol_selinv(L, S1), GMM_EDIM); /* l' < l */
    ck_assert_int_eq(gmm_band_chol_selinv(L, S6), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_selinv(G, S2), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_selinv(L, NULL), GMM_EINVAL);
    ck_assert_int_eq(gmm_band_chol_selinv(L, S2), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S2, S1, Lb), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S2, S6, Lb), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S2, S2, Lb), GMM_EDIM); /* aliasing */
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S2, G, Lb), GMM_EDIM);

    gmm_band *Sb = gmm_band_alloc(5, 2, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S2, Sb, Lb1), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S2, Sb, NULL), GMM_OK);

    /* A zero pivot is singular: reported, with its row. */
    *gmm_band_ptr(L, 3, 3) = 0.0;
    ck_assert_int_eq(gmm_band_chol_selinv(L, S2), GMM_EDOM);
    ck_assert_uint_eq(gmm_error_index(), 3);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S2, Sb, Lb), GMM_EDOM);
    *gmm_band_ptr(L, 3, 3) = NAN;
    ck_assert_int_eq(gmm_band_chol_selinv(L, S2), GMM_EDOM);

    gmm_band *L0 = gmm_band_alloc(0, 0, 0, GMM_BAND_LOWER);
    gmm_band *S0 = gmm_band_alloc(0, 3, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_band_chol_selinv(L0, S0), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L0, S0, S0, L0), GMM_OK);

    gmm_band_free(L);
    gmm_band_free(S1);
    gmm_band_free(S2);
    gmm_band_free(S6);
    gmm_band_free(G);
    gmm_band_free(Lb);
    gmm_band_free(Lb1);
    gmm_band_free(Sb);
    gmm_band_free(L0);
    gmm_band_free(S0);
}
END_TEST

/* A negative pivot is not singular: L L^T is unchanged when a column of L
 * changes sign, and so is S. */
START_TEST(test_selinv_column_sign)
{
    tu_rng r;
    tu_rng_seed(&r, 11);
    size_t n = 9;
    gmm_band *L = gmm_band_alloc(n, 3, 0, GMM_BAND_LOWER);
    gmm_band *S = gmm_band_alloc(n, 5, 0, GMM_BAND_SYMMETRIC);
    gmm_band *T = gmm_band_alloc(n, 5, 0, GMM_BAND_SYMMETRIC);
    tu_band_fill_lower(L, &r);
    ck_assert_int_eq(gmm_band_chol_selinv(L, S), GMM_OK);
    for (size_t i = 4; i < n && i <= 4 + 3; i++)
        *gmm_band_ptr(L, i, 4) = -*gmm_band_ptr(L, i, 4);
    ck_assert_int_eq(gmm_band_chol_selinv(L, T), GMM_OK);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + 5; i++)
            ck_assert_double_eq_tol(*gmm_band_ptr(T, i, j), *gmm_band_ptr(S, i, j), 1e-14);
    gmm_band_free(L);
    gmm_band_free(S);
    gmm_band_free(T);
}
END_TEST

/* ---- reverse mode ---------------------------------------------------------- */

/* c(L) = sum over S's stored entries of W .* S, S = selinv(L): then
 * Sbar = W exactly under the stored-entry convention. */
typedef struct {
    gmm_band *L, *S, *W;
} fd_ctx;

static double objective(fd_ctx *c)
{
    ck_assert_int_eq(gmm_band_chol_selinv(c->L, c->S), GMM_OK);
    double s = 0.0;
    size_t n = c->S->n;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + c->S->kl; i++)
            s += *gmm_band_ptr(c->W, i, j) * *gmm_band_ptr(c->S, i, j);
    return s;
}

/* Central difference in stored entry (i, j) of L.  FD_STEP balances
 * truncation (~h^2) against rounding (~eps |c| / h): over this grid the worst
 * error is 7e-7 at h = 1e-4, 7e-8 at 3e-5 and 1e-6 at 3e-6. */
static double fd_entry(fd_ctx *c, size_t i, size_t j, double h)
{
    double *p = gmm_band_ptr(c->L, i, j), save = *p;
    *p = save + h;
    double cp = objective(c);
    *p = save - h;
    double cm = objective(c);
    *p = save;
    return (cp - cm) / (2.0 * h);
}

#define FD_STEP 3e-5
#define FD_RTOL 1e-6
/* Entries whose derivative is tiny next to the gradient's largest entry are
 * compared relative to 1e-3 of that largest entry (FD's rounding floor is
 * absolute, ~eps |c| / h). */
#define FD_FLOOR 1e-3

static double fd_rel(double a, double fd, double floor)
{
    double scale = fmax(floor, fmax(fabs(a), fabs(fd)));
    return scale > 0.0 ? fabs(a - fd) / scale : 0.0;
}

/* For n <= 10 every stored entry of L is checked; for n = 57, nsample
 * random entries (always including a diagonal and the band edge) plus one
 * random direction through all of them. */
static double check_rev(size_t n, size_t l, size_t lp, tu_rng *r, size_t nsample)
{
    fd_ctx c;
    c.L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    c.S = gmm_band_alloc(n, lp, 0, GMM_BAND_SYMMETRIC);
    c.W = gmm_band_alloc(n, lp, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Sbar = gmm_band_alloc(n, lp, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Lbar = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    gmm_band *V = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    ck_assert_ptr_nonnull(Lbar);
    tu_band_fill_lower(c.L, r);
    tu_band_fill_random(c.W, r);
    tu_band_fill_random(V, r);
    l = c.L->kl;

    objective(&c);
    ck_assert_int_eq(gmm_band_copy(Sbar, c.W), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(c.L, c.S, Sbar, Lbar), GMM_OK);

    double gmax = 0.0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + l; i++)
            gmax = fmax(gmax, fabs(*gmm_band_ptr(Lbar, i, j)));
    double floor = FD_FLOOR * gmax, worst = 0.0;

    if (nsample == 0) {
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i < n && i <= j + l; i++) {
                double e = fd_rel(*gmm_band_ptr(Lbar, i, j), fd_entry(&c, i, j, FD_STEP), floor);
                ck_assert_msg(e <= FD_RTOL, "n %zu l %zu l' %zu entry (%zu,%zu): rel err %.3g",
                              n, l, lp, i, j, e);
                worst = fmax(worst, e);
            }
    } else {
        for (size_t t = 0; t < nsample; t++) {
            size_t j = (size_t)(tu_uniform(r) * (double)n);
            size_t span = (j + l < n ? j + l : n - 1) - j;
            size_t i = t == 0 ? j : t == 1 ? j + span
                                           : j + (size_t)(tu_uniform(r) * (double)(span + 1));
            double e = fd_rel(*gmm_band_ptr(Lbar, i, j), fd_entry(&c, i, j, FD_STEP), floor);
            ck_assert_msg(e <= FD_RTOL, "n %zu l %zu l' %zu entry (%zu,%zu): rel err %.3g", n, l,
                          lp, i, j, e);
            worst = fmax(worst, e);
        }
    }

    /* One random unit direction V through every stored entry of L at once;
     * the floor is FD_FLOOR times the largest possible directional
     * derivative, |Lbar|_2. */
    double vn = sqrt(gmm_band_dot(V, V)), gn = sqrt(gmm_band_dot(Lbar, Lbar)), h = FD_STEP;
    double a = gmm_band_dot(Lbar, V) / vn;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + l; i++)
            *gmm_band_ptr(c.L, i, j) += h / vn * *gmm_band_ptr(V, i, j);
    double cp = objective(&c);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + l; i++)
            *gmm_band_ptr(c.L, i, j) -= 2.0 * h / vn * *gmm_band_ptr(V, i, j);
    double cm = objective(&c);
    double e = fd_rel(a, (cp - cm) / (2.0 * h), FD_FLOOR * gn);
    ck_assert_msg(e <= FD_RTOL, "n %zu l %zu l' %zu direction: rel err %.3g", n, l, lp, e);
    worst = fmax(worst, e);

    gmm_band_free(c.L);
    gmm_band_free(c.S);
    gmm_band_free(c.W);
    gmm_band_free(Sbar);
    gmm_band_free(Lbar);
    gmm_band_free(V);
    return worst;
}

START_TEST(test_selinv_rev_fd)
{
    tu_rng r;
    tu_rng_seed(&r, 2024);
    double worst = 0.0;
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        for (size_t l = 0; l <= n + 1; l++)
            for (size_t lp = l; lp <= n + 2; lp++)
                worst = fmax(worst, check_rev(n, l, lp, &r, n > 10 ? 6 : 0));
    }
    if (getenv("SELINV_STATS"))
        fprintf(stderr, "selinv reverse: worst FD rel err %.3g\n", worst);
}
END_TEST

/* Adjoints accumulate into Lbar: a second call adds the same gradient. */
START_TEST(test_selinv_rev_accumulates)
{
    tu_rng r;
    tu_rng_seed(&r, 5);
    size_t n = 12, l = 3, lp = 6;
    gmm_band *L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    gmm_band *S = gmm_band_alloc(n, lp, 0, GMM_BAND_SYMMETRIC);
    gmm_band *W = gmm_band_alloc(n, lp, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Sbar = gmm_band_alloc(n, lp, 0, GMM_BAND_SYMMETRIC);
    gmm_band *G = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    gmm_band *H = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    tu_band_fill_lower(L, &r);
    tu_band_fill_random(W, &r);
    ck_assert_int_eq(gmm_band_chol_selinv(L, S), GMM_OK);
    gmm_band_copy(Sbar, W);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S, Sbar, G), GMM_OK);
    tu_band_fill_random(H, &r);
    gmm_band *H0 = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    gmm_band_copy(H0, H);
    gmm_band_copy(Sbar, W);
    ck_assert_int_eq(gmm_band_chol_selinv_rev(L, S, Sbar, H), GMM_OK);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n && i <= j + l; i++)
            ck_assert_double_eq_tol(*gmm_band_ptr(H, i, j),
                                    *gmm_band_ptr(H0, i, j) + *gmm_band_ptr(G, i, j), 1e-13);
    gmm_band_free(L);
    gmm_band_free(S);
    gmm_band_free(W);
    gmm_band_free(Sbar);
    gmm_band_free(G);
    gmm_band_free(H);
    gmm_band_free(H0);
}
END_TEST

Suite *band_selinv_suite(void)
{
    Suite *s = suite_create("band_selinv");
    TCase *tc = tcase_create("selinv");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_selinv_vs_dense);
    tcase_add_test(tc, test_selinv_errors);
    tcase_add_test(tc, test_selinv_column_sign);
    tcase_add_test(tc, test_selinv_rev_fd);
    tcase_add_test(tc, test_selinv_rev_accumulates);
    suite_add_tcase(s, tc);
    return s;
}
