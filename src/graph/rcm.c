/* rcm.c -- reverse Cuthill-McKee ordering, bandwidth and profile.
 *
 * References: E. Cuthill and J. McKee (1969), "Reducing the bandwidth of
 * sparse symmetric matrices"; A. George and J. W. H. Liu (1979), "An
 * implementation of a pseudoperipheral node finder", ACM TOMS 5, 284-295
 * (SPARSPAK's FNROOT, followed here: the returned root is the last node
 * whose level structure was built); A. George and J. W. H. Liu (1981),
 * "Computer Solution of Large Sparse Positive Definite Systems", ch. 4.
 *
 * Cost: one pass over the caller's graph per component collects it into a
 * copy numbered in breadth-first order (the only pass with scattered memory
 * access when the input numbering is scrambled); each level structure is
 * then one breadth-first search of that copy, O(component nodes + edges),
 * and the pseudo-peripheral search builds a handful of them (it stops as
 * soon as the eccentricity does not grow).  The Cuthill-McKee sweep sorts
 * each node's newly reached neighbours by degree: O(m log dmax) overall. */
#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/graph.h"

/* One component, relabelled 0..cs-1 in the order of a breadth-first search
 * (so neighbours have nearby labels and the repeated searches below stay in
 * cache even when the input numbering is scrambled).  Row k's neighbours are
 * adj[ptr[k] .. ptr[k+1]); orig[k] is the graph's node. */
typedef struct {
    size_t cs;
    size_t *ptr, *adj, *orig;
    unsigned char *mark;
} comp_graph;

static size_t degree(const comp_graph *c, size_t v) { return c->ptr[v + 1] - c->ptr[v]; }

/* (degree, original index) of a before b: the Cuthill-McKee visiting order,
 * independent of the relabelling. */
static int before(const comp_graph *c, size_t a, size_t b)
{
    size_t da = degree(c, a), db = degree(c, b);
    return da < db || (da == db && c->orig[a] < c->orig[b]);
}

static void sift_down(const comp_graph *c, size_t *x, size_t root, size_t end)
{
    for (;;) {
        size_t ch = 2 * root + 1;
        if (ch >= end)
            return;
        if (ch + 1 < end && before(c, x[ch], x[ch + 1]))
            ch++;
        if (!before(c, x[root], x[ch]))
            return;
        size_t t = x[root];
        x[root] = x[ch];
        x[ch] = t;
        root = ch;
    }
}

/* Sort x[0..k) by (degree, index): insertion sort for the short runs of a
 * road network, heapsort (O(k log k), no recursion) for hubs. */
static void sort_by_degree(const comp_graph *c, size_t *x, size_t k)
{
    if (k <= 16) {
        for (size_t a = 1; a < k; a++) {
            size_t v = x[a], b = a;
            for (; b > 0 && before(c, v, x[b - 1]); b--)
                x[b] = x[b - 1];
            x[b] = v;
        }
        return;
    }
    for (size_t r = k / 2; r-- > 0;)
        sift_down(c, x, r, k);
    for (size_t end = k; end-- > 1;) {
        size_t t = x[0];
        x[0] = x[end];
        x[end] = t;
        sift_down(c, x, 0, end);
    }
}

/* Node of minimum (degree, index) among x[0..k). */
static size_t min_degree(const comp_graph *c, const size_t *x, size_t k)
{
    size_t best = x[0];
    for (size_t a = 1; a < k; a++)
        if (before(c, x[a], best))
            best = x[a];
    return best;
}

/* Collect the component of s by breadth-first search of g, relabelling it
 * into c (local label = discovery order) in the same pass: when a node's row
 * is emitted, each neighbour has either been discovered or is discovered
 * now, so its local label is known.  loc[v] (n entries) is SIZE_MAX for the
 * nodes not yet reached and receives the local labels.  This is the one
 * pass over the caller's numbering, which may be scrambled: the rows ahead
 * in the queue are prefetched.  The search's levels are the first level
 * structure of George-Liu: returns the number of levels, the last one being
 * local labels *last .. cs-1. */
static size_t collect(const gmm_graph *g, size_t s, size_t *loc, comp_graph *c, size_t *last)
{
    size_t tail = 1, nnz = 0, nlev = 0, level_end = 1;
    c->orig[0] = s;
    loc[s] = 0;
    c->ptr[0] = 0;
    *last = 0;
    for (size_t h = 0; h < tail; h++) {
        if (h == level_end) {
            nlev++;
            *last = h;
            level_end = tail;
        }
#if defined(__GNUC__)
        if (h + 8 < tail)
            __builtin_prefetch(&g->ptr[c->orig[h + 8]]);
        if (h + 4 < tail) {
            size_t a = c->orig[h + 4];
            __builtin_prefetch(&g->adj[g->ptr[a]]);
        }
#endif
        size_t u = c->orig[h];
        for (size_t p = g->ptr[u]; p < g->ptr[u + 1]; p++) {
            size_t w = g->adj[p];
            if (loc[w] == SIZE_MAX) {
                loc[w] = tail;
                c->orig[tail++] = w;
            }
            c->adj[nnz++] = loc[w];
        }
        c->ptr[h + 1] = nnz;
    }
    c->cs = tail;
    return nlev + 1;
}

/* Level structure of the component rooted at local node `root`, in
 * q[0..cs).  Returns the number of levels; the last level is q[*last ..
 * cs).  c->mark is all 0 on entry and on exit. */
static size_t levels(const comp_graph *c, size_t root, size_t *q, size_t *last)
{
    size_t start = 0, end = 1, tail = 1, nlev = 0;
    q[0] = root;
    c->mark[root] = 1;
    while (start < end) {
        for (size_t h = start; h < end; h++) {
            size_t u = q[h];
            for (size_t p = c->ptr[u]; p < c->ptr[u + 1]; p++) {
                size_t w = c->adj[p];
                if (!c->mark[w]) {
                    c->mark[w] = 1;
                    q[tail++] = w;
                }
            }
        }
        nlev++;
        *last = start;
        start = end;
        end = tail;
    }
    for (size_t h = 0; h < tail; h++)
        c->mark[q[h]] = 0;
    return nlev;
}

gmm_status gmm_graph_rcm(const gmm_graph *g, size_t *perm, size_t *iperm)
{
    if (!g || !perm || !iperm)
        return gmm_error(GMM_EINVAL, "rcm: NULL argument");
    gmm_status st = GMM_OK;
    size_t n = g->n, nnz = g->ptr[n];
    comp_graph c = {0, NULL, NULL, NULL, NULL};
    size_t *q = gmm_malloc(n, sizeof *q);
    c.ptr = gmm_malloc(n + 1, sizeof *c.ptr);
    c.adj = gmm_malloc(nnz, sizeof *c.adj);
    c.orig = gmm_malloc(n, sizeof *c.orig);
    c.mark = gmm_calloc(n, 1);
    if (!q || !c.ptr || !c.adj || !c.orig || !c.mark) {
        st = gmm_error(GMM_ENOMEM, "rcm: out of memory ordering %zu nodes, %zu edges", n,
                       nnz / 2);
        goto done;
    }

    /* iperm serves as the graph-to-local map (SIZE_MAX: not reached yet)
     * until each component's final positions overwrite it. */
    for (size_t v = 0; v < n; v++)
        iperm[v] = SIZE_MAX;
    size_t pos = 0;
    for (size_t s = 0; s < n; s++) {
        if (iperm[s] != SIZE_MAX)
            continue;
        size_t last, nlev = collect(g, s, iperm, &c, &last), cs = c.cs;

        /* George-Liu (FNROOT) from a node of minimum degree: move the root
         * to a minimum-degree node of the deepest level while that deepens
         * the level structure.  (The search from s above only collected the
         * component; a low-degree start tends to be nearer the periphery.) */
        size_t root = 0;
        if (cs > 2) {
            for (size_t k = 0; k < cs; k++)
                q[k] = k;
            root = min_degree(&c, q, cs);
            nlev = levels(&c, root, q, &last);
            while (nlev < cs) {
                size_t x = min_degree(&c, q + last, cs - last);
                size_t nx = levels(&c, x, q, &last);
                root = x;
                if (nx <= nlev)
                    break;
                nlev = nx;
            }
        } else if (cs == 2) {
            root = before(&c, 1, 0) ? 1 : 0;
        }

        /* Cuthill-McKee from root into q (local labels). */
        size_t head = 0, tail = 1;
        q[0] = root;
        c.mark[root] = 1;
        while (head < tail) {
            size_t u = q[head++], first = tail;
            for (size_t p = c.ptr[u]; p < c.ptr[u + 1]; p++) {
                size_t w = c.adj[p];
                if (!c.mark[w]) {
                    c.mark[w] = 1;
                    q[tail++] = w;
                }
            }
            sort_by_degree(&c, q + first, tail - first);
        }
        /* Reversed, after the components before it. */
        for (size_t k = 0; k < cs; k++) {
            size_t v = c.orig[q[cs - 1 - k]];
            c.mark[q[cs - 1 - k]] = 0;
            perm[pos + k] = v;
            iperm[v] = pos + k;
        }
        pos += cs;
    }

done:
    gmm_free(q);
    gmm_free(c.ptr);
    gmm_free(c.adj);
    gmm_free(c.orig);
    gmm_free(c.mark);
    return st;
}

size_t gmm_graph_bandwidth(const gmm_graph *g, const size_t *iperm)
{
    size_t bw = 0;
    for (size_t u = 0; u < g->n; u++) {
        size_t a = iperm ? iperm[u] : u;
        for (size_t p = g->ptr[u]; p < g->ptr[u + 1]; p++) {
            size_t b = iperm ? iperm[g->adj[p]] : g->adj[p];
            if (a > b && a - b > bw)
                bw = a - b;
        }
    }
    return bw;
}

size_t gmm_graph_profile(const gmm_graph *g, const size_t *iperm)
{
    size_t prof = 0;
    for (size_t u = 0; u < g->n; u++) {
        size_t a = iperm ? iperm[u] : u, f = a;
        for (size_t p = g->ptr[u]; p < g->ptr[u + 1]; p++) {
            size_t b = iperm ? iperm[g->adj[p]] : g->adj[p];
            if (b < f)
                f = b;
        }
        prof += a - f;
    }
    return prof;
}

int gmm_graph_perm_check(size_t n, const size_t *perm, const size_t *iperm)
{
    for (size_t k = 0; k < n; k++)
        if (perm[k] >= n || iperm[perm[k]] != k)
            return 0;
    return 1;
}
