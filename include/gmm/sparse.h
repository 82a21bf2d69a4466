/* sparse.h -- symmetric sparse matrices stored as their lower triangle by
 * columns (compressed sparse column), the storage of the sparse path beside
 * band.h: for precisions whose band is wide (crossed random effects, 2-D
 * lattices), where a fill-reducing ordering and a supernodal Cholesky
 * (factor.h, gmm_factor_sparse_alloc) cost a fraction of the band's.  A
 * pattern is made once per model (symbolic work) and its values are
 * rewritten at every evaluation (numeric work). */
#ifndef GMM_SPARSE_H
#define GMM_SPARSE_H

#include <stddef.h>

#include "gmm/status.h"

/* Column j's entries are rowind/val[colptr[j] .. colptr[j + 1]), rows
 * ascending, the diagonal first: every diagonal entry is stored, and only
 * rows i >= j.  A symmetric matrix's (i, j) and (j, i) are one entry. */
typedef struct {
    size_t n;       /* order */
    size_t nnz;     /* stored entries */
    size_t *colptr; /* n + 1 */
    size_t *rowind; /* nnz */
    double *val;    /* nnz */
} gmm_sparse;

/* The pattern of the diagonal and the m entries (ei[k], ej[k]) (either
 * triangle, repeats merged, all < n), values 0.  GMM_EINVAL (an index out
 * of range: gmm_error_index the entry), GMM_ENOMEM.  O(n + m log m). */
gmm_status gmm_sparse_from_entries(size_t n, size_t m, const size_t *ei, const size_t *ej,
                                   gmm_sparse **out);
/* The union of two patterns of one order, values 0. */
gmm_status gmm_sparse_union(const gmm_sparse *A, const gmm_sparse *B, gmm_sparse **out);
/* A's pattern, values 0.  NULL + GMM_ENOMEM. */
gmm_sparse *gmm_sparse_alloc_like(const gmm_sparse *A);
void gmm_sparse_free(gmm_sparse *A); /* NULL-safe */
void gmm_sparse_set_zero(gmm_sparse *A);

/* The position of entry (i, j) (either order) in rowind and val, SIZE_MAX
 * when it is not stored.  O(log of the column's length). */
size_t gmm_sparse_find(const gmm_sparse *A, size_t i, size_t j);
/* y = A x for the symmetric A (x, y: n, distinct).  O(nnz). */
void gmm_sparse_symv(const gmm_sparse *A, const double *x, double *y);

#endif
