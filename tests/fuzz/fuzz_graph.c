/* fuzz_graph.c -- edge lists as `order` and `fit --graph` read them: the
 * CSV reader, then gmm_mdl_graph_read on the first two columns (the third
 * as lengths when there is one), reverse Cuthill-McKee, components, and
 * attaching the first column's labels as data nodes.  Any input is a graph
 * or a located error, never a crash; a graph's CSR is symmetric and sorted,
 * labels find their nodes, RCM gives a bijection. */
#include <string.h>

#include "fuzz.h"
#include "gmm/alloc.h"
#include "gmm/graph.h"
#include "gmm/io.h"
#include "gmm/model.h"

static void check_graph(gmm_graph *g, const gmm_table *t)
{
    fuzz_require(g->n >= 2 && g->nedge >= 1 && g->ptr[0] == 0 && g->ptr[g->n] == 2 * g->nedge);
    for (size_t v = 0; v < g->n; v++) {
        char buf[24];
        size_t w = (size_t)-1;
        fuzz_require(gmm_graph_node_find(g, gmm_graph_node_label(g, v, buf), &w) && w == v);
        for (size_t k = g->ptr[v]; k < g->ptr[v + 1]; k++) {
            size_t u = g->adj[k];
            fuzz_require(u < g->n && u != v);
            fuzz_require(k == g->ptr[v] || g->adj[k - 1] < u);
            fuzz_require(g->len[k] > 0);
        }
    }
    size_t *perm = gmm_malloc(g->n, sizeof *perm), *iperm = gmm_malloc(g->n, sizeof *iperm);
    size_t *comp = gmm_malloc(g->n, sizeof *comp);
    size_t *node = gmm_malloc(t->nrow, sizeof *node), *added = NULL, nadded = 0, ncomp = 0;
    if (perm && iperm && gmm_graph_rcm(g, perm, iperm) == GMM_OK) {
        fuzz_require(gmm_graph_perm_check(g->n, perm, iperm));
        fuzz_require(gmm_graph_bandwidth(g, iperm) < g->n);
        fuzz_require(gmm_graph_bandwidth(g, NULL) < g->n);
        (void)gmm_graph_profile(g, iperm);
    }
    if (comp && gmm_graph_components(g, comp, &ncomp) == GMM_OK) {
        fuzz_require(ncomp >= 1 && ncomp <= g->n / 2);
        for (size_t v = 0; v < g->n; v++)
            fuzz_require(comp[v] < ncomp);
    }
    /* Every label of column i is a node already: nothing is added. */
    if (node && gmm_mdl_graph_attach(g, t, t->header[0], 0, node, &added, &nadded) == GMM_OK)
        fuzz_require(nadded == 0);
    gmm_free(added);
    gmm_free(perm);
    gmm_free(iperm);
    gmm_free(comp);
    gmm_free(node);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f)
        return 0;
    gmm_table *t = NULL;
    gmm_status st = gmm_table_read_stream(f, "edges.csv", &t);
    fclose(f);
    if (st != GMM_OK || t->ncol < 2) {
        gmm_table_free(t);
        return 0;
    }
    gmm_graph *g = NULL;
    st = gmm_mdl_graph_read(t, t->header[0], t->header[1], t->ncol >= 3 ? t->header[2] : NULL, 1,
                            &g);
    fuzz_require(st == GMM_OK || st == GMM_EPARSE || st == GMM_ENOMEM);
    if (st == GMM_OK)
        check_graph(g, t);
    else
        fuzz_require(!g && !strncmp(gmm_error_message(), "edges.csv", 9));
    gmm_graph_free(g);
    gmm_table_free(t);
    return 0;
}
