/* obsmap.c -- the observation map's row operations (obsmap.h). */
#include <string.h>

#include "gmm/obsmap.h"

size_t gmm_obsmap_nnz(const gmm_obsmap *m)
{
    return m->rowptr ? m->rowptr[m->nrows] : m->nrows * m->width;
}

void gmm_obsmap_row_axpy(const gmm_obsmap *m, size_t r, double a, double *y)
{
    size_t lo = gmm_obsmap_row_lo(m, r), hi = gmm_obsmap_row_hi(m, r);
    double *yo = y + m->offset[r];
    for (size_t k = lo; k < hi; k++)
        yo[gmm_obsmap_row_pos(m, k, lo)] += a * m->coef[k];
}

void gmm_obsmap_row_window(const gmm_obsmap *m, size_t r, double *h)
{
    size_t lo = gmm_obsmap_row_lo(m, r), hi = gmm_obsmap_row_hi(m, r);
    if (!m->pos) {
        memcpy(h, m->coef + lo, m->width * sizeof *h);
        return;
    }
    memset(h, 0, m->width * sizeof *h);
    for (size_t k = lo; k < hi; k++)
        h[m->pos[k]] = m->coef[k];
}
