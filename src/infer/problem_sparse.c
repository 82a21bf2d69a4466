/* problem_sparse.c -- predictions on THE SPARSE PATH (problem.h,
 * gmm_problem_alloc_sparse), where no covariance band is formed: the mode
 * and the covariance's entries on the pattern of the observed rows' h_r h_r'
 * and the diagonal (gmm_laplace_posterior_sparse, by Takahashi's recurrence
 * on the factor of P, whose pattern contains that one), and for a linear
 * form a'x whose pairs of latents leave it, a'Sigma a by one posterior
 * solve (gmm_laplace_posterior_solve: P's factor, and the conditioning on
 * the constraints where there are). */
#include "gmm/problem.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/laplace.h"
#include "gmm/sparse.h"
#include "problem_impl.h"

/* The covariance's pattern: the diagonal and the observed rows' pairs. */
static gmm_status cov_pattern(gmm_problem *p)
{
    const gmm_obsmap *map = &p->lobs.map;
    size_t ne = 0;
    for (size_t i = 0; i < map->nrows; i++) {
        size_t w = gmm_obsmap_row_hi(map, i) - gmm_obsmap_row_lo(map, i);
        ne += w * (w - 1) / 2;
    }
    size_t *ei = gmm_malloc(2 * (ne ? ne : 1), sizeof *ei);
    if (!ei)
        return gmm_error(GMM_ENOMEM, "out of memory for the posterior (%zu latents)", p->n);
    size_t *ej = ei + (ne ? ne : 1), k = 0;
    for (size_t i = 0; i < map->nrows; i++) {
        size_t lo = gmm_obsmap_row_lo(map, i), hi = gmm_obsmap_row_hi(map, i);
        for (size_t a = lo; a < hi; a++)
            for (size_t c = lo; c < a; c++) {
                ei[k] = map->offset[i] + gmm_obsmap_row_pos(map, a, lo);
                ej[k++] = map->offset[i] + gmm_obsmap_row_pos(map, c, lo);
            }
    }
    gmm_status st = gmm_sparse_from_entries(p->n, ne, ei, ej, &p->Ss);
    gmm_free(ei);
    return st;
}

/* The posterior at theta: its mode into mean (n) and p->Ss's entries. */
static gmm_status posterior(gmm_problem *p, const double *theta, double *mean)
{
    gmm_status st;
    /* the pattern reads the observed rows' map, which the first posterior
     * makes (a Gaussian's Laplace workspace comes with it) */
    if ((st = gmm_problem_posterior(p, theta, NULL, NULL)))
        return st;
    if (!p->Ss && (st = cov_pattern(p)))
        return st;
    return gmm_laplace_posterior_sparse(p->lap, mean, p->Ss);
}

/* var = a'Sigma a for a = sum_k w[k] e_idx[k] (ne entries): from p->Ss
 * where every pair is stored, else a'(Sigma a) (work: n). */
static gmm_status form_var(gmm_problem *p, size_t ne, const size_t *idx, const double *w,
                           double *work, double *var)
{
    double v = 0.0;
    int inside = 1;
    for (size_t a = 0; a < ne && inside; a++)
        for (size_t c = 0; c <= a; c++) {
            size_t k = gmm_sparse_find(p->Ss, idx[a], idx[c]);
            if (k == SIZE_MAX) {
                inside = 0;
                break;
            }
            v += (a == c ? 1.0 : 2.0) * w[a] * w[c] * p->Ss->val[k];
        }
    if (inside) {
        *var = v;
        return GMM_OK;
    }
    memset(work, 0, p->n * sizeof *work);
    for (size_t a = 0; a < ne; a++)
        work[idx[a]] += w[a];
    gmm_status st = gmm_laplace_posterior_solve(p->lap, work);
    v = 0.0;
    for (size_t a = 0; !st && a < ne; a++)
        v += w[a] * work[idx[a]];
    *var = v;
    return st;
}

gmm_status problem_sparse_forms(gmm_problem *p, const double *theta, size_t nq,
                                const size_t *ptr, const size_t *idx, const double *w,
                                double *mean, double *var)
{
    double *mu = gmm_malloc(2 * (p->n ? p->n : 1), sizeof *mu);
    if (!mu)
        return gmm_error(GMM_ENOMEM, "out of memory for the posterior (%zu latents)", p->n);
    gmm_status st = posterior(p, theta, mu);
    for (size_t q = 0; !st && q < nq; q++) {
        double m = 0.0;
        for (size_t k = ptr[q]; k < ptr[q + 1]; k++)
            m += w[k] * mu[idx[k]];
        mean[q] = m;
        st = form_var(p, ptr[q + 1] - ptr[q], idx + ptr[q], w + ptr[q], mu + p->n, &var[q]);
    }
    gmm_free(mu);
    return st;
}

gmm_status problem_sparse_rows(gmm_problem *p, const double *theta, double *mean, double *var)
{
    /* the rows as linear forms h_r'x, their coefficients at theta */
    size_t nz = gmm_obsmap_nnz(&p->map);
    size_t *ptr = gmm_malloc(p->nrows + 1, sizeof *ptr), *idx = gmm_malloc(nz ? nz : 1, sizeof *idx);
    gmm_status st = GMM_OK;
    if (!ptr || !idx)
        st = gmm_error(GMM_ENOMEM, "out of memory for the predictions (%zu rows)", p->nrows);
    if (!st && gmm_latent_obs_varies(p->lat))
        st = gmm_latent_obs_values(p->lat, theta, p->coef_all);
    const size_t *off = gmm_latent_obs_offset(p->lat);
    for (size_t r = 0; !st && r < p->nrows; r++) {
        size_t lo = gmm_obsmap_row_lo(&p->map, r), hi = gmm_obsmap_row_hi(&p->map, r);
        ptr[r] = lo;
        for (size_t k = lo; k < hi; k++)
            idx[k] = off[r] + gmm_obsmap_row_pos(&p->map, k, lo);
    }
    if (!st) {
        ptr[p->nrows] = nz;
        st = problem_sparse_forms(p, theta, p->nrows, ptr, idx, p->coef_all, mean, var);
    }
    if (!st && p->ncoef) {
        gmm_problem_offsets(p, theta, p->off);
        for (size_t r = 0; r < p->nrows; r++)
            mean[r] += p->off[r];
    }
    gmm_free(ptr);
    gmm_free(idx);
    return st;
}

gmm_status problem_sparse_nodes(gmm_problem *p, const double *theta, double *mean, double *var)
{
    double *mu = gmm_malloc(p->n ? p->n : 1, sizeof *mu);
    if (!mu)
        return gmm_error(GMM_ENOMEM, "out of memory for the posterior (%zu latents)", p->n);
    gmm_status st = posterior(p, theta, mu);
    for (size_t v = 0; !st && v < p->n; v++) {
        size_t r = gmm_latent_node_index(p->lat, v);
        mean[v] = mu[r];
        var[v] = p->Ss->val[p->Ss->colptr[r]]; /* the diagonal comes first */
    }
    gmm_free(mu);
    return st;
}
