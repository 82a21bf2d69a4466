/* latent_sparse.c -- the sparse prior's patterns and their maps
 * (latent_sparse.h). */
#include "latent_sparse.h"

#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"

gmm_status latent_sparse_init(latent_sparse *s, size_t n, size_t m, const size_t *ei,
                              const size_t *ej)
{
    gmm_status st;
    memset(s, 0, sizeof *s);
    if ((st = gmm_sparse_from_entries(n, m, ei, ej, &s->Q)))
        return st;
    if (!(s->Qbar = gmm_sparse_alloc_like(s->Q))) {
        latent_sparse_free(s);
        return gmm_error(GMM_ENOMEM, "out of memory for the prior's pattern (n = %zu)", n);
    }
    return GMM_OK;
}

void latent_sparse_free(latent_sparse *s)
{
    if (!s)
        return;
    gmm_sparse_free(s->Q);
    gmm_sparse_free(s->Qbar);
    for (size_t i = 0; i < LATENT_SPARSE_NMAP; i++)
        gmm_free(s->map[i].at);
    memset(s, 0, sizeof *s);
}

gmm_status latent_sparse_find(const gmm_sparse *A, size_t m, const size_t *ei,
                              const size_t *ej, size_t *pos)
{
    for (size_t k = 0; k < m; k++)
        if ((pos[k] = gmm_sparse_find(A, ei[k], ej[k])) == SIZE_MAX)
            return gmm_error(GMM_EDIM, "the pattern misses entry (%zu, %zu) of the prior's "
                                       "precision",
                             ei[k], ej[k]);
    return GMM_OK;
}

gmm_status latent_sparse_pattern(const latent_sparse *s, gmm_sparse **out)
{
    if (!(*out = gmm_sparse_alloc_like(s->Q)))
        return gmm_error(GMM_ENOMEM, "out of memory for the prior's pattern (%zu entries)",
                         s->Q->nnz);
    return GMM_OK;
}

/* The map still holds for A: every own entry lands in its column of A on
 * its row. */
static int map_holds(const latent_sparse_map *p, const gmm_sparse *own, const gmm_sparse *A)
{
    if (p->colptr != A->colptr || p->rowind != A->rowind || p->n != A->n || p->nnz != A->nnz)
        return 0;
    for (size_t j = 0; j < own->n; j++)
        for (size_t k = own->colptr[j]; k < own->colptr[j + 1]; k++) {
            size_t a = p->at[k];
            if (a < A->colptr[j] || a >= A->colptr[j + 1] || A->rowind[a] != own->rowind[k])
                return 0;
        }
    return 1;
}

/* The map of own entries into A's pattern: a kept one, or a new one in
 * the slot replaced next. */
static gmm_status map_for(latent_sparse *s, const gmm_sparse *A, const size_t **at)
{
    const gmm_sparse *own = s->Q;
    if (A->n != own->n)
        return gmm_error(GMM_EDIM, "the prior's precision is %zu x %zu, not %zu x %zu",
                         own->n, own->n, A->n, A->n);
    for (size_t i = 0; i < LATENT_SPARSE_NMAP; i++)
        if (s->map[i].at && map_holds(&s->map[i], own, A)) {
            *at = s->map[i].at;
            return GMM_OK;
        }
    latent_sparse_map *p = &s->map[s->next];
    s->next = (s->next + 1) % LATENT_SPARSE_NMAP;
    if (!p->at && !(p->at = gmm_malloc(own->nnz ? own->nnz : 1, sizeof *p->at)))
        return gmm_error(GMM_ENOMEM, "out of memory for the prior's pattern map");
    p->colptr = NULL; /* invalid until filled */
    for (size_t j = 0; j < own->n; j++)
        for (size_t k = own->colptr[j]; k < own->colptr[j + 1]; k++)
            if ((p->at[k] = gmm_sparse_find(A, own->rowind[k], j)) == SIZE_MAX)
                return gmm_error(GMM_EDIM, "the pattern misses entry (%zu, %zu) of the prior's "
                                           "precision",
                                 own->rowind[k], j);
    p->colptr = A->colptr;
    p->rowind = A->rowind;
    p->n = A->n;
    p->nnz = A->nnz;
    *at = p->at;
    return GMM_OK;
}

gmm_status latent_sparse_put(latent_sparse *s, gmm_sparse *A)
{
    const size_t *at;
    gmm_status st = map_for(s, A, &at);
    if (st)
        return st;
    gmm_sparse_set_zero(A);
    for (size_t k = 0; k < s->Q->nnz; k++)
        A->val[at[k]] = s->Q->val[k];
    return GMM_OK;
}

gmm_status latent_sparse_get(latent_sparse *s, const gmm_sparse *Abar)
{
    const size_t *at;
    gmm_status st = map_for(s, Abar, &at);
    if (st)
        return st;
    for (size_t k = 0; k < s->Q->nnz; k++)
        s->Qbar->val[k] = Abar->val[at[k]];
    return GMM_OK;
}
