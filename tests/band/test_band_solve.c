/* test_band_solve.c -- triangular solves (band_solve.c) against dense
 * substitution, and their reverse modes (band_solve_rev.c) against central
 * differences of c = sum W .* output.
 *
 * Tolerances.  Forward: max abs error / max(1, max |reference|) <= SOLVE_C n
 * eps; the factors come from tu_band_fill_lower (diagonal in [1, 2]), whose
 * inverses stay modest even at full bandwidth.  Reverse: relative error of
 * central differences (step FD_STEP, entries below FD_FLOOR compared in
 * absolute terms) <= FD_TOL.  Large grids sample FD_SAMPLE entries per
 * parameter array to keep the suite fast.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/band.h"
#include "support/testutil.h"

#define SOLVE_C 8.0
#define EPS 2.220446049250313e-16
#define FD_STEP 1e-5
#define FD_FLOOR 1e-2
#define FD_TOL 1e-6
#define FD_SAMPLE 12

static const size_t NS[] = {1, 2, 3, 10, 57};
#define NNS (sizeof NS / sizeof NS[0])

static size_t clampn(size_t n, size_t b) { return b > n - 1 ? n - 1 : b; }

/* Requested bandwidths for order n: 0, n + 2 (clamped to n - 1 by
 * allocation), 1, 2, n/2 -- without repeats after clamping. */
static size_t bw_list(size_t n, size_t out[5])
{
    size_t raw[5] = {0, n + 2, 1, 2, n / 2}, m = 0;
    for (size_t a = 0; a < 5; a++) {
        int dup = 0;
        for (size_t b = 0; b < m; b++)
            dup |= clampn(n, out[b]) == clampn(n, raw[a]);
        if (!dup)
            out[m++] = raw[a];
    }
    return m;
}

/* x <- op(D)^{-1} x for dense column-major lower-triangular D. */
static void dense_tri_solve(const double *D, size_t n, gmm_trans t, double *x)
{
    if (t == GMM_NOTRANS) {
        for (size_t i = 0; i < n; i++) {
            double s = x[i];
            for (size_t m = 0; m < i; m++)
                s -= D[m * n + i] * x[m];
            x[i] = s / D[i * n + i];
        }
    } else {
        for (size_t i = n; i-- > 0;) {
            double s = x[i];
            for (size_t m = i + 1; m < n; m++)
                s -= D[i * n + m] * x[m];
            x[i] = s / D[i * n + i];
        }
    }
}

static void fill_vec(double *x, size_t m, tu_rng *r)
{
    for (size_t i = 0; i < m; i++)
        x[i] = tu_normal(r);
}

/* Every slot of b outside the band (the never-read corners) is zero. */
static int corners_zero(const gmm_band *b)
{
    for (size_t j = 0; j < b->n; j++)
        for (size_t r = 0; r < b->ld; r++) {
            size_t i = j + r; /* i + ku, row r of column j */
            if ((i < b->ku || i - b->ku >= b->n) && b->data[j * b->ld + r] != 0.0)
                return 0;
        }
    return 1;
}

static double dotv(const double *a, const double *b, size_t m)
{
    double s = 0.0;
    for (size_t i = 0; i < m; i++)
        s += a[i] * b[i];
    return s;
}

static double dot_band(const gmm_band *W, const gmm_band *X)
{
    double s = 0.0;
    for (size_t j = 0; j < X->n; j++)
        for (size_t i = (j >= X->ku ? j - X->ku : 0); i <= j + X->kl && i < X->n; i++)
            s += *gmm_band_ptr(W, i, j) * *gmm_band_ptr(X, i, j);
    return s;
}

/* ---- vector and block solves ------------------------------------------------ */

START_TEST(test_solve_vec_forward)
{
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (size_t a = 0; a < NNS; a++) {
        size_t n = NS[a], bws[5], nb = bw_list(n, bws);
        double *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref);
        for (size_t b = 0; b < nb; b++)
            for (int t = 0; t <= 1; t++) {
                gmm_band *L = gmm_band_alloc(n, bws[b], 0, GMM_BAND_LOWER);
                tu_band_fill_lower(L, &r);
                double *D = tu_band_to_dense(L);
                fill_vec(x, n, &r);
                memcpy(ref, x, n * sizeof *x);
                dense_tri_solve(D, n, (gmm_trans)t, ref);
                ck_assert_int_eq(gmm_band_tri_solve_vec(L, (gmm_trans)t, x), GMM_OK);
                double err = tu_max_rel_diff(x, ref, n);
                ck_assert_msg(err <= SOLVE_C * n * EPS, "n %zu l %zu t %d: err %g", n, L->kl, t,
                              err);
                free(D);
                gmm_band_free(L);
            }
        free(x);
        free(ref);
    }
}
END_TEST

/* The vector solves' copies for the state-space bandwidths (l = 1, 3, .., 15
 * a constant: band_solve_impl.h) both ways, n from below the band to past
 * it: against the dense substitution, and for l = 1, 3 to the bit against
 * the generic loops (the same factor held with one more, zero, diagonal:
 * l + 1 is no specialised bandwidth, and with fewer than four far terms
 * the partial sums take the extra zero without a change of grouping). */
START_TEST(test_solve_vec_fixed_bandwidths)
{
    tu_rng r;
    tu_rng_seed(&r, 37);
    const size_t ns[] = {1, 2, 4, 9, 16, 17, 60};
    for (size_t l = 1; l <= 15; l += 2)
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (int t = 0; t <= 1; t++) {
                size_t n = ns[a];
                gmm_band *L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
                gmm_band *L1 = gmm_band_alloc(n, l + 1, 0, GMM_BAND_LOWER);
                tu_band_fill_lower(L, &r);
                gmm_band_set_zero(L1);
                for (size_t j = 0; j < n; j++)
                    for (size_t i = j; i < n && i <= j + L->kl; i++)
                        *gmm_band_ptr(L1, i, j) = *gmm_band_ptr(L, i, j);
                double *D = tu_band_to_dense(L);
                double *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref);
                double *x1 = malloc(n * sizeof *x1);
                fill_vec(x, n, &r);
                memcpy(ref, x, n * sizeof *x);
                memcpy(x1, x, n * sizeof *x);
                dense_tri_solve(D, n, (gmm_trans)t, ref);
                ck_assert_int_eq(gmm_band_tri_solve_vec(L, (gmm_trans)t, x), GMM_OK);
                double err = tu_max_rel_diff(x, ref, n);
                ck_assert_msg(err <= SOLVE_C * n * EPS, "n %zu l %zu t %d: err %g", n, l, t, err);
                if (l <= 3 && L1->kl == l + 1) {
                    ck_assert_int_eq(gmm_band_tri_solve_vec(L1, (gmm_trans)t, x1), GMM_OK);
                    for (size_t i = 0; i < n; i++)
                        ck_assert_msg(x[i] == x1[i], "n %zu l %zu t %d: x[%zu] %.17g vs %.17g", n,
                                      l, t, i, x[i], x1[i]);
                }
                free(D);
                free(x);
                free(x1);
                free(ref);
                gmm_band_free(L);
                gmm_band_free(L1);
            }
}
END_TEST

/* Large n, where the solves run their blocked form (band_solve_blk.h) for
 * every l >= 8 -- also l = 8 .. 11, which in cache keep the row loops --
 * with n = 8k + 1 and 8k + 7 so that the last columns take the tail paths:
 * the componentwise backward error max_i |L x - b|_i / (|L| |x| + |b|)_i
 * (substitution's is below (l + 1) eps: Higham, Accuracy and Stability,
 * Thm 8.5) must stay below 2 (l + 3) eps (the blocked form rounds the
 * quotient L(k', k) / L(k, k) once more); measured worst 0.14 (l + 3) eps.
 * The factors are diagonally dominant so that x stays O(1) at this n. */
START_TEST(test_solve_vec_wide_large)
{
    tu_rng r;
    tu_rng_seed(&r, 31);
    const size_t ns[] = {70001, 70007}, kls[] = {8, 11, 16, 40};
    double worst = 0.0;
    for (size_t a = 0; a < 2; a++)
        for (size_t b = 0; b < sizeof kls / sizeof kls[0]; b++)
            for (int t = 0; t <= 1; t++) {
                size_t n = ns[a], l = kls[b];
                gmm_band *L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
                for (size_t j = 0; j < n; j++) {
                    double *c = gmm_band_col(L, j);
                    c[j] = 1.0 + tu_uniform(&r);
                    for (size_t i = j + 1; i <= j + l && i < n; i++)
                        c[i] = 0.5 * (tu_uniform(&r) - 0.5) / (double)l;
                }
                double *x = malloc(n * sizeof *x), *bv = malloc(n * sizeof *bv);
                fill_vec(bv, n, &r);
                memcpy(x, bv, n * sizeof *x);
                ck_assert_int_eq(gmm_band_tri_solve_vec(L, (gmm_trans)t, x), GMM_OK);
                double e = 0.0;
                for (size_t i = 0; i < n; i++) {
                    /* row i of op(L) against x */
                    double s = -bv[i], m = fabs(bv[i]);
                    size_t j0 = t ? i : (i >= l ? i - l : 0), j1 = t ? (i + l < n ? i + l : n - 1) : i;
                    for (size_t j = j0; j <= j1; j++) {
                        double v = t ? gmm_band_col(L, i)[j] : gmm_band_col(L, j)[i];
                        s += v * x[j];
                        m += fabs(v * x[j]);
                    }
                    e = fmax(e, fabs(s) / m);
                }
                e /= (double)(l + 3) * EPS;
                worst = fmax(worst, e);
                ck_assert_msg(e <= 2.0, "n %zu l %zu t %d: backward error %.3g (l + 3) eps", n, l,
                              t, e);
                free(x);
                free(bv);
                gmm_band_free(L);
            }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "wide blocked solves: worst backward error %.2g (l + 3) eps\n", worst);
}
END_TEST

/* Ragged bands (row i of L nonzero from a random column f_i >= i - l, so
 * columns end at random rows, as a graph's factor in RCM order):
 * gmm_band_tri_reach against a dense scan, and the solves given it equal
 * to gmm_band_tri_solve_vec's to the bit, in both directions, at
 * bandwidths taking the blocked substitutions (l >= 8) and the column ones
 * (which ignore reach), with blocks whose reach ends inside their own
 * triangle and columns with nothing below the diagonal; and a backward
 * error below 2 (l + 3) eps (as test_solve_vec_wide_large). */
START_TEST(test_solve_vec_reach)
{
    tu_rng r;
    tu_rng_seed(&r, 77);
    const size_t ns[] = {9, 57, 140, 1001}, kls[] = {1, 3, 8, 11, 16, 20, 40};
    size_t compared = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof kls / sizeof kls[0]; b++)
            for (int t = 0; t <= 1; t++) {
                size_t n = ns[a], l = kls[b];
                gmm_band *L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
                size_t *reach = malloc(n * sizeof *reach), *want = malloc(n * sizeof *want);
                for (size_t i = 0; i < n; i++) {
                    size_t lo = i >= L->kl ? i - L->kl : 0;
                    /* a quarter of the rows reach no further than the diagonal */
                    size_t f = tu_uniform(&r) < 0.25 ? i : lo + (size_t)(tu_uniform(&r) * (double)(i - lo + 1));
                    gmm_band_col(L, i)[i] = 1.0 + tu_uniform(&r);
                    for (size_t j = f; j < i; j++)
                        gmm_band_col(L, j)[i] = 0.5 * (tu_uniform(&r) - 0.5) / (double)(l + 1);
                }
                for (size_t j = 0; j < n; j++) {
                    want[j] = j;
                    for (size_t i = j + 1; i < n && i <= j + L->kl; i++)
                        if (gmm_band_get(L, i, j) != 0.0)
                            want[j] = i;
                }
                ck_assert_int_eq(gmm_band_tri_reach(L, reach), GMM_OK);
                for (size_t j = 0; j < n; j++)
                    ck_assert_msg(reach[j] == want[j], "n %zu l %zu: reach[%zu] = %zu, not %zu",
                                  n, l, j, reach[j], want[j]);
                double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
                double *bv = malloc(n * sizeof *bv);
                fill_vec(bv, n, &r);
                memcpy(x, bv, n * sizeof *x);
                memcpy(y, bv, n * sizeof *y);
                ck_assert_int_eq(gmm_band_tri_solve_vec(L, (gmm_trans)t, x), GMM_OK);
                ck_assert_int_eq(gmm_band_tri_solve_vec_reach(L, reach, (gmm_trans)t, y), GMM_OK);
                for (size_t i = 0; i < n; i++)
                    ck_assert_msg(memcmp(&x[i], &y[i], sizeof x[i]) == 0,
                                  "n %zu l %zu t %d: x[%zu] = %.17g with reach, %.17g without", n,
                                  l, t, i, y[i], x[i]);
                double e = 0.0;
                for (size_t i = 0; i < n; i++) {
                    double s = -bv[i], m = fabs(bv[i]);
                    size_t j0 = t ? i : (i >= L->kl ? i - L->kl : 0);
                    size_t j1 = t ? (i + L->kl < n ? i + L->kl : n - 1) : i;
                    for (size_t j = j0; j <= j1; j++) {
                        double v = t ? gmm_band_get(L, j, i) : gmm_band_get(L, i, j);
                        s += v * y[j];
                        m += fabs(v * y[j]);
                    }
                    e = fmax(e, fabs(s) / m);
                }
                ck_assert_msg(e <= 2.0 * (double)(l + 3) * EPS,
                              "n %zu l %zu t %d: backward error %.3g", n, l, t, e);
                compared++;
                free(x);
                free(y);
                free(bv);
                free(reach);
                free(want);
                gmm_band_free(L);
            }
    ck_assert_uint_eq(compared, 56);
    gmm_band *G = gmm_band_alloc(4, 1, 1, GMM_BAND_GENERAL);
    size_t rr[4];
    double xx[4] = {0};
    ck_assert_int_eq(gmm_band_tri_reach(G, rr), GMM_EDIM);
    ck_assert_int_eq(gmm_band_tri_solve_vec_reach(G, rr, GMM_NOTRANS, xx), GMM_EDIM);
    gmm_band_free(G);
}
END_TEST

typedef struct {
    gmm_band *L;
    gmm_trans t;
    size_t n, k, ldv;
    double *V, *S;      /* V: n x k (ld ldv); S: n x k (ld n) scratch */
    const double *W;    /* n x k, ld n */
} mat_ctx;

static double mat_obj(void *vctx)
{
    mat_ctx *c = vctx;
    for (size_t q = 0; q < c->k; q++)
        memcpy(c->S + q * c->n, c->V + q * c->ldv, c->n * sizeof(double));
    gmm_band_tri_solve_mat(c->L, c->t, c->k, c->S, c->n);
    return dotv(c->W, c->S, c->n * c->k);
}

/* Forward block solve against dense substitution, with ldx > n (the padding
 * rows stay untouched); reverse mode (vec when k == 1) against FD. */
START_TEST(test_solve_mat_forward_and_rev)
{
    tu_rng r;
    tu_rng_seed(&r, 12);
    double worst = 0.0;
    for (size_t a = 0; a < NNS; a++) {
        size_t n = NS[a], bws[5], nb = bw_list(n, bws);
        for (size_t b = 0; b < nb; b++)
            for (int t = 0; t <= 1; t++)
                for (size_t k = 1; k <= 3; k += 2) {
                    size_t ldx = n + 2, ldsb = n + 1, ldvb = n + 3;
                    gmm_band *L = gmm_band_alloc(n, bws[b], 0, GMM_BAND_LOWER);
                    gmm_band *Lbar = gmm_band_alloc(n, bws[b], 0, GMM_BAND_LOWER);
                    tu_band_fill_lower(L, &r);
                    double *D = tu_band_to_dense(L);
                    double *V = malloc(ldx * k * sizeof *V), *X = malloc(ldx * k * sizeof *X);
                    double *ref = malloc(n * k * sizeof *ref), *W = malloc(n * k * sizeof *W);
                    double *Sbar = malloc(ldsb * k * sizeof *Sbar);
                    double *Vbar = calloc(ldvb * k, sizeof *Vbar);
                    double *S = malloc(n * k * sizeof *S);
                    fill_vec(V, ldx * k, &r);
                    fill_vec(W, n * k, &r);
                    memcpy(X, V, ldx * k * sizeof *X);
                    for (size_t q = 0; q < k; q++) {
                        memcpy(ref + q * n, V + q * ldx, n * sizeof *ref);
                        dense_tri_solve(D, n, (gmm_trans)t, ref + q * n);
                    }
                    gmm_trans tt = (gmm_trans)t;
                    ck_assert_int_eq(gmm_band_tri_solve_mat(L, tt, k, X, ldx), GMM_OK);
                    for (size_t q = 0; q < k; q++) {
                        double err = tu_max_rel_diff(X + q * ldx, ref + q * n, n);
                        ck_assert_msg(err <= SOLVE_C * n * EPS, "n %zu l %zu t %d k %zu: %g", n,
                                      L->kl, t, k, err);
                        ck_assert(X[q * ldx + n] == V[q * ldx + n]);
                        ck_assert(X[q * ldx + n + 1] == V[q * ldx + n + 1]);
                    }

                    /* Reverse: Sbar = W with its own leading dimension. */
                    for (size_t q = 0; q < k; q++)
                        memcpy(Sbar + q * ldsb, W + q * n, n * sizeof *W);
                    if (k == 1)
                        ck_assert_int_eq(gmm_band_tri_solve_vec_rev(L, tt, X, Sbar, Vbar, Lbar,
                                                                    NULL),
                                         GMM_OK);
                    else
                        ck_assert_int_eq(gmm_band_tri_solve_mat_rev(L, tt, k, X, ldx, Sbar,
                                                                    ldsb, Vbar, ldvb, Lbar,
                                                                    NULL),
                                         GMM_OK);
                    ck_assert(corners_zero(Lbar));
                    /* Analytic dc/dV in V's layout (padding rows: 0). */
                    double *an = calloc(ldx * k, sizeof *an);
                    for (size_t q = 0; q < k; q++)
                        memcpy(an + q * ldx, Vbar + q * ldvb, n * sizeof *an);
                    mat_ctx c = {L, tt, n, k, ldx, V, S, W};
                    double e1 = tu_fd_check_sample(V, ldx * k, an, mat_obj, &c, FD_STEP,
                                                   FD_FLOOR, FD_SAMPLE, &r, NULL);
                    double e2 = tu_fd_check_band(L, Lbar, mat_obj, &c, FD_STEP, FD_FLOOR,
                                                 FD_SAMPLE, &r, NULL, NULL);
                    ck_assert_msg(e1 <= FD_TOL && e2 <= FD_TOL,
                                  "n %zu l %zu t %d k %zu: fd err V %g L %g", n, L->kl, t, k,
                                  e1, e2);
                    worst = fmax(worst, fmax(e1, e2));
                    free(an);
                    free(D);
                    free(V);
                    free(X);
                    free(ref);
                    free(W);
                    free(Sbar);
                    free(Vbar);
                    free(S);
                    gmm_band_free(L);
                    gmm_band_free(Lbar);
                }
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "solve_mat_rev: worst fd rel err %.3g\n", worst);
}
END_TEST

/* Adjoints accumulate; caller workspace and internal allocation agree;
 * NULL adjoints are allowed; vbar may share storage with s. */
START_TEST(test_solve_vec_rev_accumulates)
{
    tu_rng r;
    tu_rng_seed(&r, 13);
    size_t n = 10;
    gmm_band *L = gmm_band_alloc(n, 3, 0, GMM_BAND_LOWER);
    gmm_band *L1 = gmm_band_alloc(n, 3, 0, GMM_BAND_LOWER);
    gmm_band *L2 = gmm_band_alloc(n, 3, 0, GMM_BAND_LOWER);
    tu_band_fill_lower(L, &r);
    double s[10], sbar[10], v1[10] = {0}, v2[10], p[10], work[10], s2[10];
    fill_vec(s, n, &r);
    fill_vec(sbar, n, &r);
    fill_vec(p, n, &r);
    memcpy(v2, p, sizeof p);
    tu_band_fill_random(L2, &r);
    gmm_band *P = gmm_band_alloc(n, 3, 0, GMM_BAND_LOWER);
    gmm_band_copy(P, L2);
    for (int t = 0; t <= 1; t++) {
        memset(v1, 0, sizeof v1);
        gmm_band_set_zero(L1);
        memcpy(v2, p, sizeof p);
        gmm_band_copy(L2, P);
        ck_assert_int_eq(gmm_band_tri_solve_vec_rev(L, (gmm_trans)t, s, sbar, v1, L1, NULL),
                         GMM_OK);
        ck_assert_int_eq(gmm_band_tri_solve_vec_rev(L, (gmm_trans)t, s, sbar, v2, L2, work),
                         GMM_OK);
        for (size_t i = 0; i < n; i++)
            ck_assert(v2[i] == p[i] + v1[i]);
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i < n && i <= j + 3; i++)
                ck_assert(*gmm_band_ptr(L2, i, j) ==
                          *gmm_band_ptr(P, i, j) + *gmm_band_ptr(L1, i, j));
        ck_assert_int_eq(gmm_band_tri_solve_vec_rev(L, (gmm_trans)t, s, sbar, NULL, NULL, NULL),
                         GMM_OK);
        /* vbar sharing s's storage: Lbar must still see the original s. */
        memcpy(s2, s, sizeof s);
        gmm_band_set_zero(L2);
        ck_assert_int_eq(gmm_band_tri_solve_vec_rev(L, (gmm_trans)t, s2, sbar, s2, L2, NULL),
                         GMM_OK);
        for (size_t i = 0; i < n; i++)
            ck_assert(s2[i] == s[i] + v1[i]);
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i < n && i <= j + 3; i++)
                ck_assert(*gmm_band_ptr(L2, i, j) == *gmm_band_ptr(L1, i, j));
    }
    gmm_band_free(L);
    gmm_band_free(L1);
    gmm_band_free(L2);
    gmm_band_free(P);
}
END_TEST

/* The fused solve + log-determinant: the same x as tri_solve_vec bit for
 * bit, the log-determinant of chol_logdet to rounding -- also for diagonals
 * spanning 1e-300 .. 1e300 (a product of factors would overflow), subnormal
 * entries, and a zero (-inf) or negative (NaN) pivot as the sum of logs
 * gives; bandwidths generic and specialised, n from 0 past the band. */
START_TEST(test_solve_vec_logdet)
{
    tu_rng r;
    tu_rng_seed(&r, 29);
    const size_t ns[] = {0, 1, 3, 12, 200};
    const size_t kls[] = {0, 2, 7, 11, 16, 40}; /* 16, 40: the blocked substitution */
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof kls / sizeof kls[0]; b++)
            for (int scale = 0; scale < 3; scale++) {
                size_t n = ns[a];
                gmm_band *L = gmm_band_alloc(n, kls[b], 0, GMM_BAND_LOWER);
                tu_band_fill_lower(L, &r);
                for (size_t i = 0; i < n; i++) {
                    double *dii = gmm_band_ptr(L, i, i);
                    if (scale == 1) /* huge and tiny pivots */
                        *dii *= pow(10.0, (i % 2 ? 1.0 : -1.0) * (double)(300 - i % 7));
                    if (scale == 2 && i % 5 == 1)
                        *dii = 3e-310 * (1.0 + tu_uniform(&r)); /* subnormal */
                }
                double *x = malloc((n + 1) * sizeof *x), *ref = malloc((n + 1) * sizeof *ref);
                fill_vec(x, n, &r);
                memcpy(ref, x, n * sizeof *x);
                double ld = NAN;
                ck_assert_int_eq(gmm_band_tri_solve_vec(L, GMM_NOTRANS, ref), GMM_OK);
                ck_assert_int_eq(gmm_band_tri_solve_vec_logdet(L, x, &ld), GMM_OK);
                for (size_t i = 0; i < n; i++)
                    ck_assert(x[i] == ref[i] || (isnan(x[i]) && isnan(ref[i])));
                double want = gmm_band_chol_logdet(L);
                ck_assert_msg(fabs(ld - want) <= 1e-14 * (double)(n + 1) * fmax(1.0, fabs(want)),
                              "n %zu l %zu scale %d: %.17g vs %.17g", n, L->kl, scale, ld, want);
                if (n >= 3) {
                    *gmm_band_ptr(L, 2, 2) = 0.0;
                    ck_assert_int_eq(gmm_band_tri_solve_vec_logdet(L, x, &ld), GMM_OK);
                    ck_assert(isinf(ld) && ld < 0);
                    *gmm_band_ptr(L, 2, 2) = -1.0;
                    ck_assert_int_eq(gmm_band_tri_solve_vec_logdet(L, x, &ld), GMM_OK);
                    ck_assert(isnan(ld));
                }
                ck_assert_int_eq(gmm_band_tri_solve_vec_logdet(L, x, NULL), GMM_EINVAL);
                free(x);
                free(ref);
                gmm_band_free(L);
            }
}
END_TEST

/* The set variant writes every stored slot of Lbar (whatever it held) with
 * what the accumulating variant plus chol_logdet_rev add to a zero band:
 * exactly without the log-determinant, to rounding of cbar / L(i,i) with
 * it; sizes up to the band and past it, both transposes, two bandwidths. */
START_TEST(test_solve_vec_rev_set)
{
    tu_rng r;
    tu_rng_seed(&r, 17);
    const size_t ns[] = {1, 2, 5, 11, 40, 1, 2, 5, 11, 40};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        /* kl 4: the generic sweep; kl 11: a specialised copy (band_solve_impl.h) */
        size_t n = ns[a], kl = a < 5 ? 4 : 11;
        gmm_band *L = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
        gmm_band *L1 = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
        gmm_band *L2 = gmm_band_alloc(n, kl, 0, GMM_BAND_LOWER);
        tu_band_fill_lower(L, &r);
        double *s = malloc(n * sizeof *s), *sbar = malloc(n * sizeof *sbar);
        double *work = malloc(n * sizeof *work);
        fill_vec(s, n, &r);
        fill_vec(sbar, n, &r);
        for (int t = 0; t <= 1; t++)
            for (int withdet = 0; withdet <= 1; withdet++) {
                double cbar = withdet ? -0.7 : 0.0;
                gmm_band_set_zero(L1);
                tu_band_fill_random(L2, &r); /* garbage the set variant must overwrite */
                ck_assert_int_eq(
                    gmm_band_tri_solve_vec_rev(L, (gmm_trans)t, s, sbar, NULL, L1, NULL), GMM_OK);
                if (withdet)
                    ck_assert_int_eq(gmm_band_chol_logdet_rev(L, cbar, L1), GMM_OK);
                ck_assert_int_eq(gmm_band_tri_solve_vec_rev_set(L, (gmm_trans)t, s, sbar, cbar,
                                                                L2, t ? work : NULL),
                                 GMM_OK);
                for (size_t j = 0; j < n; j++)
                    for (size_t i = j; i < n && i <= j + L->kl; i++) {
                        double v1 = *gmm_band_ptr(L1, i, j), v2 = *gmm_band_ptr(L2, i, j);
                        if (withdet && i == j)
                            ck_assert_msg(fabs(v2 - v1) <= 4e-16 * (fabs(v1) + 2.0 * fabs(cbar) /
                                                                    *gmm_band_ptr(L, i, i)),
                                          "n %zu (%zu,%zu): %.17g vs %.17g", n, i, j, v2, v1);
                        else
                            ck_assert(v2 == v1);
                    }
            }
        ck_assert_int_eq(gmm_band_tri_solve_vec_rev_set(L, GMM_NOTRANS, s, sbar, 0.0, NULL, NULL),
                         GMM_EINVAL);
        free(s);
        free(sbar);
        free(work);
        gmm_band_free(L);
        gmm_band_free(L1);
        gmm_band_free(L2);
    }
}
END_TEST

/* ---- banded right-hand side --------------------------------------------------- */

/* Dense op(L)^{-1} Bd, n x n. */
static double *dense_solve_all(const double *Ld, size_t n, gmm_trans t, const double *Bd)
{
    double *R = malloc((n > 0 ? n * n : 1) * sizeof *R);
    memcpy(R, Bd, n * n * sizeof *R);
    for (size_t j = 0; j < n; j++)
        dense_tri_solve(Ld, n, t, R + j * n);
    return R;
}

START_TEST(test_solve_band_forward)
{
    tu_rng r;
    tu_rng_seed(&r, 21);
    size_t count = 0;
    for (size_t a = 0; a < NNS; a++) {
        size_t n = NS[a], bws[5], nb = bw_list(n, bws);
        for (size_t il = 0; il < nb; il++)
            for (size_t ib = 0; ib < nb; ib++)
                for (size_t iu = 0; iu < nb; iu++)
                    for (int t = 0; t <= 1; t++) {
                        size_t l = clampn(n, bws[il]), klb = bws[ib], kub = bws[iu];
                        /* B LOWER in half the lower-only cases. */
                        gmm_band_kind bk = (kub == 0 && ((ib + il) & 1)) ? GMM_BAND_LOWER
                                                                         : GMM_BAND_GENERAL;
                        gmm_band *L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
                        gmm_band *B = gmm_band_alloc(n, klb, kub, bk);
                        tu_band_fill_lower(L, &r);
                        tu_band_fill_random(B, &r);
                        double *Ld = tu_band_to_dense(L), *Bd = tu_band_to_dense(B);
                        double *R = dense_solve_all(Ld, n, (gmm_trans)t, Bd);
                        /* X bands: the kept side at B's width or one wider; the other
                         * side narrower than, equal to and wider than B's. */
                        size_t keep[2] = {t ? B->kl : B->ku, (t ? B->kl : B->ku) + 1};
                        size_t other[4] = {0, t ? B->ku : B->kl, (t ? B->ku : B->kl) + l, n + 2};
                        for (int k1 = 0; k1 < 2; k1++)
                            for (int k2 = 0; k2 < 4; k2++) {
                                size_t xkl = t ? keep[k1] : other[k2];
                                size_t xku = t ? other[k2] : keep[k1];
                                gmm_band_kind xk = GMM_BAND_GENERAL;
                                if (!t && xku == 0 && B->ku == 0 && (k2 & 1))
                                    xk = GMM_BAND_LOWER;
                                gmm_band *X = gmm_band_alloc(n, xkl, xku, xk);
                                tu_band_fill_random(X, &r); /* overwritten */
                                ck_assert_int_eq(gmm_band_tri_solve_band(L, (gmm_trans)t, B, X),
                                                 GMM_OK);
                                double err = tu_band_vs_dense(X, R);
                                ck_assert_msg(err <= SOLVE_C * n * EPS,
                                              "n %zu l %zu B(%zu,%zu) t %d X(%zu,%zu): %g", n,
                                              l, B->kl, B->ku, t, X->kl, X->ku, err);
                                gmm_band_free(X);
                                count++;
                            }
                        free(Ld);
                        free(Bd);
                        free(R);
                        gmm_band_free(L);
                        gmm_band_free(B);
                    }
    }
    ck_assert_uint_gt(count, 1000);
}
END_TEST

typedef struct {
    gmm_band *L, *B, *X;
    const gmm_band *W;
    gmm_trans t;
} band_ctx;

static double band_obj(void *vctx)
{
    band_ctx *c = vctx;
    gmm_band_tri_solve_band(c->L, c->t, c->B, c->X);
    return dot_band(c->W, c->X);
}

START_TEST(test_solve_band_rev)
{
    tu_rng r;
    tu_rng_seed(&r, 22);
    double worst = 0.0;
    for (size_t a = 0; a < NNS; a++) {
        size_t n = NS[a], bws[5], nb = bw_list(n, bws);
        size_t pairs[6][2] = {{0, 0}, {1, 0}, {0, 1}, {2, 3}, {n / 2, 1}, {n + 2, n + 2}};
        for (size_t il = 0; il < nb; il++)
            for (size_t ip = 0; ip < 6; ip++)
                for (int t = 0; t <= 1; t++)
                    for (int wide = 0; wide <= 1; wide++) {
                        gmm_trans tt = (gmm_trans)t;
                        size_t l = clampn(n, bws[il]);
                        gmm_band *L = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
                        gmm_band *B = gmm_band_alloc(n, pairs[ip][0], pairs[ip][1],
                                                     GMM_BAND_GENERAL);
                        /* Narrow: the other side 0; wide: both beyond B's by l + 1, 1. */
                        size_t xkl = t ? B->kl : 0, xku = t ? 0 : B->ku;
                        if (wide) {
                            xkl = B->kl + (t ? 1 : l + 1);
                            xku = B->ku + (t ? l + 1 : 1);
                        }
                        gmm_band *X = gmm_band_alloc(n, xkl, xku, GMM_BAND_GENERAL);
                        gmm_band *W = gmm_band_alloc(n, xkl, xku, GMM_BAND_GENERAL);
                        gmm_band *Bbar = gmm_band_alloc(n, B->kl, B->ku, GMM_BAND_GENERAL);
                        gmm_band *Bbar2 = gmm_band_alloc(n, B->kl + 1, B->ku + 2,
                                                         GMM_BAND_GENERAL);
                        gmm_band *Lbar = gmm_band_alloc(n, l, 0, GMM_BAND_LOWER);
                        tu_band_fill_lower(L, &r);
                        tu_band_fill_random(B, &r);
                        tu_band_fill_random(W, &r);
                        ck_assert_int_eq(gmm_band_tri_solve_band(L, tt, B, X), GMM_OK);
                        ck_assert_int_eq(gmm_band_tri_solve_band_rev(L, tt, B, X, W, Bbar, Lbar),
                                         GMM_OK);
                        ck_assert(corners_zero(Lbar) && corners_zero(Bbar));
                        /* A wider Bbar against the dense op(L)^{-T} Xbar. */
                        ck_assert_int_eq(gmm_band_tri_solve_band_rev(L, tt, B, X, W, Bbar2, NULL),
                                         GMM_OK);
                        double *Ld = tu_band_to_dense(L), *Wd = tu_band_to_dense(W);
                        double *G = dense_solve_all(Ld, n, t ? GMM_NOTRANS : GMM_TRANS, Wd);
                        double eg = tu_band_vs_dense(Bbar2, G);
                        ck_assert_msg(eg <= SOLVE_C * n * EPS, "n %zu: Bbar vs dense %g", n, eg);

                        band_ctx c = {L, B, X, W, tt};
                        size_t wi = 0, wj = 0;
                        double eb = tu_fd_check_band(B, Bbar, band_obj, &c, FD_STEP, FD_FLOOR,
                                                     FD_SAMPLE, &r, &wi, &wj);
                        double el = tu_fd_check_band(L, Lbar, band_obj, &c, FD_STEP, FD_FLOOR,
                                                     FD_SAMPLE, &r, &wi, &wj);
                        ck_assert_msg(eb <= FD_TOL && el <= FD_TOL,
                                      "n %zu l %zu B(%zu,%zu) t %d X(%zu,%zu): fd B %g L %g "
                                      "(worst %zu,%zu)",
                                      n, l, B->kl, B->ku, t, X->kl, X->ku, eb, el, wi, wj);
                        worst = fmax(worst, fmax(eb, el));
                        free(Ld);
                        free(Wd);
                        free(G);
                        gmm_band_free(L);
                        gmm_band_free(B);
                        gmm_band_free(X);
                        gmm_band_free(W);
                        gmm_band_free(Bbar);
                        gmm_band_free(Bbar2);
                        gmm_band_free(Lbar);
                    }
    }
    if (getenv("GMM_TEST_REPORT"))
        fprintf(stderr, "solve_band_rev: worst fd rel err %.3g\n", worst);
}
END_TEST

/* ---- errors and edge cases ------------------------------------------------------ */

static void expect_edim(gmm_status st, const char *needle)
{
    ck_assert_int_eq(st, GMM_EDIM);
    ck_assert_int_eq(gmm_error_status(), GMM_EDIM);
    ck_assert_msg(strstr(gmm_error_message(), needle) != NULL, "message '%s' lacks '%s'",
                  gmm_error_message(), needle);
}

START_TEST(test_solve_errors)
{
    size_t n = 5;
    gmm_band *L = gmm_band_alloc(n, 2, 0, GMM_BAND_LOWER);
    gmm_band *G = gmm_band_alloc(n, 2, 0, GMM_BAND_GENERAL);
    gmm_band *S = gmm_band_alloc(n, 2, 0, GMM_BAND_SYMMETRIC);
    gmm_band *L6 = gmm_band_alloc(6, 2, 0, GMM_BAND_LOWER);
    gmm_band *B = gmm_band_alloc(n, 1, 2, GMM_BAND_GENERAL);
    gmm_band *X = gmm_band_alloc(n, 3, 2, GMM_BAND_GENERAL);
    gmm_band *Xn = gmm_band_alloc(n, 3, 1, GMM_BAND_GENERAL);
    gmm_band *Xt = gmm_band_alloc(n, 0, 2, GMM_BAND_GENERAL);
    gmm_band *Lb1 = gmm_band_alloc(n, 1, 0, GMM_BAND_LOWER);
    tu_rng r;
    tu_rng_seed(&r, 31);
    tu_band_fill_lower(L, &r);
    double x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};

    expect_edim(gmm_band_tri_solve_vec(G, GMM_NOTRANS, x), "LOWER");
    expect_edim(gmm_band_tri_solve_mat(L, GMM_NOTRANS, 2, x, 4), "ldx");
    expect_edim(gmm_band_tri_solve_vec_rev(S, GMM_TRANS, x, x, y, NULL, NULL), "LOWER");
    expect_edim(gmm_band_tri_solve_vec_rev(L, GMM_TRANS, x, x, y, Lb1, NULL), "Lbar");
    expect_edim(gmm_band_tri_solve_band(L6, GMM_NOTRANS, B, X), "n differs");
    expect_edim(gmm_band_tri_solve_band(L, GMM_NOTRANS, B, Xn), "ku");
    expect_edim(gmm_band_tri_solve_band(L, GMM_TRANS, B, Xt), "kl");
    expect_edim(gmm_band_tri_solve_band(L, GMM_NOTRANS, S, X), "SYMMETRIC");
    expect_edim(gmm_band_tri_solve_band(L, GMM_NOTRANS, B, B), "alias");
    expect_edim(gmm_band_tri_solve_band(L, GMM_NOTRANS, B, L), "LOWER only");
    ck_assert_int_eq(gmm_band_tri_solve_band(L, GMM_NOTRANS, B, X), GMM_OK);
    expect_edim(gmm_band_tri_solve_band_rev(L, GMM_NOTRANS, B, X, Xn, NULL, L), "Xbar");
    expect_edim(gmm_band_tri_solve_band_rev(L, GMM_NOTRANS, B, Xn, Xn, NULL, L), "forward");
    expect_edim(gmm_band_tri_solve_band_rev(L, GMM_NOTRANS, B, X, X, NULL, Lb1), "Lbar");
    gmm_band_free(L);
    gmm_band_free(G);
    gmm_band_free(S);
    gmm_band_free(L6);
    gmm_band_free(B);
    gmm_band_free(X);
    gmm_band_free(Xn);
    gmm_band_free(Xt);
    gmm_band_free(Lb1);
}
END_TEST

START_TEST(test_solve_empty)
{
    gmm_band *L = gmm_band_alloc(0, 2, 0, GMM_BAND_LOWER);
    gmm_band *Lbar = gmm_band_alloc(0, 2, 0, GMM_BAND_LOWER);
    gmm_band *B = gmm_band_alloc(0, 1, 1, GMM_BAND_GENERAL);
    gmm_band *X = gmm_band_alloc(0, 1, 1, GMM_BAND_GENERAL);
    gmm_band *Bbar = gmm_band_alloc(0, 1, 1, GMM_BAND_GENERAL);
    double x[1] = {42.0}, g[1] = {0};
    for (int t = 0; t <= 1; t++) {
        gmm_trans tt = (gmm_trans)t;
        ck_assert_int_eq(gmm_band_tri_solve_vec(L, tt, x), GMM_OK);
        ck_assert_int_eq(gmm_band_tri_solve_mat(L, tt, 3, x, 0), GMM_OK);
        ck_assert_int_eq(gmm_band_tri_solve_vec_rev(L, tt, x, x, g, Lbar, NULL), GMM_OK);
        ck_assert_int_eq(gmm_band_tri_solve_mat_rev(L, tt, 2, x, 0, x, 0, g, 0, Lbar, NULL),
                         GMM_OK);
        ck_assert_int_eq(gmm_band_tri_solve_band(L, tt, B, X), GMM_OK);
        ck_assert_int_eq(gmm_band_tri_solve_band_rev(L, tt, B, X, X, Bbar, Lbar), GMM_OK);
    }
    ck_assert(x[0] == 42.0 && g[0] == 0.0);
    gmm_band_free(L);
    gmm_band_free(Lbar);
    gmm_band_free(B);
    gmm_band_free(X);
    gmm_band_free(Bbar);
}
END_TEST

Suite *band_solve_suite(void)
{
    Suite *s = suite_create("band_solve");
    TCase *tc = tcase_create("solve");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_solve_vec_forward);
    tcase_add_test(tc, test_solve_vec_fixed_bandwidths);
    tcase_add_test(tc, test_solve_vec_wide_large);
    tcase_add_test(tc, test_solve_vec_reach);
    tcase_add_test(tc, test_solve_mat_forward_and_rev);
    tcase_add_test(tc, test_solve_vec_rev_accumulates);
    tcase_add_test(tc, test_solve_vec_rev_set);
    tcase_add_test(tc, test_solve_vec_logdet);
    tcase_add_test(tc, test_solve_band_forward);
    tcase_add_test(tc, test_solve_band_rev);
    tcase_add_test(tc, test_solve_errors);
    tcase_add_test(tc, test_solve_empty);
    suite_add_tcase(s, tc);
    return s;
}
