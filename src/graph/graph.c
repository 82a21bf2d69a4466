/* graph.c -- CSR construction from an edge list, labels, components.
 *
 * Construction buckets the edges by their smaller endpoint (a counting
 * sort) and sorts each bucket by the larger endpoint and input order:
 * duplicates are then adjacent, and the CSR rows come out sorted.
 * O(n + m log dmax) time, O(n + m) memory. */
#include "graph_priv.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

/* ---- labels ------------------------------------------------------------------ */

static uint64_t hash_str(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t k = 0; k < len; k++) {
        h ^= (unsigned char)s[k];
        h *= 1099511628211ULL;
    }
    return h;
}

const char *graph_label_trim(const char *s, size_t *len)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t l = strlen(s);
    while (l && isspace((unsigned char)s[l - 1]))
        l--;
    *len = l;
    return s;
}

gmm_graph_labels *graph_labels_alloc(size_t expect)
{
    gmm_graph_labels *L = gmm_calloc(1, sizeof *L);
    if (!L)
        return NULL;
    size_t nslot = 16;
    while (nslot < 2 * expect)
        nslot *= 2;
    L->cap = 8 * (expect ? expect : 1);
    L->off_cap = expect ? expect : 1;
    L->buf = gmm_malloc(L->cap, 1);
    L->off = gmm_malloc(L->off_cap, sizeof *L->off);
    L->slot = gmm_calloc(nslot, sizeof *L->slot);
    L->nslot = nslot;
    if (!L->buf || !L->off || !L->slot) {
        graph_labels_free(L);
        return NULL;
    }
    return L;
}

void graph_labels_free(gmm_graph_labels *L)
{
    if (!L)
        return;
    gmm_free(L->buf);
    gmm_free(L->off);
    gmm_free(L->slot);
    gmm_free(L);
}

/* Slot where s is, or the empty slot where it would go. */
static size_t probe(const gmm_graph_labels *L, const char *s, size_t len)
{
    size_t mask = L->nslot - 1, h = (size_t)hash_str(s, len) & mask;
    for (;;) {
        size_t e = L->slot[h];
        if (!e)
            return h;
        const char *t = L->buf + L->off[e - 1];
        if (strlen(t) == len && !memcmp(t, s, len))
            return h;
        h = (h + 1) & mask;
    }
}

int graph_labels_find(const gmm_graph_labels *L, const char *s, size_t len, size_t *v)
{
    size_t e = L->slot[probe(L, s, len)];
    if (!e)
        return 0;
    *v = e - 1;
    return 1;
}

static gmm_status rehash(gmm_graph_labels *L)
{
    size_t nslot = L->nslot * 2;
    size_t *slot = gmm_calloc(nslot, sizeof *slot);
    if (!slot)
        return GMM_ENOMEM;
    size_t *old = L->slot;
    L->slot = slot;
    L->nslot = nslot;
    for (size_t v = 0; v < L->count; v++) {
        const char *t = L->buf + L->off[v];
        slot[probe(L, t, strlen(t))] = v + 1;
    }
    gmm_free(old);
    return GMM_OK;
}

gmm_status graph_labels_intern(gmm_graph_labels *L, const char *s, size_t len, size_t *v,
                               int *inserted)
{
    *inserted = 0;
    size_t h = probe(L, s, len);
    if (L->slot[h]) {
        *v = L->slot[h] - 1;
        return GMM_OK;
    }
    /* Grow everything first so a failure leaves the store unchanged. */
    if (L->used + len + 1 > L->cap) {
        size_t cap = 2 * L->cap + len + 1;
        char *buf = gmm_realloc(L->buf, cap, 1);
        if (!buf)
            return GMM_ENOMEM;
        L->buf = buf;
        L->cap = cap;
    }
    if (L->count == L->off_cap) {
        size_t cap = 2 * L->off_cap;
        size_t *off = gmm_realloc(L->off, cap, sizeof *off);
        if (!off)
            return GMM_ENOMEM;
        L->off = off;
        L->off_cap = cap;
    }
    if (2 * (L->count + 1) > L->nslot) {
        if (rehash(L) != GMM_OK)
            return GMM_ENOMEM;
        h = probe(L, s, len);
    }
    memcpy(L->buf + L->used, s, len);
    L->buf[L->used + len] = '\0';
    L->off[L->count] = L->used;
    L->used += len + 1;
    L->slot[h] = ++L->count;
    *v = L->count - 1;
    *inserted = 1;
    return GMM_OK;
}

const char *gmm_graph_node_label(const gmm_graph *g, size_t v, char *buf)
{
    if (g->labels && v < g->labels->count)
        return g->labels->buf + g->labels->off[v];
    snprintf(buf, 24, "%zu", v);
    return buf;
}

int gmm_graph_node_find(const gmm_graph *g, const char *label, size_t *v)
{
    size_t len;
    const char *s = graph_label_trim(label, &len);
    if (g->labels)
        return graph_labels_find(g->labels, s, len, v);
    if (len == 0 || len > 20)
        return 0;
    size_t x = 0;
    for (size_t k = 0; k < len; k++) {
        if (!isdigit((unsigned char)s[k]))
            return 0;
        x = 10 * x + (size_t)(s[k] - '0');
    }
    if (x >= g->n)
        return 0;
    *v = x;
    return 1;
}

gmm_status gmm_graph_node_add(gmm_graph *g, const char *label, size_t *v)
{
    if (!g || !label || !v)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_graph_node_add");
    gmm_graph_labels *L = g->labels;
    if (!L)
        return gmm_error(GMM_EINVAL, "graph: cannot add a labelled node to an unlabelled graph");
    size_t len, idx;
    const char *s = graph_label_trim(label, &len);
    if (len == 0)
        return gmm_error(GMM_EINVAL, "graph: empty node label");
    if (graph_labels_find(L, s, len, &idx))
        return gmm_error(GMM_EINVAL, "graph: node '%s' already exists", L->buf + L->off[idx]);
    if (g->n + 2 > L->ptr_cap) {
        size_t cap = 2 * L->ptr_cap + 2;
        size_t *p = gmm_realloc(g->ptr, cap, sizeof *p);
        if (!p)
            return gmm_error(GMM_ENOMEM, "graph: out of memory adding node '%.*s'", (int)len, s);
        g->ptr = p;
        L->ptr_cap = cap;
    }
    int inserted;
    if (graph_labels_intern(L, s, len, &idx, &inserted) != GMM_OK)
        return gmm_error(GMM_ENOMEM, "graph: out of memory adding node '%.*s'", (int)len, s);
    g->ptr[g->n + 1] = g->ptr[g->n];
    *v = g->n++;
    g->nisolated_added++;
    return GMM_OK;
}

/* ---- construction ------------------------------------------------------------ */

/* "FILE:LINE" (or "FILE: edge K") for edge k, into buf. */
static const char *where(char *buf, size_t size, const char *file, const size_t *line, size_t k)
{
    if (!file)
        file = "edge list";
    if (line)
        snprintf(buf, size, "%s:%zu", file, line[k]);
    else
        snprintf(buf, size, "%s: edge %zu", file, k);
    return buf;
}

/* An edge in its smaller endpoint's bucket. */
typedef struct {
    size_t lo, hi, k;
    double len;
} bucket_edge;

static int edge_before(const bucket_edge *a, const bucket_edge *b)
{
    return a->hi < b->hi || (a->hi == b->hi && a->k < b->k);
}

static void edge_sift(bucket_edge *x, size_t root, size_t end)
{
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= end)
            return;
        if (c + 1 < end && edge_before(&x[c], &x[c + 1]))
            c++;
        if (!edge_before(&x[root], &x[c]))
            return;
        bucket_edge t = x[root];
        x[root] = x[c];
        x[c] = t;
        root = c;
    }
}

/* Sort a bucket by (hi, input order): insertion sort for the few edges of a
 * typical node, heapsort for a hub (O(d log d), no recursion). */
static void sort_bucket(bucket_edge *x, size_t k)
{
    if (k <= 16) {
        for (size_t a = 1; a < k; a++) {
            bucket_edge v = x[a];
            size_t b = a;
            for (; b > 0 && edge_before(&v, &x[b - 1]); b--)
                x[b] = x[b - 1];
            x[b] = v;
        }
        return;
    }
    for (size_t r = k / 2; r-- > 0;)
        edge_sift(x, r, k);
    for (size_t end = k; end-- > 1;) {
        bucket_edge t = x[0];
        x[0] = x[end];
        x[end] = t;
        edge_sift(x, 0, end);
    }
}

gmm_status graph_build_csr(gmm_graph *g, size_t m, const size_t *ei, const size_t *ej,
                           const double *len, const char *file, const size_t *line)
{
    char at[512], b1[24], b2[24];
    const char *fname = file ? file : "edge list";
    size_t n = g->n;
    bucket_edge *be = NULL;
    size_t *cnt = NULL;
    gmm_status st = GMM_OK;

    if (m == 0)
        return gmm_error(GMM_EPARSE, "%s: the edge list has no edges", fname);
    for (size_t k = 0; k < m; k++) {
        if (ei[k] >= n || ej[k] >= n)
            return gmm_error(GMM_EINVAL, "%s: node index out of range (n = %zu)",
                             where(at, sizeof at, file, line, k), n);
        if (ei[k] == ej[k])
            return gmm_error(GMM_EPARSE, "%s: self-loop at node '%s'",
                             where(at, sizeof at, file, line, k),
                             gmm_graph_node_label(g, ei[k], b1));
        if (len && !isfinite(len[k]))
            return gmm_error(GMM_EPARSE, "%s: edge '%s'-'%s': length %g is not finite",
                             where(at, sizeof at, file, line, k),
                             gmm_graph_node_label(g, ei[k], b1),
                             gmm_graph_node_label(g, ej[k], b2), len[k]);
        if (len && !(len[k] > 0.0))
            return gmm_error(GMM_EPARSE, "%s: edge '%s'-'%s': length %g is not positive",
                             where(at, sizeof at, file, line, k),
                             gmm_graph_node_label(g, ei[k], b1),
                             gmm_graph_node_label(g, ej[k], b2), len[k]);
    }

    be = gmm_malloc(m, sizeof *be);
    cnt = gmm_calloc(n + 1, sizeof *cnt);
    g->ptr = gmm_calloc(n + 1, sizeof *g->ptr);
    if (!be || !cnt || !g->ptr) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory building a graph of %zu nodes, %zu edges",
                       fname, n, m);
        goto done;
    }
    if (g->labels)
        g->labels->ptr_cap = n + 1;

    /* Bucket by the smaller endpoint, then sort each bucket by (larger
     * endpoint, input order): duplicates become adjacent and the edges come
     * out in (lo, hi) order. */
    for (size_t k = 0; k < m; k++)
        cnt[(ei[k] < ej[k] ? ei[k] : ej[k]) + 1]++;
    for (size_t v = 0; v < n; v++)
        cnt[v + 1] += cnt[v];
    for (size_t k = 0; k < m; k++) {
        size_t lo = ei[k] < ej[k] ? ei[k] : ej[k];
        bucket_edge *e = &be[cnt[lo]++];
        e->lo = lo;
        e->hi = ei[k] < ej[k] ? ej[k] : ei[k];
        e->k = k;
        e->len = len ? len[k] : 1.0;
    }
    /* cnt[v] is now the end of bucket v, i.e. the start of bucket v + 1. */

    /* Keep the first of each run of equal (lo, hi), compacting into
     * be[0..nu) (the write index never passes the read index); a later edge
     * with another length is an error, reported at the smallest such line. */
    size_t bad = SIZE_MAX, bad_first = 0, nu = 0;
    g->nmerged = 0;
    g->dup_line = 0;
    for (size_t v = 0, start = 0; v < n; start = cnt[v++]) {
        bucket_edge *x = be + start;
        size_t k = cnt[v] - start;
        sort_bucket(x, k);
        for (size_t a = 0; a < k;) {
            size_t c = a + 1;
            for (; c < k && x[c].hi == x[a].hi; c++) {
                size_t e = x[c].k, key = line ? line[e] : e;
                if (x[c].len != x[a].len) {
                    if (bad == SIZE_MAX || key < (line ? line[bad] : bad)) {
                        bad = e;
                        bad_first = x[a].k;
                    }
                } else {
                    g->nmerged++;
                    if (line && (g->dup_line == 0 || line[e] < g->dup_line))
                        g->dup_line = line[e];
                }
            }
            be[nu++] = x[a];
            a = c;
        }
    }
    if (bad != SIZE_MAX) {
        char first[64];
        if (line)
            snprintf(first, sizeof first, "line %zu", line[bad_first]);
        else
            snprintf(first, sizeof first, "edge %zu", bad_first);
        st = gmm_error(GMM_EPARSE,
                       "%s: edge '%s'-'%s' listed again with a different length (%g here, "
                       "%g at %s)",
                       where(at, sizeof at, file, line, bad), gmm_graph_node_label(g, ei[bad], b1),
                       gmm_graph_node_label(g, ej[bad], b2), len[bad], len[bad_first], first);
        goto done;
    }

    g->nedge = nu;
    g->has_length = len != NULL;
    g->adj = gmm_malloc(2 * nu, sizeof *g->adj);
    g->len = gmm_malloc(2 * nu, sizeof *g->len);
    if (!g->adj || !g->len) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory building a graph of %zu nodes, %zu edges",
                       fname, n, m);
        goto done;
    }
    for (size_t u = 0; u < nu; u++) {
        g->ptr[be[u].lo + 1]++;
        g->ptr[be[u].hi + 1]++;
    }
    for (size_t v = 0; v < n; v++)
        g->ptr[v + 1] += g->ptr[v];
    memcpy(cnt, g->ptr, (n + 1) * sizeof *cnt);
    /* Smaller neighbours first (the list is sorted by lo), then larger ones
     * (sorted by hi within each lo): every row comes out increasing. */
    for (size_t u = 0; u < nu; u++) {
        size_t p = cnt[be[u].hi]++;
        g->adj[p] = be[u].lo;
        g->len[p] = be[u].len;
    }
    for (size_t u = 0; u < nu; u++) {
        size_t p = cnt[be[u].lo]++;
        g->adj[p] = be[u].hi;
        g->len[p] = be[u].len;
    }

done:
    gmm_free(be);
    gmm_free(cnt);
    return st;
}

gmm_status gmm_graph_from_edges(size_t n, size_t m, const size_t *ei, const size_t *ej,
                                const double *len, const char *file, const size_t *line,
                                gmm_graph **out)
{
    if (!out || (m && (!ei || !ej)))
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_graph_from_edges");
    *out = NULL;
    gmm_graph *g = gmm_calloc(1, sizeof *g);
    if (!g)
        return gmm_error(GMM_ENOMEM, "graph: out of memory");
    g->n = n;
    gmm_status st = graph_build_csr(g, m, ei, ej, len, file, line);
    if (st != GMM_OK) {
        gmm_graph_free(g);
        return st;
    }
    *out = g;
    return GMM_OK;
}

void gmm_graph_free(gmm_graph *g)
{
    if (!g)
        return;
    gmm_free(g->ptr);
    gmm_free(g->adj);
    gmm_free(g->len);
    graph_labels_free(g->labels);
    gmm_free(g);
}

/* ---- structure ------------------------------------------------------------------ */

gmm_status gmm_graph_components(const gmm_graph *g, size_t *comp, size_t *ncomp)
{
    if (!g || !comp || !ncomp)
        return gmm_error(GMM_EINVAL, "graph: NULL argument to gmm_graph_components");
    size_t n = g->n, nc = 0;
    size_t *queue = gmm_malloc(n, sizeof *queue);
    if (!queue)
        return gmm_error(GMM_ENOMEM, "graph: out of memory (components of %zu nodes)", n);
    for (size_t v = 0; v < n; v++)
        comp[v] = SIZE_MAX;
    for (size_t s = 0; s < n; s++) {
        if (comp[s] != SIZE_MAX)
            continue;
        size_t head = 0, tail = 0;
        queue[tail++] = s;
        comp[s] = nc;
        while (head < tail) {
            size_t u = queue[head++];
            for (size_t p = g->ptr[u]; p < g->ptr[u + 1]; p++)
                if (comp[g->adj[p]] == SIZE_MAX) {
                    comp[g->adj[p]] = nc;
                    queue[tail++] = g->adj[p];
                }
        }
        nc++;
    }
    gmm_free(queue);
    *ncomp = nc;
    return GMM_OK;
}
