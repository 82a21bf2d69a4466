/* model_graph.c -- graphs from the model's tables (model.h): an edge list's
 * columns and a data file's node column as the label arrays graph.h takes,
 * with the table's file and lines for messages. */
#include "model_impl.h"

#include "gmm/alloc.h"
#include "gmm/io.h"

/* Column c of t as labels (store: t->nrow pointers into the cells). */
static gmm_graph_column table_column(const gmm_table *t, size_t c, const char **store)
{
    for (size_t r = 0; r < t->nrow; r++)
        store[r] = t->cell[r][c];
    return (gmm_graph_column){t->nrow, store, t->file, t->line, t->header[c]};
}

gmm_status gmm_mdl_graph_read(const gmm_table *t, const char *col_i, const char *col_j,
                              const char *col_len, int len_optional, gmm_graph **out)
{
    if (!t || !out)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_mdl_graph_read");
    *out = NULL;
    size_t ci, cj, cl = 0, m = t->nrow;
    int has_len = 0;
    gmm_status st;
    if ((st = gmm_table_column(t, col_i ? col_i : "i", &ci)) != GMM_OK ||
        (st = gmm_table_column(t, col_j ? col_j : "j", &cj)) != GMM_OK)
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
    const char **li = gmm_malloc(m, sizeof *li), **lj = gmm_malloc(m, sizeof *lj);
    double *len = has_len ? gmm_malloc(m, sizeof *len) : NULL;
    if (!li || !lj || (has_len && !len)) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory reading %zu edges", t->file, m);
        goto done;
    }
    gmm_graph_column a = table_column(t, ci, li), b = table_column(t, cj, lj);
    /* an empty node id before a malformed length, as a row reads */
    if ((st = gmm_graph_check_labels(&a, &b)) == GMM_OK &&
        (!has_len || (st = gmm_table_column_double(t, cl, 0, len)) == GMM_OK))
        st = gmm_graph_from_labels(&a, &b, len, out);
done:
    gmm_free(li);
    gmm_free(lj);
    gmm_free(len);
    return st;
}

gmm_status gmm_mdl_graph_attach(gmm_graph *g, const gmm_table *t, const char *col, int strict,
                                size_t *node, size_t **added, size_t *nadded)
{
    if (!g || !t || !col || !added || !nadded)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_mdl_graph_attach");
    *added = NULL;
    *nadded = 0;
    size_t c;
    gmm_status st = gmm_table_column(t, col, &c);
    if (st != GMM_OK)
        return st;
    const char **label = gmm_malloc(t->nrow, sizeof *label);
    if (!label)
        return gmm_error(GMM_ENOMEM, "%s: out of memory attaching nodes", t->file);
    gmm_graph_column nodes = table_column(t, c, label);
    st = gmm_graph_attach_nodes(g, &nodes, strict, node, added, nadded);
    gmm_free(label);
    return st;
}
