/* latent_sparse.h -- the prior in sparse storage (latent.h) as the families
 * with one share it: Q(theta) assembled into the family's own pattern
 * (symbolic work once, values per theta), then handed to whatever pattern
 * the caller keeps Q in (its own copy, or P's, which contains it) by a map
 * of positions found once per pattern seen; the adjoint gathered back the
 * same way.  Private to src/model/. */
#ifndef GMM_LATENT_SPARSE_H
#define GMM_LATENT_SPARSE_H

#include <stddef.h>

#include "gmm/sparse.h"
#include "gmm/status.h"

/* Own entry k sits at position at[k] of the pattern with these arrays
 * (their addresses tell patterns apart; each use re-checks the rows, so a
 * pattern freed and another allocated at the same place is caught). */
typedef struct {
    const size_t *colptr, *rowind;
    size_t n, nnz;
    size_t *at;
} latent_sparse_map;

#define LATENT_SPARSE_NMAP 4

typedef struct {
    gmm_sparse *Q;    /* own pattern: the last assembly's values */
    gmm_sparse *Qbar; /* own pattern: the last gathered adjoint */
    latent_sparse_map map[LATENT_SPARSE_NMAP];
    size_t next;      /* the map replaced when a new pattern comes */
} latent_sparse;

/* s's own pattern: the diagonal and the m entries (ei[k], ej[k]) (either
 * order, repeats merged), values 0.  GMM_ENOMEM.  O(n + m log m). */
gmm_status latent_sparse_init(latent_sparse *s, size_t n, size_t m, const size_t *ei,
                              const size_t *ej);
void latent_sparse_free(latent_sparse *s); /* s's members; NULL-safe */

/* pos[k] = the position of (ei[k], ej[k]) in A (gmm_sparse_find); GMM_EDIM
 * naming the entry when A misses it.  O(m log). */
gmm_status latent_sparse_find(const gmm_sparse *A, size_t m, const size_t *ei,
                              const size_t *ej, size_t *pos);

/* A copy of the own pattern, values 0, into *out (the caller frees it). */
gmm_status latent_sparse_pattern(const latent_sparse *s, gmm_sparse **out);
/* A = s->Q on A's pattern, 0 at A's other entries.  GMM_EDIM when A misses
 * an entry of the own pattern; GMM_ENOMEM.  O(nnz) (+ O(nnz log) for a
 * pattern not seen before). */
gmm_status latent_sparse_put(latent_sparse *s, gmm_sparse *A);
/* s->Qbar = Abar's entries on the own pattern (Abar's others ignored).
 * Errors as latent_sparse_put. */
gmm_status latent_sparse_get(latent_sparse *s, const gmm_sparse *Abar);

#endif
