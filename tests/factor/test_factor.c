/* test_factor.c -- the factorisation seam (factor.h) against the band
 * routines it wraps: on random SPD band matrices of a few sizes and
 * bandwidths, the factor (made here or taken with gmm_factor_set_chol),
 * the three solves, L^T x, log|Q| and the selected inverse agree with
 * gmm_band_chol_* to c n eps (c = 64: the same arithmetic, so in fact
 * exactly, but the seam promises no more than the band's own accuracy);
 * errors are reported, not aborted. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/band.h"
#include "gmm/factor.h"
#include "support/testutil.h"

static const size_t sizes[] = {1, 5, 23};
static const size_t widths[] = {0, 1, 3};

static double max_abs_diff(const double *a, const double *b, size_t m, double *scale)
{
    double d = 0.0, s = 0.0;
    for (size_t i = 0; i < m; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        s = fmax(s, fabs(b[i]));
    }
    *scale = fmax(1.0, s);
    return d;
}

START_TEST(test_factor_vs_band)
{
    tu_rng r;
    tu_rng_seed(&r, 29);
    for (size_t a = 0; a < sizeof sizes / sizeof sizes[0]; a++)
        for (size_t b = 0; b < sizeof widths / sizeof widths[0]; b++) {
            size_t n = sizes[a], kl = widths[b] < n ? widths[b] : (n ? n - 1 : 0);
            double tol = 64.0 * (double)n * DBL_EPSILON, sc;
            gmm_band *Q = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
            gmm_band *L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
            gmm_band *S1 = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
            gmm_band *S2 = gmm_band_alloc(n, kl, 0, GMM_BAND_SYMMETRIC);
            gmm_factor *f = gmm_factor_band_alloc(n, kl);
            ck_assert_ptr_nonnull(Q);
            ck_assert_ptr_nonnull(f);
            ck_assert_str_eq(gmm_factor_name(f), "band");
            ck_assert_uint_eq(gmm_factor_dim(f), n);
            tu_band_fill_spd(Q, &r);
            ck_assert_int_eq(gmm_factor_decomp(f, Q), GMM_OK);
            ck_assert_int_eq(gmm_band_chol_decomp(Q, L), GMM_OK);
            const gmm_band *Lf = gmm_factor_band_chol(f);
            ck_assert_ptr_nonnull(Lf);
            size_t m = gmm_band_size(n, kl, 0);
            ck_assert_double_le(max_abs_diff(Lf->data, L->data, m, &sc), tol * sc);
            double ld = gmm_band_chol_logdet(L);
            ck_assert_double_le(fabs(gmm_factor_logdet(f) - ld), tol * fmax(1.0, fabs(ld)));

            double *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
            for (int op = 0; op < 3; op++) {
                for (size_t i = 0; i < n; i++)
                    x[i] = y[i] = tu_normal(&r);
                if (op == 0) {
                    ck_assert_int_eq(gmm_factor_solve_l(f, x), GMM_OK);
                    ck_assert_int_eq(gmm_band_tri_solve_vec(L, GMM_NOTRANS, y), GMM_OK);
                } else if (op == 1) {
                    ck_assert_int_eq(gmm_factor_solve_lt(f, x), GMM_OK);
                    ck_assert_int_eq(gmm_band_tri_solve_vec(L, GMM_TRANS, y), GMM_OK);
                } else {
                    ck_assert_int_eq(gmm_factor_solve(f, x), GMM_OK);
                    ck_assert_int_eq(gmm_band_tri_solve_vec(L, GMM_NOTRANS, y), GMM_OK);
                    ck_assert_int_eq(gmm_band_tri_solve_vec(L, GMM_TRANS, y), GMM_OK);
                }
                ck_assert_double_le(max_abs_diff(x, y, n, &sc), tol * sc);
            }
            /* Q Q^-1 e = e: the solve is Q's, not only L's */
            if (n) {
                memset(x, 0, n * sizeof *x);
                x[n / 2] = 1.0;
                ck_assert_int_eq(gmm_factor_solve(f, x), GMM_OK);
                ck_assert_int_eq(gmm_band_gemv(GMM_NOTRANS, 1.0, Q, x, 0.0, y), GMM_OK);
                for (size_t i = 0; i < n; i++)
                    ck_assert_double_le(fabs(y[i] - (i == n / 2)), 1e3 * tol);
            }
            /* a factor taken from elsewhere: the reach-limited solves, L^T x */
            gmm_factor *g = gmm_factor_band_alloc(n, kl);
            ck_assert_int_eq(gmm_factor_set_chol(g, L), GMM_OK);
            for (int op = 0; op < 3; op++) {
                double *z = malloc((n ? n : 1) * sizeof *z);
                for (size_t i = 0; i < n; i++)
                    x[i] = y[i] = tu_normal(&r);
                if (op == 0) {
                    ck_assert_int_eq(gmm_factor_solve_l(g, x), GMM_OK);
                    ck_assert_int_eq(gmm_band_tri_solve_vec(L, GMM_NOTRANS, y), GMM_OK);
                } else if (op == 1) {
                    ck_assert_int_eq(gmm_factor_solve_lt(g, x), GMM_OK);
                    ck_assert_int_eq(gmm_band_tri_solve_vec(L, GMM_TRANS, y), GMM_OK);
                } else {
                    memcpy(z, x, n * sizeof *z);
                    ck_assert_int_eq(gmm_factor_mul_lt(g, z, x), GMM_OK);
                    ck_assert_int_eq(gmm_band_gemv(GMM_TRANS, 1.0, L, z, 0.0, y), GMM_OK);
                }
                ck_assert_double_le(max_abs_diff(x, y, n, &sc), tol * sc);
                free(z);
            }
            ck_assert_double_le(fabs(gmm_factor_logdet(g) - ld), tol * fmax(1.0, fabs(ld)));
            gmm_factor_free(g);
            ck_assert_int_eq(gmm_factor_selinv(f, S1), GMM_OK);
            ck_assert_int_eq(gmm_band_chol_selinv(L, S2), GMM_OK);
            ck_assert_double_le(max_abs_diff(S1->data, S2->data, m, &sc), tol * sc);
            free(x);
            free(y);
            gmm_factor_free(f);
            gmm_band_free(Q);
            gmm_band_free(L);
            gmm_band_free(S1);
            gmm_band_free(S2);
        }
}
END_TEST

START_TEST(test_factor_errors)
{
    gmm_factor *f = gmm_factor_band_alloc(4, 1);
    gmm_band *Q = gmm_band_alloc(4, 1, 0, GMM_BAND_SYMMETRIC);
    gmm_band *Qw = gmm_band_alloc(4, 2, 0, GMM_BAND_SYMMETRIC);
    double x[4] = {1, 2, 3, 4};
    ck_assert_int_eq(gmm_factor_solve(f, x), GMM_EINVAL); /* no factor yet */
    ck_assert_ptr_null(gmm_factor_band_chol(f));
    ck_assert_int_eq(gmm_factor_decomp(f, Qw), GMM_EDIM);
    gmm_band_set_zero(Q);
    for (size_t j = 0; j < 4; j++)
        *gmm_band_ptr(Q, j, j) = j == 2 ? -1.0 : 2.0;
    ck_assert_int_eq(gmm_factor_decomp(f, Q), GMM_ENOTPD);
    ck_assert_int_eq(gmm_factor_solve_l(f, x), GMM_EINVAL); /* the failed one is no factor */
    ck_assert_int_eq(gmm_factor_decomp(NULL, Q), GMM_EINVAL);
    gmm_factor_free(NULL);
    gmm_factor_free(f);
    gmm_band_free(Q);
    gmm_band_free(Qw);
}
END_TEST

Suite *factor_suite(void)
{
    Suite *s = suite_create("factor");
    TCase *tc = tcase_create("band");
    tcase_add_test(tc, test_factor_vs_band);
    tcase_add_test(tc, test_factor_errors);
    suite_add_tcase(s, tc);
    return s;
}
