/* test_band_chol.c -- banded Cholesky, its reverse mode and the
 * log-determinant, against dense GSL computations and central differences.
 *
 * The sizes cover both paths of each routine: the forward and the reverse
 * take their blocked BLAS-3 paths from l = 48 on (band_chol.c,
 * band_chol_rev.c), in blocks of 16 columns (32 from l = 192); n = 300 with
 * l in {47, 48, 70, 130, 299} crosses many block boundaries and ends in a
 * ragged block.  Which of the baseline and AVX2 builds of the hand loops runs
 * depends on the CPU; they give bit-identical results (band_simd.h). */
#include <check.h>
#include <float.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "support/testutil.h"

/* Small sizes: every bandwidth 0 .. n-1 plus two beyond (clamped to n-1). */
static const size_t small_n[] = {1, 2, 3, 10, 57};
/* Sizes for the blocked paths. */
static const size_t big_n = 300;
static const size_t big_l[] = {47, 48, 70, 130, 299};

/* Tolerance for L against GSL's dense factor: C_TOL * n * eps relative to
 * max(1, max |L|).  Both are backward-stable Cholesky factorisations, so for
 * the well-conditioned inputs of tu_band_fill_spd (diagonally dominant,
 * condition number below ~4 l) the two factors differ by a few n eps at
 * most; the largest difference measured over these grids is 0.8 n eps, and
 * C_TOL = 8 leaves room for other compilers and BLAS kernels. */
#define C_TOL 8.0

/* Dense column-major lower Cholesky factor of the full matrix of Q, by GSL. */
static double *gsl_dense_chol(const gmm_band *Q)
{
    size_t n = Q->n;
    gsl_matrix *m = gsl_matrix_alloc(n, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            gsl_matrix_set(m, i, j, gmm_band_get(Q, i, j));
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(m), GSL_SUCCESS);
    double *D = calloc(n * n, sizeof *D);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++)
            D[j * n + i] = gsl_matrix_get(m, i, j);
    gsl_matrix_free(m);
    return D;
}

/* Largest entry of D outside the lower band of width l: the dense factor of
 * a band matrix has none, so this checks the oracle itself. */
static double outside_band(const double *D, size_t n, size_t l)
{
    double m = 0.0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j + l + 1; i < n; i++)
            if (fabs(D[j * n + i]) > m)
                m = fabs(D[j * n + i]);
    return m;
}

static void check_decomp_vs_gsl(size_t n, size_t l, tu_rng *r)
{
    gmm_band *Q = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    gmm_band *L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    tu_band_fill_spd(Q, r);
    ck_assert_int_eq(gmm_band_chol_decomp(Q, L), GMM_OK);
    double *D = gsl_dense_chol(Q);
    double err = tu_band_vs_dense(L, D);
    double tol = C_TOL * (double)n * DBL_EPSILON;
    ck_assert_msg(err <= tol, "n %zu l %zu: |L - L_gsl| = %g > %g", n, l, err, tol);
    ck_assert(outside_band(D, n, L->kl) <= tol);
    free(D);
    gmm_band_free(Q);
    gmm_band_free(L);
}

START_TEST(test_decomp_vs_gsl_small)
{
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (size_t t = 0; t < sizeof small_n / sizeof *small_n; t++)
        for (size_t l = 0; l <= small_n[t] + 1; l++)
            check_decomp_vs_gsl(small_n[t], l, &r);
}
END_TEST

START_TEST(test_decomp_vs_gsl_blocked)
{
    tu_rng r;
    tu_rng_seed(&r, 12);
    for (size_t t = 0; t < sizeof big_l / sizeof *big_l; t++)
        check_decomp_vs_gsl(big_n, big_l[t], &r);
    check_decomp_vs_gsl(97, 96, &r); /* n - 1 = l, one ragged block */
}
END_TEST

/* In place (L == Q) gives bit-for-bit the out-of-place factor and turns the
 * struct LOWER. */
START_TEST(test_decomp_in_place)
{
    tu_rng r;
    tu_rng_seed(&r, 13);
    const size_t ls[] = {0, 3, 60};
    for (size_t t = 0; t < 3; t++) {
        gmm_band *Q = gmm_band_alloc(120, ls[t], 0, GMM_BAND_SYMMETRIC);
        gmm_band *L = gmm_band_alloc(120, ls[t], 0, GMM_BAND_LOWER);
        tu_band_fill_spd(Q, &r);
        ck_assert_int_eq(gmm_band_chol_decomp(Q, L), GMM_OK);
        ck_assert_int_eq(gmm_band_chol_decomp(Q, Q), GMM_OK);
        ck_assert_int_eq(Q->kind, GMM_BAND_LOWER);
        ck_assert(memcmp(Q->data, L->data, Q->ld * Q->n * sizeof(double)) == 0);
        gmm_band_free(Q);
        gmm_band_free(L);
    }
}
END_TEST

START_TEST(test_decomp_n0)
{
    gmm_band *Q = gmm_band_alloc(0, 3, 0, GMM_BAND_SYMMETRIC);
    gmm_band *L = gmm_band_alloc(0, 3, 0, GMM_BAND_LOWER);
    gmm_band *Lbar = gmm_band_alloc(0, 3, 0, GMM_BAND_LOWER);
    gmm_band *Qbar = gmm_band_alloc(0, 3, 0, GMM_BAND_SYMMETRIC);
    ck_assert_int_eq(gmm_band_chol_decomp(Q, L), GMM_OK);
    ck_assert(gmm_band_chol_logdet(L) == 0.0);
    ck_assert_int_eq(gmm_band_chol_logdet_rev(L, 1.0, Lbar), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, Lbar, Qbar), GMM_OK);
    gmm_band_free(Q);
    gmm_band_free(L);
    gmm_band_free(Lbar);
    gmm_band_free(Qbar);
}
END_TEST

START_TEST(test_decomp_shape_errors)
{
    gmm_band *Q = gmm_band_alloc(6, 2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *L1 = gmm_band_alloc(6, 1, 0, GMM_BAND_LOWER);
    gmm_band *L2 = gmm_band_alloc(5, 2, 0, GMM_BAND_LOWER);
    gmm_band *S = gmm_band_alloc(6, 2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *L = gmm_band_alloc(6, 2, 0, GMM_BAND_LOWER);
    gmm_band *G = gmm_band_alloc(6, 2, 2, GMM_BAND_GENERAL);
    ck_assert_int_eq(gmm_band_chol_decomp(Q, L1), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_decomp(Q, L2), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_decomp(Q, S), GMM_EDIM);  /* L must be LOWER */
    ck_assert_int_eq(gmm_band_chol_decomp(L, L), GMM_EDIM);  /* Q must be SYMMETRIC */
    ck_assert_int_eq(gmm_band_chol_decomp(G, L), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, L1, S), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, S, S), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, L2, Q), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(S, L, Q), GMM_EDIM);
    gmm_band *Lbar = gmm_band_alloc(6, 2, 0, GMM_BAND_LOWER);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, Lbar, L1), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, Lbar, G), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, L, Q), GMM_EDIM); /* Lbar aliases L */
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, Lbar, NULL), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_logdet_rev(L, 1.0, L2), GMM_EDIM);
    ck_assert_int_eq(gmm_band_chol_logdet_rev(S, 1.0, Lbar), GMM_EDIM);
    gmm_band_free(Q);
    gmm_band_free(L1);
    gmm_band_free(L2);
    gmm_band_free(S);
    gmm_band_free(L);
    gmm_band_free(G);
    gmm_band_free(Lbar);
}
END_TEST

/* ---- not positive definite --------------------------------------------------- */

/* Factor Q (copied) and require GMM_ENOTPD at exactly `row`. */
static void expect_notpd(const gmm_band *Q, size_t row)
{
    gmm_band *L = gmm_band_alloc(Q->n, Q->kl, 0, GMM_BAND_LOWER);
    gmm_error_clear();
    gmm_status s = gmm_band_chol_decomp(Q, L);
    ck_assert_msg(s == GMM_ENOTPD, "n %zu l %zu row %zu: status %d", Q->n, Q->kl, row, (int)s);
    ck_assert_msg(gmm_error_index() == row, "n %zu l %zu: failed row %zu, expected %zu", Q->n,
                  Q->kl, gmm_error_index(), row);
    char want[64];
    snprintf(want, sizeof want, "pivot of row %zu is", row);
    ck_assert_msg(strstr(gmm_error_message(), want), "message '%s'", gmm_error_message());
    gmm_band_free(L);
}

/* Rows chosen to land at the start, inside, at the edges of the blocked
 * path's blocks (16 columns wide), and at the end. */
START_TEST(test_notpd_reports_row)
{
    tu_rng r;
    tu_rng_seed(&r, 21);
    const size_t ns[] = {1, 2, 7, 57, 300, 300, 300};
    const size_t ls[] = {0, 1, 3, 20, 5, 60, 130};
    for (size_t t = 0; t < sizeof ns / sizeof *ns; t++) {
        size_t n = ns[t];
        gmm_band *Q = gmm_band_alloc(n, ls[t], 0, GMM_BAND_SYMMETRIC);
        const size_t rows[] = {0, 1, 31, 32, 33, 63, 64, 150, n - 1};
        for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
            size_t row = rows[k];
            if (row >= n)
                continue;
            tu_band_fill_spd(Q, &r);
            /* Rows before `row` keep their pivots; row's pivot is Q(row,row)
             * minus a sum of squares, so a negative diagonal fails there. */
            *gmm_band_ptr(Q, row, row) = -0.25;
            expect_notpd(Q, row);
            tu_band_fill_spd(Q, &r);
            *gmm_band_ptr(Q, row, row) = NAN;
            expect_notpd(Q, row);
            tu_band_fill_spd(Q, &r);
            *gmm_band_ptr(Q, row, row) = INFINITY;
            expect_notpd(Q, row);
            if (row > 0 && Q->kl > 0) { /* a NaN below the diagonal reaches row's pivot */
                tu_band_fill_spd(Q, &r);
                *gmm_band_ptr(Q, row, row - 1) = NAN;
                expect_notpd(Q, row);
            }
        }
        gmm_band_free(Q);
    }
}
END_TEST

/* A matrix that is positive semi-definite but singular: Q = B B^T for B
 * lower bidiagonal with a zero diagonal entry at row 4, so the pivot of row 4
 * is 0 (the leading 5 x 5 block is singular).  The diagonal entries before
 * row 4 are powers of two, so every pivot is computed exactly and the zero is
 * exact, not a rounding residue of either sign. */
START_TEST(test_notpd_singular)
{
    size_t n = 9;
    gmm_band *Q = gmm_band_alloc(n, 1, 0, GMM_BAND_SYMMETRIC);
    double b[9] = {1, 2, 1, 2, 0, 1, 2, 1, 1}, c[9] = {0, 1, -1, 2, 1, 1, -2, 1, 1};
    for (size_t i = 0; i < n; i++) {
        /* B(i,i) = b[i], B(i,i-1) = c[i]: (B B^T)(i,i) = b^2 + c^2, (i,i-1) = c_i b_{i-1} */
        *gmm_band_ptr(Q, i, i) = b[i] * b[i] + (i ? c[i] * c[i] : 0.0);
        if (i)
            *gmm_band_ptr(Q, i, i - 1) = c[i] * b[i - 1];
    }
    expect_notpd(Q, 4);
    gmm_band_free(Q);
}
END_TEST

START_TEST(test_decomp_out_of_memory)
{
    tu_rng r;
    tu_rng_seed(&r, 22);
    gmm_band *Q = gmm_band_alloc(200, 80, 0, GMM_BAND_SYMMETRIC);
    gmm_band *L = gmm_band_alloc(200, 80, 0, GMM_BAND_LOWER);
    gmm_band *Lbar = gmm_band_alloc(200, 80, 0, GMM_BAND_LOWER);
    tu_band_fill_spd(Q, &r);
    gmm_alloc_fail_after(0);
    ck_assert_int_eq(gmm_band_chol_decomp(Q, L), GMM_ENOMEM);
    gmm_alloc_fail_after(-1);
    ck_assert_int_eq(gmm_band_chol_decomp(Q, L), GMM_OK);
    gmm_alloc_fail_after(0);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, Lbar, Lbar), GMM_ENOMEM);
    gmm_alloc_fail_after(-1);
    gmm_band_free(Q);
    gmm_band_free(L);
    gmm_band_free(Lbar);
}
END_TEST

/* The _work variants on a caller's buffer of gmm_band_chol_work_size(l)
 * doubles: with every allocation failing they still succeed, and they give
 * the allocating calls' factor and adjoint to the bit (the same kernels on
 * the same panels), for both block widths (16 below l = 192, 32 from it),
 * in place and not, and across the blocked threshold.  An infinite pivot
 * is reported at the same row. */
START_TEST(test_work_variants_allocate_nothing)
{
    static const size_t ls[] = {30, 47, 48, 100, 191, 192, 250};
    tu_rng r;
    tu_rng_seed(&r, 23);
    ck_assert_uint_eq(gmm_band_chol_work_size(0), 0);
    ck_assert_uint_eq(gmm_band_chol_work_size(47), 0);
    ck_assert_uint_ge(gmm_band_chol_work_size(48), 48 * 16);
    for (size_t t = 0; t < sizeof ls / sizeof ls[0]; t++) {
        size_t n = 400, l = ls[t];
        size_t ws = gmm_band_chol_work_size(l);
        ck_assert_uint_le(ws, gmm_band_chol_work_size(l + 1)); /* a larger l's size serves */
        double *work = malloc((ws ? ws : 1) * sizeof *work);
        gmm_band *Q = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        gmm_band *L1 = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        gmm_band *L2 = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        gmm_band *Q2 = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        gmm_band *B1 = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        gmm_band *B2 = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        gmm_band *Qb = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        gmm_band *Qb2 = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        size_t sz = Q->ld * n * sizeof(double);
        tu_band_fill_spd(Q, &r);
        for (size_t i = 0; i < B1->ld * n; i++)
            B1->data[i] = tu_normal(&r);
        for (size_t i = 0; i < Qb->ld * n; i++)
            Qb->data[i] = Qb2->data[i] = tu_normal(&r);
        ck_assert_int_eq(gmm_band_copy(Q2, Q), GMM_OK);
        ck_assert_int_eq(gmm_band_chol_decomp(Q, L1), GMM_OK);
        gmm_alloc_fail_after(0);
        gmm_status s1 = gmm_band_chol_decomp_work(Q, L2, work);
        gmm_status s2 = gmm_band_chol_decomp_work(Q2, Q2, work); /* in place */
        gmm_alloc_fail_after(-1);
        ck_assert_int_eq(s1, GMM_OK);
        ck_assert_int_eq(s2, GMM_OK);
        ck_assert_int_eq(Q2->kind, GMM_BAND_LOWER);
        ck_assert_msg(memcmp(L1->data, L2->data, sz) == 0, "l = %zu: factor differs", l);
        ck_assert_msg(memcmp(L1->data, Q2->data, sz) == 0, "l = %zu: in place differs", l);

        /* reverse: into Qbar, and into Lbar's own storage */
        ck_assert_int_eq(gmm_band_copy(B2, B1), GMM_OK);
        gmm_band *B3 = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        gmm_band *B4 = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        ck_assert_int_eq(gmm_band_copy(B3, B1), GMM_OK);
        ck_assert_int_eq(gmm_band_copy(B4, B1), GMM_OK);
        ck_assert_int_eq(gmm_band_chol_decomp_rev(L1, B1, Qb), GMM_OK);
        ck_assert_int_eq(gmm_band_chol_decomp_rev(L1, B3, B3), GMM_OK);
        gmm_alloc_fail_after(0);
        s1 = gmm_band_chol_decomp_rev_work(L1, B2, Qb2, work);
        s2 = gmm_band_chol_decomp_rev_work(L1, B4, B4, work);
        gmm_alloc_fail_after(-1);
        ck_assert_int_eq(s1, GMM_OK);
        ck_assert_int_eq(s2, GMM_OK);
        ck_assert_msg(memcmp(Qb->data, Qb2->data, sz) == 0, "l = %zu: Qbar differs", l);
        ck_assert_msg(memcmp(B3->data, B4->data, sz) == 0, "l = %zu: aliased Qbar differs", l);

        /* not positive definite: the same row */
        *gmm_band_ptr(Q, n / 2, n / 2) = -1.0;
        ck_assert_int_eq(gmm_band_chol_decomp(Q, L1), GMM_ENOTPD);
        size_t row = gmm_error_index();
        gmm_alloc_fail_after(0);
        s1 = gmm_band_chol_decomp_work(Q, L2, work);
        gmm_alloc_fail_after(-1);
        ck_assert_int_eq(s1, GMM_ENOTPD);
        ck_assert_uint_eq(gmm_error_index(), row);
        gmm_band *bands[] = {Q, L1, L2, Q2, B1, B2, B3, B4, Qb, Qb2};
        for (size_t i = 0; i < sizeof bands / sizeof bands[0]; i++)
            gmm_band_free(bands[i]);
        free(work);
    }
}
END_TEST

/* ---- reverse mode ---------------------------------------------------------------- */

/* c(Q) = sum over the stored slots of W .* chol(Q). */
typedef struct {
    gmm_band *Q, *L, *W;
} fd_ctx;

static double c_of_q(void *vctx)
{
    fd_ctx *x = vctx;
    if (gmm_band_chol_decomp(x->Q, x->L) != GMM_OK)
        return NAN;
    double c = 0.0;
    for (size_t j = 0; j < x->L->n; j++)
        for (size_t i = j; i <= j + x->L->kl && i < x->L->n; i++)
            c += *gmm_band_ptr(x->W, i, j) * *gmm_band_ptr(x->L, i, j);
    return c;
}

/* FD step and error floor.  c is a sum of ~n l terms of size O(1) (logdet:
 * ~n log 20), so evaluating it rounds by ~1e-14 .. 1e-13; the fourth-order
 * difference with h = 3e-3 turns that into ~1e-10 and adds a truncation error
 * of order h^4.  Errors are relative to max(|analytic|, |fd|, 1e-3): entries
 * of the gradient below 1e-3 are checked to an absolute 1e-9 (the tolerance
 * FD_TOL is 1e-6 relative).  Measured: the largest error over the grids
 * below is 1.5e-7 (h = 1e-3 gave 5e-7: more rounding). */
#define FD_STEP 3e-3
#define FD_FLOOR 1e-3
#define FD_TOL 1e-6

/* Fourth-order FD check of the stored slots of P against Pbar (P's shape):
 * all of them when there are at most FD_SAMPLE, else FD_SAMPLE drawn at
 * random (a column, then a slot in it), so that the n = 57 grid and the
 * larger logdet cases keep the suite short (and valgrind runs bearable). */
#define FD_SAMPLE 300
static double fd_check_slots(gmm_band *P, const gmm_band *Pbar, tu_scalar_fn f, void *ctx,
                             tu_rng *r, size_t *wi, size_t *wj)
{
    size_t n = P->n, l = P->kl, count = 0;
    for (size_t j = 0; j < n; j++)
        count += (j + l < n ? l : n - 1 - j) + 1;
    double worst = 0.0;
    for (size_t k = 0; k < (count <= FD_SAMPLE ? count : FD_SAMPLE); k++) {
        size_t i, j;
        if (count <= FD_SAMPLE) { /* the k-th slot in column order */
            size_t rest = k;
            for (j = 0; rest > (j + l < n ? l : n - 1 - j); j++)
                rest -= (j + l < n ? l : n - 1 - j) + 1;
            i = j + rest;
        } else {
            j = (size_t)(tu_uniform(r) * (double)n);
            i = j + (size_t)(tu_uniform(r) * (double)((j + l < n ? l : n - 1 - j) + 1));
        }
        double e = tu_fd_check4(gmm_band_ptr(P, i, j), 1, gmm_band_ptr(Pbar, i, j), f, ctx,
                                FD_STEP, FD_FLOOR, NULL);
        if (!(e <= worst)) {
            worst = e;
            *wi = i;
            *wj = j;
        }
    }
    return worst;
}

/* Qbar by the reverse mode, accumulated onto a random Qbar0 (checks +=). */
static gmm_band *qbar_by_rev(const gmm_band *L, const gmm_band *W, int alias, tu_rng *r)
{
    size_t n = L->n, l = L->kl;
    gmm_band *Lbar = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    gmm_band_copy(Lbar, W);
    ck_assert_int_eq(gmm_band_set_kind(Lbar, GMM_BAND_LOWER), GMM_OK);
    if (alias) {
        ck_assert_int_eq(gmm_band_chol_decomp_rev(L, Lbar, Lbar), GMM_OK);
        ck_assert_int_eq(Lbar->kind, GMM_BAND_SYMMETRIC);
        return Lbar;
    }
    gmm_band *Qbar0 = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Qbar = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    tu_band_fill_random(Qbar0, r);
    gmm_band_copy(Qbar, Qbar0);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(L, Lbar, Qbar), GMM_OK);
    for (size_t k = 0; k < Qbar->ld * n; k++)
        Qbar->data[k] -= Qbar0->data[k];
    gmm_band_free(Qbar0);
    gmm_band_free(Lbar);
    return Qbar;
}

/* The stored entries of Q (all, or a sample) by central differences. */
static void rev_fd_all(size_t n, size_t l, int alias, tu_rng *r)
{
    fd_ctx x;
    x.Q = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
    x.L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    x.W = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
    tu_band_fill_spd(x.Q, r);
    tu_band_fill_random(x.W, r);
    ck_assert_int_eq(gmm_band_chol_decomp(x.Q, x.L), GMM_OK);
    gmm_band *Qbar = qbar_by_rev(x.L, x.W, alias, r);
    size_t wi = 0, wj = 0;
    double err = fd_check_slots(x.Q, Qbar, c_of_q, &x, r, &wi, &wj);
    ck_assert_msg(err <= FD_TOL, "n %zu l %zu alias %d: FD error %g at (%zu, %zu)", n, l, alias,
                  err, wi, wj);
    gmm_band_free(Qbar);
    gmm_band_free(x.Q);
    gmm_band_free(x.L);
    gmm_band_free(x.W);
}

START_TEST(test_rev_fd_small)
{
    tu_rng r;
    tu_rng_seed(&r, 31);
    for (size_t t = 0; t < sizeof small_n / sizeof *small_n; t++)
        for (size_t l = 0; l <= small_n[t] + 1; l++)
            rev_fd_all(small_n[t], l, (int)(l % 2), &r);
}
END_TEST

/* Directional check for the blocked sizes (a per-entry check would take
 * n l evaluations): for random symmetric directions V, the fourth-order
 * difference of t -> c(Q + tV) at 0 must equal sum over stored slots of
 * Qbar .* V. */
START_TEST(test_rev_fd_blocked_directional)
{
    tu_rng r;
    tu_rng_seed(&r, 32);
    for (size_t t = 0; t < sizeof big_l / sizeof *big_l; t++) {
        size_t n = big_n, l = big_l[t];
        fd_ctx x;
        x.Q = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        x.L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        x.W = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        gmm_band *Q0 = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        gmm_band *V = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        tu_band_fill_spd(Q0, &r);
        tu_band_fill_random(x.W, &r);
        gmm_band_copy(x.Q, Q0);
        ck_assert_int_eq(gmm_band_chol_decomp(x.Q, x.L), GMM_OK);
        gmm_band *Qbar = qbar_by_rev(x.L, x.W, (int)(t % 2), &r);
        for (int d = 0; d < 3; d++) {
            tu_band_fill_random(V, &r);
            double an = 0.0;
            for (size_t j = 0; j < n; j++)
                for (size_t i = j; i <= j + l && i < n; i++)
                    an += *gmm_band_ptr(Qbar, i, j) * *gmm_band_ptr(V, i, j);
            double h = FD_STEP, c[4];
            const double step[4] = {h, -h, 2 * h, -2 * h};
            for (int e = 0; e < 4; e++) {
                for (size_t k = 0; k < Q0->ld * n; k++)
                    x.Q->data[k] = Q0->data[k] + step[e] * V->data[k];
                c[e] = c_of_q(&x);
            }
            double fd = (8.0 * (c[0] - c[1]) - (c[2] - c[3])) / (12.0 * h);
            double err = fabs(an - fd) / fmax(fmax(fabs(an), fabs(fd)), FD_FLOOR);
            ck_assert_msg(err <= FD_TOL, "n %zu l %zu: directional %g vs fd %g (rel %g)", n, l,
                          an, fd, err);
        }
        gmm_band_free(Qbar);
        gmm_band_free(Q0);
        gmm_band_free(V);
        gmm_band_free(x.Q);
        gmm_band_free(x.L);
        gmm_band_free(x.W);
    }
}
END_TEST

/* The blocked and unblocked sweeps are two algorithms for one derivative:
 * a bandwidth-31 Q (unblocked) embedded in a bandwidth-130 band (blocked) has
 * the same factor, so the derivatives with respect to the common slots agree
 * (the wide band's other slots have nonzero derivatives of their own). */
START_TEST(test_rev_blocked_matches_unblocked)
{
    tu_rng r;
    tu_rng_seed(&r, 33);
    size_t n = 300, ln = 31, lw = 130;
    gmm_band *Qn = gmm_band_alloc(n, ln, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Qw = gmm_band_alloc(n, lw, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Ln = gmm_band_alloc(n, ln, 0, GMM_BAND_LOWER);
    gmm_band *Lw = gmm_band_alloc(n, lw, 0, GMM_BAND_LOWER);
    gmm_band *Wn = gmm_band_alloc(n, ln, 0, GMM_BAND_LOWER);
    gmm_band *Ww = gmm_band_alloc(n, lw, 0, GMM_BAND_LOWER);
    tu_band_fill_spd(Qn, &r);
    ck_assert_int_eq(gmm_band_copy_band(Qw, Qn), GMM_OK);
    tu_band_fill_random(Wn, &r);
    ck_assert_int_eq(gmm_band_copy_band(Ww, Wn), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_decomp(Qn, Ln), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_decomp(Qw, Lw), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(Ln, Wn, Wn), GMM_OK);
    ck_assert_int_eq(gmm_band_chol_decomp_rev(Lw, Ww, Ww), GMM_OK);
    double scale = 1.0, err = 0.0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i <= j + lw && i < n; i++)
            scale = fmax(scale, fabs(*gmm_band_ptr(Ww, i, j)));
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i <= j + ln && i < n; i++)
            err = fmax(err, fabs(*gmm_band_ptr(Ww, i, j) - *gmm_band_ptr(Wn, i, j)));
    /* The sweeps round differently; 16 n eps relative, as for the factor. */
    ck_assert_msg(err / scale <= 16.0 * n * DBL_EPSILON, "rel diff %g", err / scale);
    gmm_band_free(Qn);
    gmm_band_free(Qw);
    gmm_band_free(Ln);
    gmm_band_free(Lw);
    gmm_band_free(Wn);
    gmm_band_free(Ww);
}
END_TEST

/* Bandwidths 1 .. 16 run fixed-bandwidth copies of the unblocked loops
 * (band_chol.c, band_chol_rev.c: FIXED BANDWIDTHS), 17 on the generic ones.
 * A bandwidth-l Q embedded in a band of bandwidth l + 17 (generic) has the
 * same factor, and the derivatives with respect to the common slots agree:
 * every fixed copy against the generic loops, for even and odd n (the pair
 * loops end differently), at sizes with many interior pairs. */
START_TEST(test_fixed_bandwidths_match_generic)
{
    tu_rng r;
    tu_rng_seed(&r, 34);
    const size_t ns[] = {100, 101};
    for (size_t t = 0; t < 2; t++)
        for (size_t l = 1; l <= 17; l++) {
            size_t n = ns[t], lw = l + 17;
            gmm_band *Qn = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
            gmm_band *Qw = gmm_band_alloc(n, lw, 0, GMM_BAND_SYMMETRIC);
            gmm_band *Ln = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
            gmm_band *Lw = gmm_band_alloc(n, lw, 0, GMM_BAND_LOWER);
            gmm_band *Wn = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
            gmm_band *Ww = gmm_band_alloc(n, lw, 0, GMM_BAND_LOWER);
            tu_band_fill_spd(Qn, &r);
            ck_assert_int_eq(gmm_band_copy_band(Qw, Qn), GMM_OK);
            tu_band_fill_random(Wn, &r);
            ck_assert_int_eq(gmm_band_copy_band(Ww, Wn), GMM_OK);
            ck_assert_int_eq(gmm_band_chol_decomp(Qn, Ln), GMM_OK);
            ck_assert_int_eq(gmm_band_chol_decomp(Qw, Lw), GMM_OK);
            ck_assert_int_eq(gmm_band_chol_decomp_rev(Ln, Wn, Wn), GMM_OK);
            ck_assert_int_eq(gmm_band_chol_decomp_rev(Lw, Ww, Ww), GMM_OK);
            double lscale = 1.0, wscale = 1.0, lerr = 0.0, werr = 0.0;
            for (size_t j = 0; j < n; j++)
                for (size_t i = j; i <= j + lw && i < n; i++) {
                    lscale = fmax(lscale, fabs(*gmm_band_ptr(Lw, i, j)));
                    wscale = fmax(wscale, fabs(*gmm_band_ptr(Ww, i, j)));
                    if (i > j + l) /* the factor does not fill beyond l */
                        lerr = fmax(lerr, fabs(*gmm_band_ptr(Lw, i, j)));
                }
            for (size_t j = 0; j < n; j++)
                for (size_t i = j; i <= j + l && i < n; i++) {
                    lerr = fmax(lerr, fabs(*gmm_band_ptr(Lw, i, j) - *gmm_band_ptr(Ln, i, j)));
                    werr = fmax(werr, fabs(*gmm_band_ptr(Ww, i, j) - *gmm_band_ptr(Wn, i, j)));
                }
            /* as in test_rev_blocked_matches_unblocked */
            ck_assert_msg(lerr / lscale <= 16.0 * n * DBL_EPSILON, "n %zu l %zu: L rel diff %g",
                          n, l, lerr / lscale);
            ck_assert_msg(werr / wscale <= 16.0 * n * DBL_EPSILON,
                          "n %zu l %zu: Qbar rel diff %g", n, l, werr / wscale);
            gmm_band_free(Qn);
            gmm_band_free(Qw);
            gmm_band_free(Ln);
            gmm_band_free(Lw);
            gmm_band_free(Wn);
            gmm_band_free(Ww);
        }
}
END_TEST

/* A failing pivot inside the fixed-bandwidth loops (both columns of a pair,
 * away from the ends) is reported at its row. */
START_TEST(test_fixed_bandwidths_notpd)
{
    tu_rng r;
    tu_rng_seed(&r, 35);
    for (size_t l = 1; l <= 16; l++) {
        size_t n = 80;
        gmm_band *Q = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        for (size_t row = 40; row <= 41; row++) {
            tu_band_fill_spd(Q, &r);
            *gmm_band_ptr(Q, row, row) = -0.25;
            expect_notpd(Q, row);
            tu_band_fill_spd(Q, &r);
            *gmm_band_ptr(Q, row, row - 1) = NAN;
            expect_notpd(Q, row);
        }
        gmm_band_free(Q);
    }
}
END_TEST

/* ---- log-determinant --------------------------------------------------------------- */

static double logdet_of_q(void *vctx)
{
    fd_ctx *x = vctx;
    if (gmm_band_chol_decomp(x->Q, x->L) != GMM_OK)
        return NAN;
    return gmm_band_chol_logdet(x->L);
}

/* logdet against GSL; its gradient by the chain logdet_rev -> chol_rev against
 * central differences and against the closed form: d logdet Q / dQ = Q^{-1},
 * i.e. Qbar(i,j) = 2 Q^{-1}(i,j) off the diagonal, Q^{-1}(i,i) on it. */
START_TEST(test_logdet_and_rev)
{
    tu_rng r;
    tu_rng_seed(&r, 41);
    const size_t ns[] = {1, 2, 10, 57, 57, 120};
    const size_t ls[] = {0, 1, 4, 13, 45, 70};
    for (size_t t = 0; t < sizeof ns / sizeof *ns; t++) {
        size_t n = ns[t], l = ls[t];
        fd_ctx x;
        x.Q = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        x.L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        x.W = NULL;
        gmm_band *Lbar = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
        gmm_band *Qbar = gmm_band_alloc(n, l, 0, GMM_BAND_SYMMETRIC);
        tu_band_fill_spd(x.Q, &r);
        ck_assert_int_eq(gmm_band_chol_decomp(x.Q, x.L), GMM_OK);

        double *D = gsl_dense_chol(x.Q), want = 0.0;
        for (size_t i = 0; i < n; i++)
            want += 2.0 * log(D[i * n + i]);
        double got = gmm_band_chol_logdet(x.L);
        ck_assert_msg(fabs(got - want) <= C_TOL * n * DBL_EPSILON * fmax(1.0, fabs(want)),
                      "logdet %.17g vs %.17g", got, want);

        ck_assert_int_eq(gmm_band_chol_logdet_rev(x.L, 0.75, Lbar), GMM_OK);
        ck_assert_int_eq(gmm_band_chol_decomp_rev(x.L, Lbar, Qbar), GMM_OK);

        /* Closed form, from GSL's dense inverse (scaled by cbar = 0.75). */
        gsl_matrix *m = gsl_matrix_alloc(n, n);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                gsl_matrix_set(m, i, j, gmm_band_get(x.Q, i, j));
        gsl_linalg_cholesky_decomp1(m);
        gsl_linalg_cholesky_invert(m);
        double err = 0.0;
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i <= j + x.Q->kl && i < n; i++) {
                double cf = 0.75 * (i == j ? 1.0 : 2.0) * gsl_matrix_get(m, i, j);
                err = fmax(err, fabs(*gmm_band_ptr(Qbar, i, j) - cf));
            }
        ck_assert_msg(err <= 1e-12, "n %zu l %zu: Qbar vs 0.75 (2 - I) Q^-1: %g", n, l, err);
        gsl_matrix_free(m);

        /* Central differences of 0.75 logdet. */
        for (size_t k = 0; k < Qbar->ld * n; k++)
            Qbar->data[k] /= 0.75;
        size_t wi = 0, wj = 0;
        double fe = fd_check_slots(x.Q, Qbar, logdet_of_q, &x, &r, &wi, &wj);
        ck_assert_msg(fe <= FD_TOL, "n %zu l %zu: logdet FD error %g", n, l, fe);
        free(D);
        gmm_band_free(x.Q);
        gmm_band_free(x.L);
        gmm_band_free(Lbar);
        gmm_band_free(Qbar);
    }
}
END_TEST

/* logdet_rev alone: Lbar(i,i) += 2 cbar / L(i,i), accumulated. */
START_TEST(test_logdet_rev_accumulates)
{
    gmm_band *L = gmm_band_alloc(3, 1, 0, GMM_BAND_LOWER);
    gmm_band *Lbar = gmm_band_alloc(3, 1, 0, GMM_BAND_LOWER);
    double d[3] = {2.0, 0.5, 4.0};
    for (size_t i = 0; i < 3; i++) {
        *gmm_band_ptr(L, i, i) = d[i];
        *gmm_band_ptr(Lbar, i, i) = 1.0;
    }
    *gmm_band_ptr(L, 1, 0) = 7.0;
    *gmm_band_ptr(Lbar, 1, 0) = 3.0;
    ck_assert_double_eq_tol(gmm_band_chol_logdet(L), 2.0 * log(4.0), 1e-15);
    ck_assert_int_eq(gmm_band_chol_logdet_rev(L, 1.5, Lbar), GMM_OK);
    for (size_t i = 0; i < 3; i++)
        ck_assert_double_eq_tol(*gmm_band_ptr(Lbar, i, i), 1.0 + 3.0 / d[i], 1e-15);
    ck_assert(*gmm_band_ptr(Lbar, 1, 0) == 3.0);
    gmm_band_free(L);
    gmm_band_free(Lbar);
}
END_TEST

Suite *band_chol_suite(void)
{
    gsl_set_error_handler_off();
    Suite *s = suite_create("band_chol");
    TCase *tc = tcase_create("decomp");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_decomp_vs_gsl_small);
    tcase_add_test(tc, test_decomp_vs_gsl_blocked);
    tcase_add_test(tc, test_decomp_in_place);
    tcase_add_test(tc, test_decomp_n0);
    tcase_add_test(tc, test_decomp_shape_errors);
    tcase_add_test(tc, test_notpd_reports_row);
    tcase_add_test(tc, test_notpd_singular);
    tcase_add_test(tc, test_decomp_out_of_memory);
    tcase_add_test(tc, test_work_variants_allocate_nothing);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("rev");
    tcase_set_timeout(tr, 300);
    tcase_add_test(tr, test_rev_fd_small);
    tcase_add_test(tr, test_rev_fd_blocked_directional);
    tcase_add_test(tr, test_rev_blocked_matches_unblocked);
    tcase_add_test(tr, test_fixed_bandwidths_match_generic);
    tcase_add_test(tr, test_fixed_bandwidths_notpd);
    tcase_add_test(tr, test_logdet_and_rev);
    tcase_add_test(tr, test_logdet_rev_accumulates);
    suite_add_tcase(s, tr);
    return s;
}
