/* test_rcm.c -- reverse Cuthill-McKee: bijection, bandwidth and profile
 * recomputed independently from the edge list, and the bandwidths RCM is
 * known to reach on paths, stars, grids, trees and disconnected graphs given
 * in scrambled order. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "gmm/alloc.h"
#include "gmm/graph.h"
#include "support/testutil.h"

typedef struct {
    size_t n, m, cap;
    size_t *i, *j;
} edges;

static void push(edges *e, size_t a, size_t b)
{
    if (e->m == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        e->i = realloc(e->i, e->cap * sizeof *e->i);
        e->j = realloc(e->j, e->cap * sizeof *e->j);
    }
    e->i[e->m] = a;
    e->j[e->m++] = b;
}

static void edges_free(edges *e)
{
    free(e->i);
    free(e->j);
}

/* Random permutation of 0..n-1 (Fisher-Yates). */
static size_t *random_perm(tu_rng *r, size_t n)
{
    size_t *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t v = 0; v < n; v++)
        p[v] = v;
    for (size_t v = n; v-- > 1;) {
        size_t w = (size_t)(tu_uniform(r) * (double)(v + 1));
        size_t t = p[v];
        p[v] = p[w];
        p[w] = t;
    }
    return p;
}

/* Relabel nodes by a random permutation and shuffle the edge order and the
 * orientation of each edge: the graph "given in scrambled order". */
static void scramble(edges *e, tu_rng *r)
{
    size_t *p = random_perm(r, e->n), *q = random_perm(r, e->m);
    size_t *ni = malloc(e->m * sizeof *ni), *nj = malloc(e->m * sizeof *nj);
    for (size_t k = 0; k < e->m; k++) {
        size_t a = p[e->i[q[k]]], b = p[e->j[q[k]]];
        int flip = tu_uniform(r) < 0.5;
        ni[k] = flip ? b : a;
        nj[k] = flip ? a : b;
    }
    free(e->i);
    free(e->j);
    e->i = ni;
    e->j = nj;
    free(p);
    free(q);
}

typedef struct {
    size_t bw, bw_before, profile;
    size_t *perm, *iperm;
} rcm_result;

/* Order the graph and check what must hold for every graph: a bijection,
 * and gmm_graph_bandwidth/profile equal to values recomputed here from the
 * edge list (not from the CSR). */
static rcm_result order_and_check(const edges *e)
{
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(e->n, e->m, e->i, e->j, NULL, NULL, NULL, &g),
                     GMM_OK);
    rcm_result res;
    res.perm = malloc(e->n * sizeof(size_t));
    res.iperm = malloc(e->n * sizeof(size_t));
    ck_assert_int_eq(gmm_graph_rcm(g, res.perm, res.iperm), GMM_OK);

    /* Bijection, checked by counting (independent of gmm_graph_perm_check). */
    unsigned char *seen = calloc(e->n, 1);
    for (size_t k = 0; k < e->n; k++) {
        ck_assert_uint_lt(res.perm[k], e->n);
        ck_assert(!seen[res.perm[k]]);
        seen[res.perm[k]] = 1;
        ck_assert_uint_eq(res.iperm[res.perm[k]], k);
    }
    free(seen);
    ck_assert(gmm_graph_perm_check(e->n, res.perm, res.iperm));

    size_t bw = 0, bw0 = 0;
    size_t *first = malloc(e->n * sizeof *first);
    for (size_t v = 0; v < e->n; v++)
        first[v] = v;
    for (size_t k = 0; k < e->m; k++) {
        size_t a = res.iperm[e->i[k]], b = res.iperm[e->j[k]];
        size_t d = a > b ? a - b : b - a, d0 = e->i[k] > e->j[k] ? e->i[k] - e->j[k]
                                                                  : e->j[k] - e->i[k];
        if (d > bw)
            bw = d;
        if (d0 > bw0)
            bw0 = d0;
        if (a < first[b])
            first[b] = a;
        if (b < first[a])
            first[a] = b;
    }
    size_t prof = 0;
    for (size_t v = 0; v < e->n; v++)
        prof += v - first[v];
    free(first);
    ck_assert_uint_eq(gmm_graph_bandwidth(g, res.iperm), bw);
    ck_assert_uint_eq(gmm_graph_bandwidth(g, NULL), bw0);
    ck_assert_uint_eq(gmm_graph_profile(g, res.iperm), prof);
    res.bw = bw;
    res.bw_before = bw0;
    res.profile = prof;

    /* Deterministic: a second run gives the same permutation. */
    size_t *p2 = malloc(e->n * sizeof *p2), *ip2 = malloc(e->n * sizeof *ip2);
    ck_assert_int_eq(gmm_graph_rcm(g, p2, ip2), GMM_OK);
    for (size_t k = 0; k < e->n; k++)
        ck_assert_uint_eq(p2[k], res.perm[k]);
    free(p2);
    free(ip2);
    gmm_graph_free(g);
    return res;
}

static void result_free(rcm_result *r)
{
    free(r->perm);
    free(r->iperm);
}

static edges grid(size_t k, size_t m)
{
    edges e = {k * m, 0, 0, NULL, NULL};
    for (size_t a = 0; a < k; a++)
        for (size_t b = 0; b < m; b++) {
            if (b + 1 < m)
                push(&e, a * m + b, a * m + b + 1);
            if (a + 1 < k)
                push(&e, a * m + b, (a + 1) * m + b);
        }
    return e;
}

START_TEST(test_path_scrambled)
{
    tu_rng r;
    tu_rng_seed(&r, 11);
    for (size_t n = 2; n <= 200; n += 17) {
        edges e = {n, 0, 0, NULL, NULL};
        for (size_t v = 0; v + 1 < n; v++)
            push(&e, v, v + 1);
        scramble(&e, &r);
        rcm_result res = order_and_check(&e);
        ck_assert_uint_eq(res.bw, 1);
        ck_assert_uint_eq(res.profile, n - 1);
        result_free(&res);
        edges_free(&e);
    }
}
END_TEST

START_TEST(test_star)
{
    /* A star with k leaves: the search starts at a leaf, reaches the centre,
     * then the other k - 1 leaves; reversed, the centre sits after k - 1
     * leaves, so the bandwidth is k - 1 (George-Liu cannot do better from a
     * peripheral start). */
    tu_rng r;
    tu_rng_seed(&r, 12);
    for (size_t k = 1; k <= 40; k += 3) {
        edges e = {k + 1, 0, 0, NULL, NULL};
        for (size_t v = 1; v <= k; v++)
            push(&e, 0, v);
        scramble(&e, &r);
        rcm_result res = order_and_check(&e);
        ck_assert_uint_eq(res.bw, k > 1 ? k - 1 : 1);
        result_free(&res);
        edges_free(&e);
    }
}
END_TEST

START_TEST(test_binary_tree)
{
    /* Complete binary tree of depth d: every level-structure level is at
     * most 2^d nodes wide, and a node's neighbours lie in adjacent levels,
     * so the bandwidth is below two level widths. */
    tu_rng r;
    tu_rng_seed(&r, 13);
    for (size_t d = 1; d <= 9; d++) {
        size_t n = ((size_t)1 << (d + 1)) - 1;
        edges e = {n, 0, 0, NULL, NULL};
        for (size_t v = 1; v < n; v++)
            push(&e, (v - 1) / 2, v);
        scramble(&e, &r);
        rcm_result res = order_and_check(&e);
        ck_assert_uint_le(res.bw, (size_t)1 << d);
        result_free(&res);
        edges_free(&e);
    }
}
END_TEST

START_TEST(test_grid_scrambled)
{
    /* The bound: a k x m grid given in scrambled order comes out with
     * bandwidth at most min(k, m) + 1 (SciPy gets 11 on 10 x 20). */
    tu_rng r;
    tu_rng_seed(&r, 14);
    size_t sizes[][2] = {{10, 20}, {20, 10}, {1, 30}, {2, 2}, {3, 7}, {5, 5}, {8, 31},
                         {16, 16}, {17, 40}, {40, 9}, {30, 30}};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        for (int rep = 0; rep < 3; rep++) {
            size_t k = sizes[c][0], m = sizes[c][1], lo = k < m ? k : m;
            edges e = grid(k, m);
            scramble(&e, &r);
            rcm_result res = order_and_check(&e);
            ck_assert_msg(res.bw <= lo + 1, "%zu x %zu grid: bandwidth %zu > %zu", k, m, res.bw,
                          lo + 1);
            result_free(&res);
            edges_free(&e);
        }
    }
}
END_TEST

START_TEST(test_disconnected_components_in_order)
{
    /* Components: a scrambled grid, a path, a triangle, isolated nodes,
     * interleaved in numbering.  Each component occupies consecutive
     * positions, components in the order of their smallest node. */
    tu_rng r;
    tu_rng_seed(&r, 15);
    edges parts = grid(6, 9); /* nodes 0..53 */
    size_t base = parts.n;
    for (size_t v = 0; v < 19; v++)
        push(&parts, base + v, base + v + 1); /* path on base..base+19 */
    base += 20;
    push(&parts, base, base + 1);
    push(&parts, base + 1, base + 2);
    push(&parts, base, base + 2);
    parts.n = base + 3 + 7; /* 7 isolated nodes */
    scramble(&parts, &r);
    rcm_result res = order_and_check(&parts);
    ck_assert_uint_le(res.bw, 7);

    gmm_graph *g = NULL;
    ck_assert_int_eq(
        gmm_graph_from_edges(parts.n, parts.m, parts.i, parts.j, NULL, NULL, NULL, &g), GMM_OK);
    size_t *comp = malloc(parts.n * sizeof *comp), nc = 0;
    ck_assert_int_eq(gmm_graph_components(g, comp, &nc), GMM_OK);
    ck_assert_uint_eq(nc, 3 + 7);
    /* Along the new order, the component number never decreases and steps
     * by one (components numbered by smallest node, placed in that order). */
    for (size_t k = 1; k < parts.n; k++) {
        size_t a = comp[res.perm[k - 1]], b = comp[res.perm[k]];
        ck_assert(b == a || b == a + 1);
    }
    ck_assert_uint_eq(comp[res.perm[0]], 0);
    /* Smallest node of each component appears in increasing order. */
    size_t *smallest = malloc(nc * sizeof *smallest);
    for (size_t c = 0; c < nc; c++)
        smallest[c] = SIZE_MAX;
    for (size_t v = 0; v < parts.n; v++)
        if (v < smallest[comp[v]])
            smallest[comp[v]] = v;
    for (size_t c = 1; c < nc; c++)
        ck_assert_uint_lt(smallest[c - 1], smallest[c]);
    free(smallest);
    free(comp);
    gmm_graph_free(g);
    result_free(&res);
    edges_free(&parts);
}
END_TEST

START_TEST(test_random_graphs_bijection)
{
    /* Random sparse graphs of many shapes (including many components and
     * hubs): only the invariants are checked. */
    tu_rng r;
    tu_rng_seed(&r, 16);
    for (int rep = 0; rep < 60; rep++) {
        size_t n = 2 + (size_t)(tu_uniform(&r) * 300);
        size_t m = 1 + (size_t)(tu_uniform(&r) * 3.0 * (double)n);
        edges e = {n, 0, 0, NULL, NULL};
        for (size_t k = 0; k < m; k++) {
            size_t a = (size_t)(tu_uniform(&r) * (double)n), b;
            if (rep % 5 == 0 && tu_uniform(&r) < 0.3)
                a = 0; /* a hub: sorted by heapsort */
            do
                b = (size_t)(tu_uniform(&r) * (double)n);
            while (b == a);
            push(&e, a, b);
        }
        rcm_result res = order_and_check(&e);
        result_free(&res);
        edges_free(&e);
    }
}
END_TEST

START_TEST(test_rcm_out_of_memory)
{
    edges e = grid(7, 9);
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(e.n, e.m, e.i, e.j, NULL, NULL, NULL, &g), GMM_OK);
    size_t *p = malloc(e.n * sizeof *p), *ip = malloc(e.n * sizeof *ip);
    int failed = 0;
    for (long k = 0; k < 10; k++) {
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_graph_rcm(g, p, ip);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK)
            break;
        ck_assert_int_eq(st, GMM_ENOMEM);
        failed++;
    }
    ck_assert_int_gt(failed, 0);
    ck_assert(gmm_graph_perm_check(e.n, p, ip));
    free(p);
    free(ip);
    gmm_graph_free(g);
    edges_free(&e);
}
END_TEST

extern Suite *graph_rcm_suite(void);
Suite *graph_rcm_suite(void)
{
    Suite *s = suite_create("graph_rcm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_path_scrambled);
    tcase_add_test(tc, test_star);
    tcase_add_test(tc, test_binary_tree);
    tcase_add_test(tc, test_grid_scrambled);
    tcase_add_test(tc, test_disconnected_components_in_order);
    tcase_add_test(tc, test_random_graphs_bijection);
    tcase_add_test(tc, test_rcm_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
