/* stack_order.c -- the stacked latent's joint order (symbolic work, once
 * per model): reverse Cuthill-McKee (graph/rcm.c) over the graph whose
 * edges are the components' off-diagonal slots and the cliques of latents
 * each data row reads, so that Q + H'H/noise fits one band.
 *
 * ORDER AND BAND.  The stacked vector (components one after another, each
 * in its own local order) is permuted by reverse Cuthill-McKee over the
 * union of the components' precision graphs and the data's graph (each
 * data row joins the K latents it reads), so that Q is banded with lower
 * bandwidth kl and each data row reads a window of width <= kl + 1 of the
 * permuted vector (coefficients 1 at its K entries, 0 elsewhere; obs width
 * = the widest such window).  An iid term alone adds no band; a factor
 * crossed with a time series adds about the smaller of the two sizes. */
#include "gmm/alloc.h"
#include "../latent_impl.h"
#include "stack_impl.h"

#include "gmm/graph.h"

/* The joint order: RCM over the components' slots and the data's cliques. */
gmm_status stack_order(stack_impl *c)
{
    gmm_status st;
    size_t m = 0, K = c->ncomp;
    for (size_t k = 0; k < K; k++)
        for (size_t s = 0; s < c->comp[k].nslot; s++)
            m += c->comp[k].slot_row[s] != c->comp[k].slot_col[s];
    size_t R = 0; /* entries a row reads */
    for (size_t k = 0; k < K; k++)
        R += c->comp[k].nread;
    m += c->nrows * (R * (R - 1) / 2);
    size_t *ei = gmm_malloc(2 * (m ? m : 1), sizeof *ei), *ej = ei ? ei + (m ? m : 1) : NULL;
    gmm_graph *g = NULL;
    if (!ei)
        return gmm_error(GMM_ENOMEM, "out of memory ordering the stacked latent (%zu edges)", m);
    size_t e = 0;
    for (size_t k = 0; k < K; k++) {
        const stack_comp *q = &c->comp[k];
        for (size_t s = 0; s < q->nslot; s++)
            if (q->slot_row[s] != q->slot_col[s]) {
                ei[e] = q->off + q->slot_row[s];
                ej[e++] = q->off + q->slot_col[s];
            }
    }
    for (size_t r = 0; r < c->nrows; r++)
        for (size_t a = 0; a < K; a++)
            for (size_t ea = 0; ea < c->comp[a].nread; ea++)
                for (size_t b = a; b < K; b++)
                    for (size_t eb = b == a ? ea + 1 : 0; eb < c->comp[b].nread; eb++) {
                        ei[e] = stack_read_at(&c->comp[a], r, ea);
                        ej[e++] = stack_read_at(&c->comp[b], r, eb);
                    }
    /* a data row reading one latent twice (never across components) adds no edge */
    size_t e2 = 0;
    for (size_t i = 0; i < e; i++)
        if (ei[i] != ej[i]) {
            ei[e2] = ei[i];
            ej[e2++] = ej[i];
        }
    if (e2 == 0) {
        for (size_t i = 0; i < c->n; i++)
            c->perm[i] = c->iperm[i] = i;
        c->bw = 0;
        gmm_free(ei);
        return GMM_OK;
    }
    if ((st = gmm_graph_from_edges(c->n, e2, ei, ej, NULL, "stacked latent", NULL, &g)) ||
        (st = gmm_graph_rcm(g, c->perm, c->iperm)))
        goto done;
    c->bw = gmm_graph_bandwidth(g, c->iperm);
done:
    gmm_graph_free(g);
    gmm_free(ei);
    return st;
}
