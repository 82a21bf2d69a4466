/* band.c -- allocation, views, copies and small helpers for gmm_band.
 * The storage layout and the symmetric sensitivity convention are described
 * in include/gmm/band.h. */
#include "gmm/band.h"

#include <string.h>

#include "gmm/alloc.h"

static size_t clamp_bw(size_t n, size_t bw) { return n == 0 ? 0 : (bw > n - 1 ? n - 1 : bw); }

size_t gmm_band_size(size_t n, size_t kl, size_t ku)
{
    kl = clamp_bw(n, kl);
    ku = clamp_bw(n, ku);
    return (kl + ku + 1) * n;
}

static gmm_status init_struct(gmm_band *b, double *data, size_t n, size_t kl, size_t ku,
                              gmm_band_kind kind)
{
    if (kind != GMM_BAND_GENERAL && kind != GMM_BAND_SYMMETRIC && kind != GMM_BAND_LOWER)
        return gmm_error(GMM_EINVAL, "band: unknown kind %d", (int)kind);
    if (kind != GMM_BAND_GENERAL && ku != 0)
        return gmm_error(GMM_EDIM, "band: symmetric or lower band needs ku = 0, got %zu", ku);
    b->n = n;
    b->kl = clamp_bw(n, kl);
    b->ku = clamp_bw(n, ku);
    b->ld = b->kl + b->ku + 1;
    b->kind = kind;
    b->data = data;
    b->owner = 0;
    return GMM_OK;
}

gmm_band *gmm_band_alloc(size_t n, size_t kl, size_t ku, gmm_band_kind kind)
{
    gmm_band *b = gmm_malloc(1, sizeof *b);
    if (!b) {
        gmm_error(GMM_ENOMEM, "band: out of memory allocating a %zu x %zu band", n, n);
        return NULL;
    }
    if (init_struct(b, NULL, n, kl, ku, kind) != GMM_OK) {
        gmm_free(b);
        return NULL;
    }
    b->data = gmm_calloc(b->ld * n, sizeof(double));
    if (!b->data) {
        gmm_error(GMM_ENOMEM, "band: out of memory allocating %zu x %zu doubles (n = %zu)",
                  b->ld, n, n);
        gmm_free(b);
        return NULL;
    }
    b->owner = 1;
    return b;
}

void gmm_band_free(gmm_band *b)
{
    if (!b)
        return;
    if (b->owner)
        gmm_free(b->data);
    gmm_free(b);
}

gmm_status gmm_band_view(gmm_band *view, double *data, size_t n, size_t kl, size_t ku,
                         gmm_band_kind kind)
{
    if (!view)
        return gmm_error(GMM_EINVAL, "band view: NULL view");
    return init_struct(view, data, n, kl, ku, kind);
}

void gmm_band_set_zero(gmm_band *b)
{
    if (b->n)
        memset(b->data, 0, b->ld * b->n * sizeof(double));
}

gmm_status gmm_band_set_kind(gmm_band *b, gmm_band_kind kind)
{
    if (kind != GMM_BAND_GENERAL && kind != GMM_BAND_SYMMETRIC && kind != GMM_BAND_LOWER)
        return gmm_error(GMM_EINVAL, "band: unknown kind %d", (int)kind);
    if (kind != GMM_BAND_GENERAL && b->ku != 0)
        return gmm_error(GMM_EDIM, "band: symmetric or lower band needs ku = 0, got %zu", b->ku);
    b->kind = kind;
    return GMM_OK;
}

gmm_status gmm_band_copy(gmm_band *dst, const gmm_band *src)
{
    if (dst->n != src->n || dst->kl != src->kl || dst->ku != src->ku)
        return gmm_error(GMM_EDIM, "band copy: shapes differ (n %zu/%zu, kl %zu/%zu, ku %zu/%zu)",
                         dst->n, src->n, dst->kl, src->kl, dst->ku, src->ku);
    if (dst != src && src->n)
        memmove(dst->data, src->data, src->ld * src->n * sizeof(double));
    dst->kind = src->kind;
    return GMM_OK;
}

static int kinds_compatible(const gmm_band *dst, const gmm_band *src)
{
    if (dst->kind == GMM_BAND_GENERAL)
        return 1;
    return src->kind == dst->kind || src->kind == GMM_BAND_GENERAL;
}

gmm_status gmm_band_copy_band(gmm_band *dst, const gmm_band *src)
{
    if (dst->n != src->n)
        return gmm_error(GMM_EDIM, "band copy: n differs (%zu vs %zu)", dst->n, src->n);
    if (!kinds_compatible(dst, src))
        return gmm_error(GMM_EDIM, "band copy: cannot copy kind %d into kind %d",
                         (int)src->kind, (int)dst->kind);
    if (dst == src)
        return GMM_OK;
    size_t n = dst->n;
    for (size_t j = 0; j < n; j++) {
        double *d = gmm_band_col(dst, j);
        size_t i0 = j >= dst->ku ? j - dst->ku : 0;
        size_t i1 = j + dst->kl < n ? j + dst->kl : n - 1;
        for (size_t i = i0; i <= i1; i++)
            d[i] = gmm_band_get(src, i, j);
    }
    return GMM_OK;
}

gmm_status gmm_band_axpy(double alpha, double offdiag, const gmm_band *X, gmm_band *Y)
{
    if (X->n != Y->n || X->ku || Y->ku || X->kind == GMM_BAND_GENERAL ||
        Y->kind == GMM_BAND_GENERAL)
        return gmm_error(GMM_EDIM, "band axpy: needs two lower bands of one n (%zu, %zu)", X->n,
                         Y->n);
    size_t n = X->n, kl = X->kl < Y->kl ? X->kl : Y->kl;
    double ao = offdiag * alpha;
    for (size_t j = 0; j < n; j++) {
        const double *x = gmm_band_col(X, j);
        double *y = gmm_band_col(Y, j);
        size_t i1 = j + kl < n - 1 ? j + kl : n - 1;
        y[j] += alpha * x[j];
        for (size_t i = j + 1; i <= i1; i++)
            y[i] += ao * x[i];
    }
    return GMM_OK;
}

gmm_status gmm_band_copy_band_rev(const gmm_band *dstbar, gmm_band *srcbar)
{
    if (dstbar->n != srcbar->n)
        return gmm_error(GMM_EDIM, "band copy rev: n differs (%zu vs %zu)", dstbar->n, srcbar->n);
    size_t n = srcbar->n;
    int fold = srcbar->kind == GMM_BAND_SYMMETRIC && dstbar->kind == GMM_BAND_GENERAL;
    if (!fold && dstbar->kl == srcbar->kl && dstbar->ku == srcbar->ku) {
        /* Same band (the marginal likelihood's P -> Q): add column ranges,
         * no per-entry band tests. */
        for (size_t j = 0; j < n; j++) {
            size_t i0 = j >= srcbar->ku ? j - srcbar->ku : 0;
            size_t i1 = j + srcbar->kl < n ? j + srcbar->kl : n - 1;
            double *s = gmm_band_col(srcbar, j);
            const double *d = gmm_band_col(dstbar, j);
            for (size_t i = i0; i <= i1; i++)
                s[i] += d[i];
        }
        return GMM_OK;
    }
    for (size_t j = 0; j < n; j++) {
        double *s = gmm_band_col(srcbar, j);
        size_t i0 = j >= srcbar->ku ? j - srcbar->ku : 0;
        size_t i1 = j + srcbar->kl < n ? j + srcbar->kl : n - 1;
        for (size_t i = i0; i <= i1; i++) {
            /* dstbar is read by stored slot: a SYMMETRIC dstbar is its own
             * convention already, so no reflection there. */
            double v = gmm_band_in_band(dstbar, i, j) ? *gmm_band_ptr(dstbar, i, j) : 0.0;
            if (fold && i != j && gmm_band_in_band(dstbar, j, i))
                v += *gmm_band_ptr(dstbar, j, i);
            s[i] += v;
        }
    }
    return GMM_OK;
}

static gmm_status check_cols(const char *who, const gmm_band *b, size_t j0, size_t w,
                             size_t ldb)
{
    if (b->ku != 0 || j0 > b->n || w > b->n - j0 || ldb < b->kl + 1)
        return gmm_error(GMM_EDIM, "band %s: columns %zu..+%zu of a %zu x %zu band (ku %zu) "
                                   "with block stride %zu < kl + 1 = %zu",
                         who, j0, w, b->n, b->n, b->ku, ldb, b->kl + 1);
    return GMM_OK;
}

/* With ku == 0, columns j0 .. j0+w-1 are w * ld consecutive doubles starting
 * at entry (j0, j0); every slot exists when the last column's bottom slot,
 * row j0 + w - 1 + kl, is inside the matrix. */
static int cols_whole(const gmm_band *b, size_t j0, size_t w, size_t ldb)
{
    return ldb == b->ld && j0 + w - 1 + b->kl < b->n;
}

gmm_status gmm_band_cols_set(gmm_band *b, size_t j0, size_t w, const double *blk, size_t ldb)
{
    gmm_status st = check_cols("cols_set", b, j0, w, ldb);
    if (st != GMM_OK || w == 0)
        return st;
    if (cols_whole(b, j0, w, ldb)) {
        memcpy(gmm_band_col(b, j0) + j0, blk, w * b->ld * sizeof *blk);
        return GMM_OK;
    }
    for (size_t c = 0; c < w; c++) {
        size_t j = j0 + c, cnt = b->n - j < b->ld ? b->n - j : b->ld;
        memcpy(gmm_band_col(b, j) + j, blk + c * ldb, cnt * sizeof *blk);
    }
    return GMM_OK;
}

gmm_status gmm_band_cols_acc(const gmm_band *b, size_t j0, size_t w, double *blk, size_t ldb)
{
    gmm_status st = check_cols("cols_acc", b, j0, w, ldb);
    if (st != GMM_OK || w == 0)
        return st;
    if (cols_whole(b, j0, w, ldb)) {
        const double *p = gmm_band_col(b, j0) + j0;
        for (size_t t = 0; t < w * b->ld; t++)
            blk[t] += p[t];
        return GMM_OK;
    }
    for (size_t c = 0; c < w; c++) {
        size_t j = j0 + c, cnt = b->n - j < b->ld ? b->n - j : b->ld;
        const double *p = gmm_band_col(b, j) + j;
        for (size_t s = 0; s < cnt; s++)
            blk[c * ldb + s] += p[s];
    }
    return GMM_OK;
}

void gmm_band_diag(const gmm_band *A, double *d)
{
    for (size_t i = 0; i < A->n; i++)
        d[i] = gmm_band_col(A, i)[i];
}

gmm_status gmm_band_transpose(gmm_band *B, const gmm_band *A)
{
    if (A->kind == GMM_BAND_SYMMETRIC)
        return gmm_error(GMM_EDIM, "band transpose: a symmetric band is its own transpose");
    if (B->kind != GMM_BAND_GENERAL || B->n != A->n || B->kl != A->ku || B->ku != A->kl)
        return gmm_error(GMM_EDIM,
                         "band transpose: B must be GENERAL %zu x %zu with kl %zu, ku %zu",
                         A->n, A->n, A->ku, A->kl);
    if (B == A)
        return gmm_error(GMM_EDIM, "band transpose: B must not alias A");
    size_t n = A->n;
    for (size_t j = 0; j < n; j++) {
        const double *a = gmm_band_col(A, j);
        size_t i0 = j >= A->ku ? j - A->ku : 0;
        size_t i1 = j + A->kl < n ? j + A->kl : n - 1;
        for (size_t i = i0; i <= i1; i++)
            *gmm_band_ptr(B, j, i) = a[i];
    }
    return GMM_OK;
}

gmm_status gmm_band_symmetrise(gmm_band *S, const gmm_band *A)
{
    if (S->kind != GMM_BAND_SYMMETRIC || A->kind == GMM_BAND_SYMMETRIC || S->n != A->n)
        return gmm_error(GMM_EDIM, "band symmetrise: S SYMMETRIC, A GENERAL/LOWER, same n");
    size_t n = S->n;
    for (size_t j = 0; j < n; j++) {
        double *s = gmm_band_col(S, j);
        size_t i1 = j + S->kl < n ? j + S->kl : n - 1;
        for (size_t i = j; i <= i1; i++)
            s[i] = 0.5 * (gmm_band_get(A, i, j) + gmm_band_get(A, j, i));
    }
    return GMM_OK;
}

gmm_status gmm_band_symmetrise_rev(const gmm_band *Sbar, gmm_band *Abar)
{
    if (Sbar->kind != GMM_BAND_SYMMETRIC || Abar->kind == GMM_BAND_SYMMETRIC ||
        Sbar->n != Abar->n)
        return gmm_error(GMM_EDIM, "band symmetrise rev: Sbar SYMMETRIC, Abar GENERAL/LOWER");
    size_t n = Sbar->n;
    for (size_t j = 0; j < n; j++) {
        const double *s = gmm_band_col(Sbar, j);
        size_t i1 = j + Sbar->kl < n ? j + Sbar->kl : n - 1;
        for (size_t i = j; i <= i1; i++) {
            if (i == j) {
                if (gmm_band_in_band(Abar, i, i))
                    *gmm_band_ptr(Abar, i, i) += s[i];
                continue;
            }
            if (gmm_band_in_band(Abar, i, j))
                *gmm_band_ptr(Abar, i, j) += 0.5 * s[i];
            if (gmm_band_in_band(Abar, j, i))
                *gmm_band_ptr(Abar, j, i) += 0.5 * s[i];
        }
    }
    return GMM_OK;
}

/* Visit the full-matrix entries of A's band (both triangles of a SYMMETRIC
 * A) and sum A(i,j) B(i,j). */
double gmm_band_dot(const gmm_band *A, const gmm_band *B)
{
    size_t n = A->n;
    double s = 0.0;
    if (B->n != n)
        return 0.0;
    for (size_t j = 0; j < n; j++) {
        const double *a = gmm_band_col(A, j);
        size_t i0 = j >= A->ku ? j - A->ku : 0;
        size_t i1 = j + A->kl < n ? j + A->kl : n - 1;
        for (size_t i = i0; i <= i1; i++) {
            double v = a[i] * gmm_band_get(B, i, j);
            s += (A->kind == GMM_BAND_SYMMETRIC && i != j) ? 2.0 * v : v;
        }
    }
    return s;
}

/* Xbar += cbar * Y in Xbar's stored slots, under the symmetric convention. */
static void dot_rev_one(const gmm_band *Y, double cbar, gmm_band *Xbar)
{
    size_t n = Xbar->n;
    for (size_t j = 0; j < n; j++) {
        double *x = gmm_band_col(Xbar, j);
        size_t i0 = j >= Xbar->ku ? j - Xbar->ku : 0;
        size_t i1 = j + Xbar->kl < n ? j + Xbar->kl : n - 1;
        for (size_t i = i0; i <= i1; i++) {
            double v = gmm_band_get(Y, i, j);
            if (Xbar->kind == GMM_BAND_SYMMETRIC && i != j)
                v += gmm_band_get(Y, j, i);
            x[i] += cbar * v;
        }
    }
}

gmm_status gmm_band_dot_rev(const gmm_band *A, const gmm_band *B, double cbar, gmm_band *Abar,
                            gmm_band *Bbar)
{
    if (A->n != B->n || (Abar && Abar->n != A->n) || (Bbar && Bbar->n != B->n))
        return gmm_error(GMM_EDIM, "band dot rev: n differs");
    if (Abar)
        dot_rev_one(B, cbar, Abar);
    if (Bbar)
        dot_rev_one(A, cbar, Bbar);
    return GMM_OK;
}
