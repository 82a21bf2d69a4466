/* graph_priv.h -- what the files of src/graph/ share and nobody else sees:
 * the label store and the edge-list core. */
#ifndef GMM_GRAPH_PRIV_H
#define GMM_GRAPH_PRIV_H

#include "gmm/graph.h"

/* Labels live in one arena (NUL-terminated strings at off[v]) with an
 * open-addressing hash (slot holds v + 1, 0 = empty; nslot a power of two
 * kept at least twice the number of labels).  ptr_cap is the capacity of the
 * graph's ptr array, so appending isolated nodes is amortised O(1). */
struct gmm_graph_labels {
    char *buf;
    size_t used, cap;
    size_t *off;
    size_t count, off_cap;
    size_t *slot;
    size_t nslot;
    size_t ptr_cap;
};

/* A new empty label store (NULL on allocation failure). */
gmm_graph_labels *graph_labels_alloc(size_t expect);
void graph_labels_free(gmm_graph_labels *L);
/* Find label s[0..len) (already trimmed); 1 and *v when present. */
int graph_labels_find(const gmm_graph_labels *L, const char *s, size_t len, size_t *v);
/* Find or insert; *v its index (insertion gives index count - 1 and sets
 * *inserted).  GMM_ENOMEM (store unchanged) on failure. */
gmm_status graph_labels_intern(gmm_graph_labels *L, const char *s, size_t len, size_t *v,
                               int *inserted);
/* Trim surrounding blanks: *len receives the trimmed length. */
const char *graph_label_trim(const char *s, size_t *len);

/* Fill g's CSR from an edge list; g->n (and g->labels, if any) already set,
 * the other arrays NULL.  The contract of gmm_graph_from_edges. */
gmm_status graph_build_csr(gmm_graph *g, size_t m, const size_t *ei, const size_t *ej,
                           const double *len, const char *file, const size_t *line);

#endif
