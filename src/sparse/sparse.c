/* sparse.c -- symmetric sparse matrices as their lower triangle by columns
 * (sparse.h): building a pattern from entries, the union of two patterns,
 * lookup and the product with a vector.
 *
 * Patterns are built by two stable counting sorts (by row, then by column),
 * as CSparse's cs_compress and cs_transpose do, so that rows come out
 * ascending within each column without a comparison sort: O(n + m). */
#include "gmm/sparse.h"

#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"

/* An n x n matrix with room for nnz entries, values 0; NULL when out of
 * memory (nothing recorded: the callers say what they were making). */
static gmm_sparse *sparse_alloc(size_t n, size_t nnz)
{
    gmm_sparse *A = gmm_calloc(1, sizeof *A);
    if (!A)
        return NULL;
    A->n = n;
    A->nnz = nnz;
    A->colptr = gmm_calloc(n + 1, sizeof *A->colptr);
    A->rowind = gmm_malloc(nnz, sizeof *A->rowind);
    A->val = gmm_calloc(nnz, sizeof *A->val);
    if (!A->colptr || !A->rowind || !A->val) {
        gmm_sparse_free(A);
        return NULL;
    }
    return A;
}

void gmm_sparse_free(gmm_sparse *A)
{
    if (!A)
        return;
    gmm_free(A->colptr);
    gmm_free(A->rowind);
    gmm_free(A->val);
    gmm_free(A);
}

gmm_status gmm_sparse_from_entries(size_t n, size_t m, const size_t *ei, const size_t *ej,
                                   gmm_sparse **out)
{
    if (!out || (m && (!ei || !ej)))
        return gmm_error(GMM_EINVAL, "sparse: NULL argument");
    *out = NULL;
    for (size_t k = 0; k < m; k++)
        if (ei[k] >= n || ej[k] >= n)
            return gmm_error_at(GMM_EINVAL, k, "sparse: entry %zu is (%zu, %zu), outside %zu x %zu",
                                k, ei[k], ej[k], n, n);
    gmm_status st = GMM_OK;
    size_t t = n + m; /* the diagonal, then the entries, each as (row >= col) */
    size_t *cnt = gmm_calloc(n + 1, sizeof *cnt);
    size_t *rcol = gmm_malloc(t, sizeof *rcol); /* columns in row order */
    size_t *rrow = gmm_malloc(t, sizeof *rrow);
    size_t *crow = gmm_malloc(t, sizeof *crow); /* rows in column order */
    gmm_sparse *A = NULL;
    if (!cnt || !rcol || !rrow || !crow) {
        st = gmm_error(GMM_ENOMEM, "sparse: out of memory for %zu entries", t);
        goto done;
    }
#define ROW(k) ((k) < n ? (k) : (ei[(k) - n] > ej[(k) - n] ? ei[(k) - n] : ej[(k) - n]))
#define COL(k) ((k) < n ? (k) : (ei[(k) - n] < ej[(k) - n] ? ei[(k) - n] : ej[(k) - n]))
    /* Sort by row (counting sort; cnt becomes the rows' starts). */
    for (size_t k = 0; k < t; k++)
        cnt[ROW(k) + 1]++;
    for (size_t i = 0; i < n; i++)
        cnt[i + 1] += cnt[i];
    for (size_t k = 0; k < t; k++) {
        size_t p = cnt[ROW(k)]++;
        rrow[p] = ROW(k);
        rcol[p] = COL(k);
    }
#undef ROW
#undef COL
    /* Then stably by column: rows ascend within each column, the diagonal
     * (the smallest row of its column) first. */
    memset(cnt, 0, (n + 1) * sizeof *cnt);
    for (size_t p = 0; p < t; p++)
        cnt[rcol[p] + 1]++;
    for (size_t j = 0; j < n; j++)
        cnt[j + 1] += cnt[j];
    for (size_t p = 0; p < t; p++)
        crow[cnt[rcol[p]]++] = rrow[p];
    /* cnt[j] is now the end of column j; merge repeats in place. */
    size_t nnz = 0, start = 0;
    for (size_t j = 0; j < n; j++) {
        size_t end = cnt[j], col_start = nnz;
        for (size_t p = start; p < end; p++)
            if (nnz == col_start || crow[nnz - 1] != crow[p])
                crow[nnz++] = crow[p];
        cnt[j] = col_start; /* column j's start in the merged list */
        start = end;
    }
    if (!(A = sparse_alloc(n, nnz))) {
        st = gmm_error(GMM_ENOMEM, "sparse: out of memory for %zu entries", nnz);
        goto done;
    }
    memcpy(A->colptr, cnt, n * sizeof *cnt);
    A->colptr[n] = nnz;
    memcpy(A->rowind, crow, nnz * sizeof *crow);
    *out = A;
done:
    gmm_free(cnt);
    gmm_free(rcol);
    gmm_free(rrow);
    gmm_free(crow);
    return st;
}

/* The merge of two ascending row lists, written to out when not NULL;
 * returns its length. */
static size_t merge_rows(const size_t *a, size_t na, const size_t *b, size_t nb, size_t *out)
{
    size_t p = 0, q = 0, k = 0;
    while (p < na || q < nb) {
        size_t r;
        if (q == nb || (p < na && a[p] < b[q]))
            r = a[p++];
        else if (p == na || b[q] < a[p])
            r = b[q++];
        else {
            r = a[p++];
            q++;
        }
        if (out)
            out[k] = r;
        k++;
    }
    return k;
}

gmm_status gmm_sparse_union(const gmm_sparse *A, const gmm_sparse *B, gmm_sparse **out)
{
    if (!A || !B || !out)
        return gmm_error(GMM_EINVAL, "sparse union: NULL argument");
    *out = NULL;
    if (A->n != B->n)
        return gmm_error(GMM_EDIM, "sparse union: orders %zu and %zu differ", A->n, B->n);
    size_t n = A->n, nnz = 0;
    for (size_t j = 0; j < n; j++)
        nnz += merge_rows(A->rowind + A->colptr[j], A->colptr[j + 1] - A->colptr[j],
                          B->rowind + B->colptr[j], B->colptr[j + 1] - B->colptr[j], NULL);
    gmm_sparse *C = sparse_alloc(n, nnz);
    if (!C)
        return gmm_error(GMM_ENOMEM, "sparse union: out of memory for %zu entries", nnz);
    for (size_t j = 0; j < n; j++)
        C->colptr[j + 1] =
            C->colptr[j] + merge_rows(A->rowind + A->colptr[j], A->colptr[j + 1] - A->colptr[j],
                                      B->rowind + B->colptr[j], B->colptr[j + 1] - B->colptr[j],
                                      C->rowind + C->colptr[j]);
    *out = C;
    return GMM_OK;
}

gmm_sparse *gmm_sparse_alloc_like(const gmm_sparse *A)
{
    if (!A) {
        gmm_error(GMM_EINVAL, "sparse: NULL argument");
        return NULL;
    }
    gmm_sparse *B = sparse_alloc(A->n, A->nnz);
    if (!B) {
        gmm_error(GMM_ENOMEM, "sparse: out of memory for %zu entries", A->nnz);
        return NULL;
    }
    memcpy(B->colptr, A->colptr, (A->n + 1) * sizeof *B->colptr);
    memcpy(B->rowind, A->rowind, A->nnz * sizeof *B->rowind);
    return B;
}

void gmm_sparse_set_zero(gmm_sparse *A)
{
    if (A && A->nnz)
        memset(A->val, 0, A->nnz * sizeof *A->val);
}

size_t gmm_sparse_find(const gmm_sparse *A, size_t i, size_t j)
{
    if (i < j) {
        size_t t = i;
        i = j;
        j = t;
    }
    if (!A || i >= A->n)
        return SIZE_MAX;
    size_t lo = A->colptr[j], hi = A->colptr[j + 1]; /* search [lo, hi) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (A->rowind[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < A->colptr[j + 1] && A->rowind[lo] == i ? lo : SIZE_MAX;
}

void gmm_sparse_symv(const gmm_sparse *A, const double *x, double *y)
{
    size_t n = A->n;
    memset(y, 0, n * sizeof *y);
    for (size_t j = 0; j < n; j++) {
        double xj = x[j], yj = 0.0;
        for (size_t p = A->colptr[j]; p < A->colptr[j + 1]; p++) {
            size_t i = A->rowind[p];
            double a = A->val[p];
            if (i == j) {
                yj += a * xj;
            } else {
                y[i] += a * xj;
                yj += a * x[i];
            }
        }
        y[j] += yj;
    }
}
