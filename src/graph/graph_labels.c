/* graph_table.c -- edge lists and node data from CSV tables (io.h): labels
 * to indices in order of appearance, every error at its file:line. */
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "graph_priv.h"

gmm_status gmm_graph_empty(gmm_graph **out)
{
    if (!out)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_graph_empty");
    gmm_graph *g = gmm_calloc(1, sizeof *g);
    if (g) {
        g->labels = graph_labels_alloc(16);
        g->ptr = gmm_calloc(2, sizeof *g->ptr);
    }
    if (!g || !g->labels || !g->ptr) {
        gmm_graph_free(g);
        *out = NULL;
        return gmm_error(GMM_ENOMEM, "graph: out of memory");
    }
    g->labels->ptr_cap = 2;
    *out = g;
    return GMM_OK;
}

gmm_status gmm_graph_read_table(const gmm_table *t, const char *col_i, const char *col_j,
                                const char *col_len, int len_optional, gmm_graph **out)
{
    if (!t || !out)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_graph_read_table");
    *out = NULL;
    if (!col_i)
        col_i = "i";
    if (!col_j)
        col_j = "j";
    size_t ci, cj, cl = 0, m = t->nrow;
    int has_len = 0;
    gmm_status st;
    if ((st = gmm_table_column(t, col_i, &ci)) != GMM_OK ||
        (st = gmm_table_column(t, col_j, &cj)) != GMM_OK)
        return st;
    if (col_len) {
        st = gmm_table_column(t, col_len, &cl);
        if (st == GMM_OK)
            has_len = 1;
        else if (len_optional)
            gmm_error_clear();
        else
            return st;
    }

    size_t *ei = gmm_malloc(m, sizeof *ei), *ej = gmm_malloc(m, sizeof *ej);
    double *len = has_len ? gmm_malloc(m, sizeof *len) : NULL;
    gmm_graph *g = gmm_calloc(1, sizeof *g);
    if (g)
        g->labels = graph_labels_alloc(m);
    if (!ei || !ej || (has_len && !len) || !g || !g->labels) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory reading %zu edges", t->file, m);
        goto done;
    }
    for (size_t r = 0; r < m; r++)
        for (int side = 0; side < 2; side++) {
            size_t c = side ? cj : ci, l, v;
            int inserted;
            const char *s = graph_label_trim(t->cell[r][c], &l);
            if (l == 0) {
                st = gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': empty node id", t->file,
                                  t->line[r], t->header[c]);
                goto done;
            }
            if (graph_labels_intern(g->labels, s, l, &v, &inserted) != GMM_OK) {
                st = gmm_error(GMM_ENOMEM, "%s: out of memory reading %zu edges", t->file, m);
                goto done;
            }
            (side ? ej : ei)[r] = v;
        }
    if (has_len && (st = gmm_table_column_double(t, cl, 0, len)) != GMM_OK)
        goto done;
    g->n = g->labels->count;
    st = graph_build_csr(g, m, ei, ej, len, t->file, t->line);

done:
    gmm_free(ei);
    gmm_free(ej);
    gmm_free(len);
    if (st != GMM_OK)
        gmm_graph_free(g);
    else
        *out = g;
    return st;
}

gmm_status gmm_graph_attach_nodes(gmm_graph *g, const gmm_table *t, const char *col,
                                  int strict, size_t *node, size_t **added, size_t *nadded)
{
    if (!g || !t || !col || (t->nrow && !node) || !added || !nadded)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_graph_attach_nodes");
    *added = NULL;
    *nadded = 0;
    size_t c, cap = 0, na = 0, *list = NULL;
    gmm_status st = gmm_table_column(t, col, &c);
    if (st != GMM_OK)
        return st;
    for (size_t r = 0; r < t->nrow; r++) {
        size_t l, v;
        const char *s = graph_label_trim(t->cell[r][c], &l);
        if (l == 0) {
            st = gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': empty node id", t->file,
                              t->line[r], t->header[c]);
            goto done;
        }
        if (gmm_graph_node_find(g, s, &v)) {
            node[r] = v;
            continue;
        }
        if (strict) {
            st = gmm_error_at(GMM_EPARSE, r, "%s:%zu: node '%s' is not in the edge list",
                              t->file, t->line[r], s);
            goto done;
        }
        if (na == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            size_t *nl = gmm_realloc(list, ncap, sizeof *nl);
            if (!nl) {
                st = gmm_error(GMM_ENOMEM, "%s: out of memory attaching nodes", t->file);
                goto done;
            }
            list = nl;
            cap = ncap;
        }
        if ((st = gmm_graph_node_add(g, s, &v)) != GMM_OK)
            goto done;
        list[na++] = v;
        node[r] = v;
    }
done:
    if (st != GMM_OK || na == 0) {
        gmm_free(list);
        list = NULL;
        if (st != GMM_OK)
            na = 0;
    }
    *added = list;
    *nadded = na;
    return st;
}
