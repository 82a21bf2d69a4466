/* graph_labels.c -- graphs whose nodes are labels: an edge list given by
 * its ends' labels, and rows attached to the nodes of their labels, every
 * error at its file:line (graph.h: NODES AND LABELS). */
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

static const char *column_file(const gmm_graph_column *c, const char *dflt)
{
    return c->file ? c->file : dflt;
}

/* "FILE:LINE: column 'C': empty node id" for row r of c ("FILE: NOUN R:
 * ..." without lines). */
static gmm_status empty_label(const gmm_graph_column *c, size_t r, const char *dflt,
                              const char *noun)
{
    if (c->line)
        return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': empty node id",
                            column_file(c, dflt), c->line[r], c->col);
    return gmm_error_at(GMM_EPARSE, r, "%s: %s %zu: column '%s': empty node id",
                        column_file(c, dflt), noun, r, c->col);
}

static int column_ok(const gmm_graph_column *c)
{
    return c && c->col && (c->n == 0 || c->label);
}

gmm_status gmm_graph_check_labels(const gmm_graph_column *ci, const gmm_graph_column *cj)
{
    if (!column_ok(ci) || !column_ok(cj) || ci->n != cj->n)
        return gmm_error(GMM_EINVAL, "graph: NULL argument or columns of unequal length to "
                                     "gmm_graph_check_labels");
    for (size_t r = 0; r < ci->n; r++)
        for (int side = 0; side < 2; side++) {
            const gmm_graph_column *c = side ? cj : ci;
            size_t l;
            graph_label_trim(c->label[r], &l);
            if (l == 0)
                return empty_label(c, r, "edge list", "edge");
        }
    return GMM_OK;
}

gmm_status gmm_graph_from_labels(const gmm_graph_column *ci, const gmm_graph_column *cj,
                                 const double *len, gmm_graph **out)
{
    if (!out)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_graph_from_labels");
    *out = NULL;
    gmm_status st = gmm_graph_check_labels(ci, cj);
    if (st != GMM_OK)
        return st;
    size_t m = ci->n;
    const char *file = column_file(ci, "edge list");
    size_t *ei = gmm_malloc(m, sizeof *ei), *ej = gmm_malloc(m, sizeof *ej);
    gmm_graph *g = gmm_calloc(1, sizeof *g);
    if (g)
        g->labels = graph_labels_alloc(m);
    if (!ei || !ej || !g || !g->labels) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory reading %zu edges", file, m);
        goto done;
    }
    for (size_t r = 0; r < m; r++)
        for (int side = 0; side < 2; side++) {
            size_t l, v;
            int inserted;
            const char *s = graph_label_trim((side ? cj : ci)->label[r], &l);
            if (graph_labels_intern(g->labels, s, l, &v, &inserted) != GMM_OK) {
                st = gmm_error(GMM_ENOMEM, "%s: out of memory reading %zu edges", file, m);
                goto done;
            }
            (side ? ej : ei)[r] = v;
        }
    g->n = g->labels->count;
    st = graph_build_csr(g, m, ei, ej, len, ci->file, ci->line);

done:
    gmm_free(ei);
    gmm_free(ej);
    if (st != GMM_OK)
        gmm_graph_free(g);
    else
        *out = g;
    return st;
}

gmm_status gmm_graph_attach_nodes(gmm_graph *g, const gmm_graph_column *c, int strict,
                                  size_t *node, size_t **added, size_t *nadded)
{
    if (!g || !column_ok(c) || (c->n && !node) || !added || !nadded)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_graph_attach_nodes");
    *added = NULL;
    *nadded = 0;
    const char *file = column_file(c, "node list");
    size_t cap = 0, na = 0, *list = NULL;
    gmm_status st = GMM_OK;
    for (size_t r = 0; r < c->n; r++) {
        size_t l, v;
        const char *s = graph_label_trim(c->label[r], &l);
        if (l == 0) {
            st = empty_label(c, r, "node list", "row");
            goto done;
        }
        if (gmm_graph_node_find(g, s, &v)) {
            node[r] = v;
            continue;
        }
        if (strict) {
            st = c->line ? gmm_error_at(GMM_EPARSE, r, "%s:%zu: node '%s' is not in the edge "
                                                       "list",
                                        file, c->line[r], s)
                         : gmm_error_at(GMM_EPARSE, r, "%s: row %zu: node '%s' is not in the "
                                                       "edge list",
                                        file, r, s);
            goto done;
        }
        if (na == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            size_t *nl = gmm_realloc(list, ncap, sizeof *nl);
            if (!nl) {
                st = gmm_error(GMM_ENOMEM, "%s: out of memory attaching nodes", file);
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
