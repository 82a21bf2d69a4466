/* obsmap.h -- the observation map: which latents each data row reads, and
 * with which coefficients (the rows h_r of the design matrix H, eta = H x).
 * A map is a view: it owns none of its arrays.  The index helpers are inline
 * because every row loop of the likelihoods and the solvers calls them. */
#ifndef GMM_OBSMAP_H
#define GMM_OBSMAP_H

#include <stddef.h>

/* Row r reads the latents offset[r] + p, 0 <= p < width, through entries k
 * in [gmm_obsmap_row_lo, gmm_obsmap_row_hi) of coef:
 *
 *   dense windows (rowptr NULL)   entries r width .. (r + 1) width, entry k
 *                                 at position p = k - r width
 *   sparse rows (rowptr nrows+1)  entries rowptr[r] .. rowptr[r + 1], entry k
 *                                 at position p = pos[k] (increasing in a row)
 *
 *   eta_r = sum_k coef[k] x[offset[r] + p(k)],  nnz = nrows width or rowptr[nrows]. */
typedef struct {
    size_t nrows, width;
    const size_t *offset;        /* nrows: the first latent each row reads */
    const size_t *rowptr, *pos;  /* sparse rows, or both NULL: dense windows */
    const double *coef;          /* nnz */
} gmm_obsmap;

/* The first of row r's entries in coef. */
static inline size_t gmm_obsmap_row_lo(const gmm_obsmap *m, size_t r)
{
    return m->rowptr ? m->rowptr[r] : r * m->width;
}
/* One past row r's last entry in coef. */
static inline size_t gmm_obsmap_row_hi(const gmm_obsmap *m, size_t r)
{
    return m->rowptr ? m->rowptr[r + 1] : (r + 1) * m->width;
}
/* The position in its row's window (0 .. width - 1) of entry k of the row
 * whose entries start at lo (gmm_obsmap_row_lo). */
static inline size_t gmm_obsmap_row_pos(const gmm_obsmap *m, size_t k, size_t lo)
{
    return m->pos ? m->pos[k] : k - lo;
}

/* Entries of coef in all: rowptr[nrows] or nrows width. */
size_t gmm_obsmap_nnz(const gmm_obsmap *m);
/* h_r'x: row r applied to the latents x.  O(entries of the row); inline,
 * as every likelihood row loop calls it. */
static inline double gmm_obsmap_row_dot(const gmm_obsmap *m, size_t r, const double *x)
{
    size_t lo = gmm_obsmap_row_lo(m, r), hi = gmm_obsmap_row_hi(m, r);
    const double *xo = x + m->offset[r];
    double s = 0.0;
    for (size_t k = lo; k < hi; k++)
        s += m->coef[k] * xo[gmm_obsmap_row_pos(m, k, lo)];
    return s;
}
/* y += a h_r: row r's transpose scaled by a, added into the latents y. */
void gmm_obsmap_row_axpy(const gmm_obsmap *m, size_t r, double a, double *y);
/* Row r's coefficients as a dense window h (width; zero where a sparse row
 * has no entry). */
void gmm_obsmap_row_window(const gmm_obsmap *m, size_t r, double *h);

#endif
