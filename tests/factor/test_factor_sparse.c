/* test_factor_sparse.c -- the sparse factor (factor.h, CHOLMOD) against
 * dense computations and against the band factor, on grid, crossed and
 * random SPD patterns of n = 25 .. 300 (tu_sparse_spd.h).
 *
 * The factor's L = P^T L_c is a permuted triangle, not the dense Cholesky
 * of Q, so it is checked through what it must satisfy: the dense L it
 * reveals (row i = L^T e_i, from mul_lt) gives L L^T = Q; L (solve_l b) =
 * b, L^T (solve_lt b) = b; solve agrees with GSL's dense Cholesky solve;
 * log|Q| with GSL's; the selected inverse with the dense inverse and with
 * the band factor's.  Tolerances: c n eps relative to the largest entry,
 * c = 64 for products and solves of these well-conditioned matrices
 * (condition <= ~100, tu_sparse_spd.h); the inverses compared at 1e-10
 * relative (the bar for band vs sparse; both are backward stable,
 * so the difference is ~ cond * n * eps ~ 1e-12). */
#include <check.h>
#include <float.h>
#include <gsl/gsl_linalg.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/factor.h"
#include "gmm/sparse.h"
#include "support/testutil.h"
#include "tu_sparse_spd.h"
#include "../../src/factor/factor_sparse_impl.h"

static const struct {
    int kind;
    size_t k;
} cases[] = {
    {TU_GRID, 5}, {TU_GRID, 17}, {TU_CROSSED, 40}, {TU_CROSSED, 200}, {TU_RANDOM, 30},
    {TU_RANDOM, 150}, {TU_RANDOM, 260},
};
#define NCASES (sizeof cases / sizeof cases[0])

static double max_abs(const double *a, size_t m)
{
    double s = 0.0;
    for (size_t i = 0; i < m; i++)
        s = fmax(s, fabs(a[i]));
    return s;
}

/* Dense Cholesky factor (lower, in place) and inverse of D by GSL. */
static void dense_chol_inv(const double *D, size_t n, double *C, double *Inv, double *logdet)
{
    memcpy(C, D, n * n * sizeof *C);
    gsl_matrix_view Cv = gsl_matrix_view_array(C, n, n);
    ck_assert_int_eq(gsl_linalg_cholesky_decomp1(&Cv.matrix), 0);
    *logdet = 0.0;
    for (size_t i = 0; i < n; i++)
        *logdet += 2.0 * log(C[i * n + i]);
    memcpy(Inv, C, n * n * sizeof *C);
    gsl_matrix_view Iv = gsl_matrix_view_array(Inv, n, n);
    ck_assert_int_eq(gsl_linalg_cholesky_invert(&Iv.matrix), 0);
}

/* Q's dense copy into a band of bandwidth kl (natural order). */
static gmm_band *band_of(const gmm_sparse *A, size_t kl)
{
    gmm_band *B = gmm_band_alloc(A->n, kl, 0, GMM_BAND_SYMMETRIC);
    gmm_band_set_zero(B);
    for (size_t j = 0; j < A->n; j++)
        for (size_t p = A->colptr[j]; p < A->colptr[j + 1]; p++)
            *gmm_band_ptr(B, A->rowind[p], j) = A->val[p];
    return B;
}

/* The factor's L revealed densely (column-major), row i = L^T e_i. */
static void reveal_l(const gmm_factor *f, size_t n, double *L)
{
    double *e = calloc(n, sizeof *e), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) {
        e[i] = 1.0;
        ck_assert_int_eq(gmm_factor_mul_lt(f, e, y), GMM_OK);
        for (size_t j = 0; j < n; j++)
            L[i + n * j] = y[j];
        e[i] = 0.0;
    }
    free(e);
    free(y);
}

/* Everything the factor promises, for one matrix and its current values. */
static void check_factor(const gmm_factor *f, const tu_spd *m, tu_rng *r)
{
    size_t n = m->n;
    double tol = 64.0 * (double)n * DBL_EPSILON;
    double *C = malloc(n * n * sizeof *C), *Inv = malloc(n * n * sizeof *Inv);
    double *L = malloc(n * n * sizeof *L), *b = malloc(n * sizeof *b), *x = malloc(n * sizeof *x);
    double *y = malloc(n * sizeof *y), ld;
    dense_chol_inv(m->D, n, C, Inv, &ld);

    ck_assert_double_le(fabs(gmm_factor_logdet(f) - ld), tol * fmax(1.0, fabs(ld)));

    /* L L^T = Q */
    reveal_l(f, n, L);
    double qmax = max_abs(m->D, n * n), err = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double t = 0.0;
            for (size_t k = 0; k < n; k++)
                t += L[i + n * k] * L[j + n * k];
            err = fmax(err, fabs(t - m->D[i + n * j]));
        }
    ck_assert_msg(err <= tol * qmax, "%s n %zu: |L L^T - Q| = %g", m->what, n, err);

    /* L (L^-1 b) = b, L^T (L^-T b) = b */
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < n; i++)
            b[i] = x[i] = tu_normal(r);
        ck_assert_int_eq(t ? gmm_factor_solve_lt(f, x) : gmm_factor_solve_l(f, x), GMM_OK);
        double e = 0.0, s = fmax(1.0, max_abs(x, n));
        for (size_t i = 0; i < n; i++) {
            double v = 0.0;
            for (size_t k = 0; k < n; k++)
                v += (t ? L[k + n * i] : L[i + n * k]) * x[k];
            e = fmax(e, fabs(v - b[i]));
        }
        ck_assert_msg(e <= tol * s * max_abs(L, n * n), "%s: solve %d residual %g", m->what, t,
                      e);
    }

    /* Q^-1 b against GSL's dense solve */
    for (size_t i = 0; i < n; i++)
        b[i] = x[i] = tu_normal(r);
    ck_assert_int_eq(gmm_factor_solve(f, x), GMM_OK);
    gsl_matrix_view Cv = gsl_matrix_view_array(C, n, n);
    gsl_vector_view bv = gsl_vector_view_array(b, n), yv = gsl_vector_view_array(y, n);
    ck_assert_int_eq(gsl_linalg_cholesky_solve(&Cv.matrix, &bv.vector, &yv.vector), 0);
    ck_assert_double_le(tu_max_rel_diff(x, y, n), 1e-12);

    /* three columns solved at once, each against GSL's dense solve */
    double *X = malloc(3 * n * sizeof *X), *B = malloc(3 * n * sizeof *B);
    for (size_t i = 0; i < 3 * n; i++)
        B[i] = X[i] = tu_normal(r);
    ck_assert_int_eq(gmm_factor_solve_many(f, X, 3), GMM_OK);
    for (size_t c = 0; c < 3; c++) {
        gsl_vector_view Bv = gsl_vector_view_array(B + c * n, n);
        ck_assert_int_eq(gsl_linalg_cholesky_solve(&Cv.matrix, &Bv.vector, &yv.vector), 0);
        ck_assert_double_le(tu_max_rel_diff(X + c * n, y, n), 1e-12);
    }
    free(X);
    free(B);

    /* the selected inverse on Q's pattern against the dense inverse */
    gmm_sparse *S = gmm_sparse_alloc_like(m->A);
    ck_assert_int_eq(gmm_factor_selinv_sparse(f, S), GMM_OK);
    double imax = max_abs(Inv, n * n), e = 0.0;
    for (size_t j = 0; j < n; j++)
        for (size_t p = S->colptr[j]; p < S->colptr[j + 1]; p++)
            e = fmax(e, fabs(S->val[p] - Inv[S->rowind[p] + n * j]));
    ck_assert_msg(e <= 1e-10 * imax, "%s n %zu: selinv vs dense %g", m->what, n, e);
    gmm_sparse_free(S);
    free(C);
    free(Inv);
    free(L);
    free(b);
    free(x);
    free(y);
}

START_TEST(test_sparse_factor_vs_dense)
{
    tu_rng r;
    tu_rng_seed(&r, 3101);
    for (size_t c = 0; c < NCASES; c++) {
        tu_spd m = tu_spd_make(cases[c].kind, cases[c].k, &r);
        gmm_factor *f = gmm_factor_sparse_alloc(m.A);
        ck_assert_ptr_nonnull(f);
        ck_assert_str_eq(gmm_factor_name(f), "sparse");
        ck_assert_uint_eq(gmm_factor_dim(f), m.n);
        const char *ord = gmm_factor_ordering(f);
        ck_assert(!strcmp(ord, "AMD") || !strcmp(ord, "METIS") || !strcmp(ord, "NESDIS"));
        double fl, by;
        gmm_factor_cost(f, &fl, &by);
        ck_assert(fl >= (double)m.n && by >= 8.0 * (double)m.A->nnz);
        ck_assert_int_eq(gmm_factor_decomp_sparse(f, m.A), GMM_OK);
        check_factor(f, &m, &r);

        /* new values, the same analysis */
        tu_spd_values(&m, &r);
        ck_assert_int_eq(gmm_factor_decomp_sparse(f, m.A), GMM_OK);
        check_factor(f, &m, &r);
        double fl2, by2;
        gmm_factor_cost(f, &fl2, &by2);
        ck_assert(fl2 == fl && by2 == by);
        ck_assert_str_eq(gmm_factor_ordering(f), ord);
        gmm_factor_free(f);
        tu_spd_free(&m);
    }
}
END_TEST

/* The band factor's selected inverse on a sparse pattern, and the sparse
 * factor's, agree (the band of each matrix in its natural order). */
START_TEST(test_sparse_factor_vs_band)
{
    tu_rng r;
    tu_rng_seed(&r, 3102);
    for (size_t c = 0; c < NCASES; c++) {
        tu_spd m = tu_spd_make(cases[c].kind, cases[c].k, &r);
        size_t n = m.n, kl = tu_spd_bandwidth(m.A);
        gmm_factor *fs = gmm_factor_sparse_alloc(m.A), *fb = gmm_factor_band_alloc(n, kl);
        gmm_band *Q = band_of(m.A, kl);
        ck_assert_int_eq(gmm_factor_decomp_sparse(fs, m.A), GMM_OK);
        ck_assert_int_eq(gmm_factor_decomp(fb, Q), GMM_OK);
        ck_assert_str_eq(gmm_factor_ordering(fb), "RCM band");
        double lb = gmm_factor_logdet(fb), ls = gmm_factor_logdet(fs);
        ck_assert_double_le(fabs(lb - ls), 1e-10 * fmax(1.0, fabs(lb)));
        gmm_sparse *Sb = gmm_sparse_alloc_like(m.A), *Ss = gmm_sparse_alloc_like(m.A);
        ck_assert_int_eq(gmm_factor_selinv_sparse(fb, Sb), GMM_OK);
        ck_assert_int_eq(gmm_factor_selinv_sparse(fs, Ss), GMM_OK);
        double e = 0.0, s = max_abs(Sb->val, Sb->nnz);
        for (size_t p = 0; p < Sb->nnz; p++)
            e = fmax(e, fabs(Sb->val[p] - Ss->val[p]));
        ck_assert_msg(e <= 1e-10 * s, "%s n %zu: band vs sparse selinv %g", m.what, n, e);
        /* the band's cost formula: sum_j min(kl + 1, n - j)^2 */
        double fl = 0.0, by, want = 0.0, nz = 0.0;
        for (size_t j = 0; j < n; j++) {
            double cj = (double)(kl + 1 < n - j ? kl + 1 : n - j);
            want += cj * cj;
            nz += cj;
        }
        ck_assert_double_eq(gmm_factor_nnz(fb), nz);
        ck_assert(gmm_factor_nnz(fs) >= (double)m.A->nnz);
        gmm_factor_cost(fb, &fl, &by);
        ck_assert_double_le(fabs(fl - want), 1e-12 * want);
        ck_assert_double_eq(by, (double)(n * (kl + 1)) * 8.0);
        gmm_factor_cost(fs, &fl, NULL); /* either output may be NULL */
        gmm_factor_cost(fs, NULL, &by);
        gmm_sparse_free(Sb);
        gmm_sparse_free(Ss);
        gmm_band_free(Q);
        gmm_factor_free(fs);
        gmm_factor_free(fb);
        tu_spd_free(&m);
    }
}
END_TEST

/* Not positive definite: the failing row in the original order.  With
 * Q(i0, i0) made negative, every leading block of P Q P^T before i0's
 * position is a principal submatrix of the SPD Q (PD), and i0's pivot is at
 * most Q(i0, i0) < 0: the factorisation fails exactly there. */
START_TEST(test_sparse_factor_notpd)
{
    tu_rng r;
    tu_rng_seed(&r, 3103);
    for (size_t c = 0; c < NCASES; c++) {
        tu_spd m = tu_spd_make(cases[c].kind, cases[c].k, &r);
        gmm_factor *f = gmm_factor_sparse_alloc(m.A);
        size_t i0 = (7 * m.n) / 11;
        double keep = m.A->val[m.A->colptr[i0]];
        m.A->val[m.A->colptr[i0]] = -1.0;
        ck_assert_int_eq(gmm_factor_decomp_sparse(f, m.A), GMM_ENOTPD);
        ck_assert_uint_eq(gmm_error_index(), i0);
        m.A->val[m.A->colptr[i0]] = NAN; /* the same argument: a NaN pivot is no pivot */
        ck_assert_int_eq(gmm_factor_decomp_sparse(f, m.A), GMM_ENOTPD);
        ck_assert_uint_eq(gmm_error_index(), i0);
        double x[4] = {0};
        ck_assert_int_eq(gmm_factor_solve(f, x), GMM_EINVAL); /* no factor */
        /* the analysis survives the failure */
        m.A->val[m.A->colptr[i0]] = keep;
        ck_assert_int_eq(gmm_factor_decomp_sparse(f, m.A), GMM_OK);
        check_factor(f, &m, &r);
        gmm_factor_free(f);
        tu_spd_free(&m);
    }
}
END_TEST

/* A path: AMD finds the no-fill ordering (lnz = 2n - 1 is the least any
 * ordering gives) and CHOLMOD keeps it simplicial (2.5 flops per entry of
 * L), so L's pattern is the path's edges and (n-1, 0) lies outside it. */
START_TEST(test_sparse_factor_errors)
{
    size_t n = 30, ei[29], ej[29];
    for (size_t i = 0; i + 1 < n; i++) {
        ei[i] = i + 1;
        ej[i] = i;
    }
    gmm_sparse *A = NULL, *W = NULL, *S = NULL;
    ck_assert_int_eq(gmm_sparse_from_entries(n, n - 1, ei, ej, &A), GMM_OK);
    for (size_t j = 0; j < n; j++) {
        A->val[A->colptr[j]] = 3.0;
        if (A->colptr[j + 1] - A->colptr[j] > 1)
            A->val[A->colptr[j] + 1] = -1.0;
    }
    gmm_factor *f = gmm_factor_sparse_alloc(A);
    ck_assert_ptr_nonnull(f);
    double x[30] = {0}, by;
    ck_assert_int_eq(gmm_factor_solve(f, x), GMM_EINVAL); /* no factor yet */
    ck_assert(isnan(gmm_factor_logdet(f)));
    gmm_factor_cost(f, NULL, &by);
    ck_assert_double_eq(by, 16.0 * (double)(2 * n - 1));
    ck_assert_double_eq(gmm_factor_nnz(f), (double)(2 * n - 1));
    ck_assert_int_eq(gmm_factor_decomp_sparse(f, A), GMM_OK);

    /* a NaN is no factor (not positive definite at its row) */
    A->val[A->colptr[11]] = NAN;
    ck_assert_int_eq(gmm_factor_decomp_sparse(f, A), GMM_ENOTPD);
    ck_assert_uint_eq(gmm_error_index(), 11);
    A->val[A->colptr[11]] = 3.0;
    ck_assert_int_eq(gmm_factor_decomp_sparse(f, A), GMM_OK);

    /* another pattern: one more entry */
    ei[0] = n - 1;
    ej[0] = 0;
    ck_assert_int_eq(gmm_sparse_from_entries(n, n - 1, ei, ej, &W), GMM_OK);
    ck_assert_int_eq(gmm_factor_decomp_sparse(f, W), GMM_EDIM);
    ck_assert_int_eq(gmm_factor_solve(f, x), GMM_EINVAL); /* the failed one is no factor */
    ck_assert_int_eq(gmm_factor_decomp_sparse(f, A), GMM_OK);
    /* W has (n-1, 0): outside L's pattern */
    ck_assert_int_eq(gmm_factor_selinv_sparse(f, W), GMM_EDIM);

    /* band operations on the sparse factor, sparse ones on the band */
    gmm_band *Q = gmm_band_alloc(n, 1, 0, GMM_BAND_SYMMETRIC);
    gmm_band_set_zero(Q);
    for (size_t j = 0; j < n; j++)
        *gmm_band_ptr(Q, j, j) = 3.0;
    ck_assert_int_eq(gmm_factor_decomp(f, Q), GMM_EINVAL);
    ck_assert_int_eq(gmm_factor_decomp_sparse(f, A), GMM_OK);
    ck_assert_ptr_null(gmm_factor_band_chol(f));
    ck_assert_int_eq(gmm_factor_selinv(f, Q), GMM_EINVAL);
    gmm_factor *fb = gmm_factor_band_alloc(n, 1);
    ck_assert_int_eq(gmm_factor_decomp_sparse(fb, A), GMM_EINVAL);
    ck_assert_int_eq(gmm_factor_decomp(fb, Q), GMM_OK);
    ck_assert_int_eq(gmm_factor_selinv_sparse(fb, W), GMM_EDIM); /* outside the band */
    S = gmm_sparse_alloc_like(A);
    ck_assert_int_eq(gmm_factor_selinv_sparse(fb, S), GMM_OK);
    for (size_t j = 0; j < n; j++)
        ck_assert_double_le(fabs(S->val[S->colptr[j]] - 1.0 / 3.0), 1e-15);

    /* a malformed pattern: a column without its diagonal */
    A->rowind[A->colptr[1]] = 2;
    ck_assert_ptr_null(gmm_factor_sparse_alloc(A));
    ck_assert_int_eq(gmm_error_status(), GMM_EINVAL);
    ck_assert_ptr_null(gmm_factor_sparse_alloc(NULL));

    gmm_factor_free(f);
    gmm_factor_free(fb);
    gmm_band_free(Q);
    gmm_sparse_free(A);
    gmm_sparse_free(W);
    gmm_sparse_free(S);
}
END_TEST

/* Out of memory at every allocation of the library's own (CHOLMOD's go
 * through its allocator): each failure is a clean GMM_ENOMEM, and a run
 * that gets all its memory succeeds (valgrind: nothing leaks). */
START_TEST(test_sparse_factor_oom)
{
    tu_rng r;
    tu_rng_seed(&r, 3104);
    tu_spd m = tu_spd_make(TU_RANDOM, 260, &r); /* supernodal: every workspace */
    int done = 0;
    for (long k = 0; k < 100 && !done; k++) {
        gmm_alloc_fail_after(k);
        gmm_factor *f = gmm_factor_sparse_alloc(m.A);
        gmm_sparse *S = gmm_sparse_alloc_like(m.A), *Qbar = gmm_sparse_alloc_like(m.A);
        gmm_status st = f && S && Qbar ? GMM_OK : GMM_ENOMEM;
        if (!st)
            st = gmm_factor_decomp_sparse(f, m.A);
        if (!st)
            st = gmm_factor_selinv_sparse(f, S);
        if (!st)
            st = gmm_factor_selinv_sparse_rev(f, S, S, Qbar);
        gmm_alloc_fail_after(-1);
        if (st)
            ck_assert_int_eq(st, GMM_ENOMEM);
        done = st == GMM_OK;
        gmm_factor_free(f);
        gmm_sparse_free(S);
        gmm_sparse_free(Qbar);
    }
    ck_assert(done);
    size_t ei[2] = {0, 1}, ej[2] = {1, 2};
    for (long k = 0; k < 8; k++) {
        gmm_sparse *A = NULL;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_sparse_from_entries(3, 2, ei, ej, &A);
        gmm_alloc_fail_after(-1);
        ck_assert(st == GMM_OK || (st == GMM_ENOMEM && !A));
        gmm_sparse_free(A);
    }
    tu_spd_free(&m);
}
END_TEST

/* A second analysis of a pattern copies the first one's (ordering and symbolic factor)
 * (factor_sparse.c, ANALYSIS MEMO): the same ordering, nonzeros and flops,
 * and a factor that still reproduces Q -- also after another pattern was
 * analysed in between, which replaces the kept one. */
START_TEST(test_sparse_ordering_memo)
{
    tu_rng r;
    tu_rng_seed(&r, 3105);
    tu_spd a = tu_spd_make(TU_GRID, 17, &r), b = tu_spd_make(TU_RANDOM, 150, &r);
    gmm_factor *f1 = gmm_factor_sparse_alloc(a.A), *f2 = gmm_factor_sparse_alloc(a.A);
    gmm_factor *g = gmm_factor_sparse_alloc(b.A), *f3 = gmm_factor_sparse_alloc(a.A);
    ck_assert(f1 && f2 && g && f3);
    size_t n = a.A->n;
    double fl1, by1, fl2, by2;
    gmm_factor_cost(f1, &fl1, &by1);
    gmm_factor_cost(f2, &fl2, &by2);
    ck_assert_str_eq(gmm_factor_ordering(f2), gmm_factor_ordering(f1));
    ck_assert_double_eq(gmm_factor_nnz(f2), gmm_factor_nnz(f1));
    ck_assert_double_eq(fl2, fl1);
    ck_assert_double_eq(gmm_factor_nnz(f3), gmm_factor_nnz(f1));
    double *e = calloc(n, sizeof *e), *v1 = calloc(n, sizeof *v1), *v2 = calloc(n, sizeof *v2);
    ck_assert(e && v1 && v2);
    ck_assert_int_eq(gmm_factor_decomp_sparse(f1, a.A), GMM_OK);
    /* f2 took f1's permutation, f3 found it again: L^T e_i agree entry for
     * entry (a permuted factor is another triangle) */
    gmm_factor *other[2] = {f2, f3};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(gmm_factor_decomp_sparse(other[k], a.A), GMM_OK);
        for (size_t i = 0; i < n; i++) {
            memset(e, 0, n * sizeof *e);
            e[i] = 1.0;
            ck_assert_int_eq(gmm_factor_mul_lt(f1, e, v1), GMM_OK);
            ck_assert_int_eq(gmm_factor_mul_lt(other[k], e, v2), GMM_OK);
            for (size_t j = 0; j < n; j++)
                ck_assert_double_eq_tol(v1[j], v2[j], 64 * DBL_EPSILON * (1.0 + fabs(v1[j])));
        }
        ck_assert_double_eq_tol(gmm_factor_logdet(other[k]), gmm_factor_logdet(f1),
                                64 * n * DBL_EPSILON * fabs(gmm_factor_logdet(f1)));
    }
    free(e);
    free(v1);
    free(v2);
    gmm_factor_free(f1);
    gmm_factor_free(f2);
    gmm_factor_free(f3);
    gmm_factor_free(g);
    tu_spd_free(&a);
    tu_spd_free(&b);
}
END_TEST

/* CHOLMOD's parallel regions inside a serial section run on the calling
 * thread without a team (factor_sparse_serial.c): the body runs once, at
 * OpenMP level 0, and a worksharing loop there sees one thread.  Outside,
 * the region is libgomp's: a team at level 1.  Fails if the program's
 * definition of GOMP_parallel is not the one bound. */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);

typedef struct {
    int runs, level, nthreads, same_thread;
    pthread_t caller;
    pthread_mutex_t lock;
} region_probe;

static void region_body(void *data)
{
    region_probe *p = data;
    pthread_mutex_lock(&p->lock);
    p->runs++;
    p->level = omp_get_level();
    p->nthreads = omp_get_num_threads();
    p->same_thread = pthread_equal(pthread_self(), p->caller);
    pthread_mutex_unlock(&p->lock);
}

START_TEST(test_sparse_serial_regions)
{
    region_probe p = {0, -1, 0, 0, pthread_self(), PTHREAD_MUTEX_INITIALIZER};
    gmm_factor_impl_sparse_serial_begin();
    gmm_factor_impl_sparse_serial_begin(); /* nested sections count */
    gmm_factor_impl_sparse_serial_end();
    GOMP_parallel(region_body, &p, 4, 0);
    gmm_factor_impl_sparse_serial_end();
    ck_assert_int_eq(p.runs, 1);
    ck_assert_int_eq(p.level, 0);
    ck_assert_int_eq(p.nthreads, 1);
    ck_assert(p.same_thread);

    region_probe q = {0, -1, 0, 0, pthread_self(), PTHREAD_MUTEX_INITIALIZER};
    GOMP_parallel(region_body, &q, 2, 0);
    ck_assert_int_ge(q.runs, 1); /* OMP_THREAD_LIMIT or OMP_DYNAMIC may give fewer than 2 */
    ck_assert_int_le(q.runs, 2);
    ck_assert_int_eq(q.level, 1);
    ck_assert_int_eq(q.nthreads, q.runs);
}
END_TEST

/* A serial section inside an enclosing team (a program calling the
 * library from its own parallel region): the inner region must be a team
 * of one of its own (level 2, one thread), not the body run in the outer
 * team's thread, which would see the outer team's size and take only its
 * share of a worksharing loop. */
static void outer_body(void *data)
{
    region_probe *p = data;
    region_probe in = {0, -1, 0, 0, pthread_self(), PTHREAD_MUTEX_INITIALIZER};
    gmm_factor_impl_sparse_serial_begin();
    GOMP_parallel(region_body, &in, 4, 0);
    gmm_factor_impl_sparse_serial_end();
    pthread_mutex_lock(&p->lock);
    p->runs++;
    if (in.runs != 1 || in.nthreads != 1 || in.level != 2)
        p->same_thread = 0; /* a failure, reported below */
    pthread_mutex_unlock(&p->lock);
}

START_TEST(test_sparse_serial_nested)
{
    region_probe outer = {0, -1, 0, 1, pthread_self(), PTHREAD_MUTEX_INITIALIZER};
    GOMP_parallel(outer_body, &outer, 2, 0);
    ck_assert_int_ge(outer.runs, 1);
    ck_assert_msg(outer.same_thread, "a serial section's region inside a team took the "
                                     "team's threads");
}
END_TEST

Suite *factor_sparse_suite(void)
{
    Suite *s = suite_create("factor_sparse");
    TCase *tc = tcase_create("cholmod");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sparse_factor_vs_dense);
    tcase_add_test(tc, test_sparse_factor_vs_band);
    tcase_add_test(tc, test_sparse_factor_notpd);
    tcase_add_test(tc, test_sparse_factor_errors);
    tcase_add_test(tc, test_sparse_factor_oom);
    tcase_add_test(tc, test_sparse_serial_regions);
    tcase_add_test(tc, test_sparse_serial_nested);
    tcase_add_test(tc, test_sparse_ordering_memo);
    suite_add_tcase(s, tc);
    return s;
}
