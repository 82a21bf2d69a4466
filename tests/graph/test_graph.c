/* test_graph.c -- CSR construction, validation messages, labels,
 * components, and out-of-memory paths. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/graph.h"
#include "gmm/io.h"
#include "gmm/model.h"
#include "support/testutil.h"
#include "support/tmpfiles.h"

/* Build, expecting failure with status st and a message containing want. */
static void expect_error(size_t n, size_t m, const size_t *ei, const size_t *ej,
                         const double *len, const size_t *line, gmm_status st, const char *want)
{
    gmm_graph *g = (gmm_graph *)1;
    gmm_error_clear();
    ck_assert_int_eq(gmm_graph_from_edges(n, m, ei, ej, len, "roads.csv", line, &g), st);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(gmm_error_message(), want) != NULL, "message '%s' lacks '%s'",
                  gmm_error_message(), want);
}

START_TEST(test_csr_sorted_with_lengths)
{
    /* Edges given in arbitrary order and orientation. */
    size_t ei[] = {3, 0, 2, 1, 4};
    size_t ej[] = {0, 1, 0, 2, 2};
    double len[] = {30.0, 1.5, 20.0, 12.0, 42.0};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(6, 5, ei, ej, len, NULL, NULL, &g), GMM_OK);
    ck_assert_uint_eq(g->n, 6);
    ck_assert_uint_eq(g->nedge, 5);
    ck_assert_uint_eq(g->nmerged, 0);
    ck_assert(g->has_length);
    /* node 0: 1, 2, 3; node 1: 0, 2; node 2: 0, 1, 4; node 3: 0; node 4: 2;
     * node 5 isolated. */
    size_t want_ptr[] = {0, 3, 5, 8, 9, 10, 10};
    size_t want_adj[] = {1, 2, 3, 0, 2, 0, 1, 4, 0, 2};
    double want_len[] = {1.5, 20, 30, 1.5, 12, 20, 12, 42, 30, 42};
    for (size_t v = 0; v <= 6; v++)
        ck_assert_uint_eq(g->ptr[v], want_ptr[v]);
    for (size_t p = 0; p < 10; p++) {
        ck_assert_uint_eq(g->adj[p], want_adj[p]);
        ck_assert(g->len[p] == want_len[p]);
    }
    size_t comp[6], nc;
    ck_assert_int_eq(gmm_graph_components(g, comp, &nc), GMM_OK);
    ck_assert_uint_eq(nc, 2);
    ck_assert_uint_eq(comp[5], 1);
    for (size_t v = 0; v < 5; v++)
        ck_assert_uint_eq(comp[v], 0);
    gmm_graph_free(g);
}
END_TEST

START_TEST(test_no_lengths_means_one)
{
    size_t ei[] = {0, 1}, ej[] = {1, 2};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(3, 2, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    ck_assert(!g->has_length);
    for (size_t p = 0; p < 4; p++)
        ck_assert(g->len[p] == 1.0);
    gmm_graph_free(g);
}
END_TEST

START_TEST(test_duplicates_merged)
{
    /* (1,2) three times, once reversed, all of length 5; lines 2.. */
    size_t ei[] = {0, 1, 2, 1, 2}, ej[] = {1, 2, 1, 2, 3};
    double len[] = {1.0, 5.0, 5.0, 5.0, 2.0};
    size_t line[] = {2, 3, 4, 6, 7};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(4, 5, ei, ej, len, "roads.csv", line, &g), GMM_OK);
    ck_assert_uint_eq(g->nedge, 3);
    ck_assert_uint_eq(g->nmerged, 2);
    ck_assert_uint_eq(g->dup_line, 4);
    ck_assert_uint_eq(g->ptr[2] - g->ptr[1], 2);
    gmm_graph_free(g);
}
END_TEST

START_TEST(test_bad_inputs_name_the_line)
{
    size_t line[] = {2, 3, 5, 8};
    {
        size_t ei[] = {0, 1, 2, 3}, ej[] = {1, 2, 2, 0};
        expect_error(4, 4, ei, ej, NULL, line, GMM_EPARSE, "roads.csv:5: self-loop at node '2'");
    }
    {
        size_t ei[] = {0, 1, 2, 3}, ej[] = {1, 2, 3, 0};
        double len[] = {1, 0.0, 2, 3};
        expect_error(4, 4, ei, ej, len, line, GMM_EPARSE,
                     "roads.csv:3: edge '1'-'2': length 0 is not positive");
        len[1] = 1;
        len[3] = -2;
        expect_error(4, 4, ei, ej, len, line, GMM_EPARSE, "roads.csv:8: edge '3'-'0': length -2");
        len[3] = NAN;
        expect_error(4, 4, ei, ej, len, line, GMM_EPARSE, "roads.csv:8: edge '3'-'0': length nan "
                                                          "is not finite");
        len[3] = INFINITY;
        expect_error(4, 4, ei, ej, len, line, GMM_EPARSE, "is not finite");
    }
    {
        /* (1,2) at line 3 with 4.0, again reversed at line 8 with 4.5. */
        size_t ei[] = {0, 1, 2, 2}, ej[] = {1, 2, 3, 1};
        double len[] = {1, 4.0, 2, 4.5};
        expect_error(4, 4, ei, ej, len, line, GMM_EPARSE,
                     "roads.csv:8: edge '2'-'1' listed again with a different length (4.5 here, "
                     "4 at line 3)");
    }
    {
        /* Two conflicting pairs: the earlier offending line is reported. */
        size_t ei[] = {5, 0, 0, 5, 6}, ej[] = {6, 1, 1, 6, 7};
        double len[] = {1, 2, 3, 4, 5};
        size_t ln[] = {2, 3, 4, 9, 10};
        expect_error(8, 5, ei, ej, len, ln, GMM_EPARSE, "roads.csv:4: edge '0'-'1'");
    }
    {
        size_t ei[] = {0}, ej[] = {1};
        expect_error(2, 0, ei, ej, NULL, NULL, GMM_EPARSE, "roads.csv: the edge list has no edges");
        expect_error(1, 1, ei, ej, NULL, line, GMM_EINVAL, "out of range");
        /* No line numbers: the edge's position is named. */
        size_t a[] = {0, 1}, b[] = {1, 1};
        expect_error(2, 2, a, b, NULL, NULL, GMM_EPARSE, "roads.csv: edge 1: self-loop");
    }
}
END_TEST

START_TEST(test_index_graph_labels)
{
    size_t ei[] = {0}, ej[] = {1};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(12, 1, ei, ej, NULL, NULL, NULL, &g), GMM_OK);
    char buf[24];
    ck_assert_str_eq(gmm_graph_node_label(g, 11, buf), "11");
    size_t v = 99;
    ck_assert(gmm_graph_node_find(g, " 11 ", &v));
    ck_assert_uint_eq(v, 11);
    ck_assert(!gmm_graph_node_find(g, "12", &v));
    ck_assert(!gmm_graph_node_find(g, "x", &v));
    ck_assert(!gmm_graph_node_find(g, "", &v));
    ck_assert_int_eq(gmm_graph_node_add(g, "new", &v), GMM_EINVAL);
    gmm_graph_free(g);
    gmm_graph_free(NULL);
}
END_TEST

START_TEST(test_large_random_consistent)
{
    /* CSR against a direct count: every input edge is found in both rows
     * with its length, rows are strictly increasing, degrees sum to 2m. */
    tu_rng r;
    tu_rng_seed(&r, 21);
    size_t n = 500, m = 3000;
    size_t *ei = malloc(m * sizeof *ei), *ej = malloc(m * sizeof *ej);
    double *len = malloc(m * sizeof *len);
    for (size_t k = 0; k < m; k++) {
        ei[k] = (size_t)(tu_uniform(&r) * (double)n);
        do
            ej[k] = (size_t)(tu_uniform(&r) * (double)n);
        while (ej[k] == ei[k]);
        /* Length a function of the pair, so repeats are identical. */
        size_t lo = ei[k] < ej[k] ? ei[k] : ej[k], hi = ei[k] ^ ej[k] ^ lo;
        len[k] = 1.0 + (double)(lo * 7 + hi * 13 % 101);
    }
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_edges(n, m, ei, ej, len, NULL, NULL, &g), GMM_OK);
    ck_assert_uint_eq(g->nedge + g->nmerged, m);
    ck_assert_uint_eq(g->ptr[n], 2 * g->nedge);
    for (size_t v = 0; v < n; v++)
        for (size_t p = g->ptr[v] + 1; p < g->ptr[v + 1]; p++)
            ck_assert_uint_lt(g->adj[p - 1], g->adj[p]);
    for (size_t k = 0; k < m; k++)
        for (int side = 0; side < 2; side++) {
            size_t a = side ? ej[k] : ei[k], b = side ? ei[k] : ej[k];
            int found = 0;
            for (size_t p = g->ptr[a]; p < g->ptr[a + 1]; p++)
                if (g->adj[p] == b) {
                    found = 1;
                    ck_assert(g->len[p] == len[k]);
                }
            ck_assert(found);
        }
    gmm_graph_free(g);
    free(ei);
    free(ej);
    free(len);
}
END_TEST

START_TEST(test_out_of_memory_paths)
{
    size_t ei[] = {0, 1, 2, 3, 1}, ej[] = {1, 2, 3, 0, 3};
    int failed = 0;
    for (long k = 0; k < 20; k++) {
        gmm_graph *g = NULL;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_graph_from_edges(5, 5, ei, ej, NULL, NULL, NULL, &g);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            gmm_graph_free(g);
            break;
        }
        ck_assert_int_eq(st, GMM_ENOMEM);
        ck_assert_ptr_null(g);
        failed++;
    }
    ck_assert_int_gt(failed, 0);
}
END_TEST


/* ---- edge lists and node data from CSV files ---------------------------------- */

/* Read `text` as a CSV edge list through gmm_table_read and the model
 * layer's table-to-labels step (model.h: gmm_mdl_graph_read). */
static gmm_status read_edges(const char *dir, const char *text, const char *ci, const char *cj,
                             const char *cl, int optional, gmm_graph **g)
{
    char *path = tu_write_str(dir, "edges.csv", text);
    gmm_table *t = NULL;
    gmm_status st = gmm_table_read(path, &t);
    if (st == GMM_OK)
        st = gmm_mdl_graph_read(t, ci, cj, cl, optional, g);
    gmm_table_free(t);
    free(path);
    return st;
}

static void expect_table_error(const char *dir, const char *text, const char *want)
{
    gmm_graph *g = (gmm_graph *)1;
    gmm_error_clear();
    ck_assert_int_eq(read_edges(dir, text, NULL, NULL, "length", 1, &g), GMM_EPARSE);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(gmm_error_message(), want) != NULL, "message '%s' lacks '%s'",
                  gmm_error_message(), want);
}

START_TEST(test_table_labels_in_order_of_appearance)
{
    char *dir = tu_mkdtemp();
    gmm_graph *g = NULL;
    ck_assert_int_eq(read_edges(dir,
                                "i,j,length\n"
                                "oak,elm,2.5\n"
                                "17,oak,1\n"
                                "\n"
                                " elm , 17 ,4\n"
                                "3,17,1\n"
                                "elm,oak,2.5\n",
                                NULL, NULL, "length", 1, &g),
                     GMM_OK);
    ck_assert_uint_eq(g->n, 4);
    ck_assert_uint_eq(g->nedge, 4);
    ck_assert_uint_eq(g->nmerged, 1);
    ck_assert_uint_eq(g->dup_line, 7);
    ck_assert(g->has_length);
    char buf[24];
    const char *want[] = {"oak", "elm", "17", "3"};
    for (size_t v = 0; v < 4; v++) {
        ck_assert_str_eq(gmm_graph_node_label(g, v, buf), want[v]);
        size_t w = 99;
        ck_assert(gmm_graph_node_find(g, want[v], &w));
        ck_assert_uint_eq(w, v);
    }
    size_t w;
    ck_assert(!gmm_graph_node_find(g, "017", &w)); /* labels are text */
    /* oak-17 has length 1, elm-17 length 4. */
    for (size_t p = g->ptr[2]; p < g->ptr[3]; p++)
        ck_assert(g->len[p] == (g->adj[p] == 1 ? 4.0 : 1.0));
    gmm_graph_free(g);

    /* No length column: lengths 1 when optional, an error when named. */
    ck_assert_int_eq(read_edges(dir, "a,b\n1,2\n2,3\n", "a", "b", "length", 1, &g), GMM_OK);
    ck_assert(!g->has_length);
    ck_assert(g->len[0] == 1.0);
    gmm_graph_free(g);
    g = NULL;
    ck_assert_int_eq(read_edges(dir, "a,b\n1,2\n", "a", "b", "len", 0, &g), GMM_EPARSE);
    ck_assert(strstr(gmm_error_message(), "no column 'len'"));
    ck_assert_int_eq(read_edges(dir, "from,to\n1,2\n", NULL, NULL, NULL, 1, &g), GMM_EPARSE);
    ck_assert(strstr(gmm_error_message(), "no column 'i'"));
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

START_TEST(test_table_bad_inputs_name_file_and_line)
{
    char *dir = tu_mkdtemp();
    expect_table_error(dir, "i,j,length\n1,2,1\n2,2,1\n", "edges.csv:3: self-loop at node '2'");
    expect_table_error(dir, "i,j,length\n1,2,1\n\n2,3,0\n",
                       "edges.csv:4: edge '2'-'3': length 0 is not positive");
    expect_table_error(dir, "i,j,length\n1,2,-3.5\n", "edges.csv:2: edge '1'-'2': length -3.5");
    expect_table_error(dir, "i,j,length\n1,2,abc\n", "edges.csv:2: column 'length': 'abc' is "
                                                       "not a number");
    expect_table_error(dir, "i,j,length\n1,2,inf\n", "edges.csv:2: column 'length': 'inf' is "
                                                       "not finite");
    expect_table_error(dir, "i,j,length\n1,2,NA\n", "edges.csv:2: column 'length'");
    expect_table_error(dir, "i,j,length\n1,2,5\n2,3,1\n2,1,6\n",
                       "edges.csv:4: edge '2'-'1' listed again with a different length (6 here, "
                       "5 at line 2)");
    expect_table_error(dir, "i,j,length\n1,,5\n", "edges.csv:2: column 'j': empty node id");
    /* an empty node id is reported before a malformed length on an earlier row */
    expect_table_error(dir, "i,j,length\n1,2,abc\n3,,1\n",
                       "edges.csv:3: column 'j': empty node id");
    expect_table_error(dir, "i,j,length\n", "edges.csv: the edge list has no edges");
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

START_TEST(test_attach_nodes)
{
    char *dir = tu_mkdtemp();
    gmm_graph *g = NULL;
    ck_assert_int_eq(read_edges(dir, "i,j\na,b\nb,c\n", NULL, NULL, "length", 1, &g), GMM_OK);
    char *path = tu_write_str(dir, "data.csv", "node,y\nc,1\nz,2\na,3\nz,4\nq,5\n");
    gmm_table *t = NULL;
    ck_assert_int_eq(gmm_table_read(path, &t), GMM_OK);
    size_t node[5], *added = NULL, nadded = 0;

    /* strict: the first absent node is an error at its line. */
    ck_assert_int_eq(gmm_mdl_graph_attach(g, t, "node", 1, node, &added, &nadded),
                     GMM_EPARSE);
    ck_assert(strstr(gmm_error_message(), "data.csv:3: node 'z' is not in the edge list"));
    ck_assert_ptr_null(added);
    ck_assert_uint_eq(g->n, 3);

    ck_assert_int_eq(gmm_mdl_graph_attach(g, t, "node", 0, node, &added, &nadded), GMM_OK);
    ck_assert_uint_eq(nadded, 2);
    ck_assert_uint_eq(g->n, 5);
    ck_assert_uint_eq(g->nisolated_added, 2);
    size_t want[] = {2, 3, 0, 3, 4};
    for (size_t r = 0; r < 5; r++)
        ck_assert_uint_eq(node[r], want[r]);
    ck_assert_uint_eq(added[0], 3);
    ck_assert_uint_eq(added[1], 4);
    char buf[24];
    ck_assert_str_eq(gmm_graph_node_label(g, 3, buf), "z");
    ck_assert_uint_eq(g->ptr[5], g->ptr[3]); /* isolated: empty rows */
    ck_assert_uint_eq(g->ptr[5], 2 * g->nedge);
    gmm_free(added);
    ck_assert_int_eq(gmm_graph_node_add(g, "z", &node[0]), GMM_EINVAL);

    /* The grown graph still orders, with the new nodes as components. */
    size_t perm[5], iperm[5], comp[5], nc;
    ck_assert_int_eq(gmm_graph_rcm(g, perm, iperm), GMM_OK);
    ck_assert(gmm_graph_perm_check(5, perm, iperm));
    ck_assert_int_eq(gmm_graph_components(g, comp, &nc), GMM_OK);
    ck_assert_uint_eq(nc, 3);

    ck_assert_int_eq(gmm_mdl_graph_attach(g, t, "site", 0, node, &added, &nadded), GMM_EPARSE);
    ck_assert(strstr(gmm_error_message(), "no column 'site'"));
    gmm_table_free(t);
    free(path);
    gmm_graph_free(g);
    tu_rmdir_all(dir);
    free(dir);
}
END_TEST

START_TEST(test_labels_from_arrays)
{
    /* Labels without a file's lines: messages count edges and rows from 0. */
    const char *a[] = {"x", " y ", "z"}, *b[] = {"y", "z", "x"};
    gmm_graph_column ci = {3, a, NULL, NULL, "from"}, cj = {3, b, NULL, NULL, "to"};
    gmm_graph *g = NULL;
    ck_assert_int_eq(gmm_graph_from_labels(&ci, &cj, NULL, &g), GMM_OK);
    ck_assert_uint_eq(g->n, 3);
    ck_assert_uint_eq(g->nedge, 3);
    ck_assert(!g->has_length);
    char buf[24];
    ck_assert_str_eq(gmm_graph_node_label(g, 1, buf), "y");

    const char *nodes[] = {"z", "w", ""};
    gmm_graph_column cn = {2, nodes, "data.csv", NULL, "node"};
    size_t node[3], *added = NULL, nadded = 0;
    ck_assert_int_eq(gmm_graph_attach_nodes(g, &cn, 1, node, &added, &nadded), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "data.csv: row 1: node 'w' is not in the edge list");
    ck_assert_ptr_null(added);
    cn.n = 3;
    ck_assert_int_eq(gmm_graph_attach_nodes(g, &cn, 0, node, &added, &nadded), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "data.csv: row 2: column 'node': empty node id");
    ck_assert_ptr_null(added);
    gmm_graph_free(g);

    b[1] = "  ";
    g = (gmm_graph *)1;
    ck_assert_int_eq(gmm_graph_from_labels(&ci, &cj, NULL, &g), GMM_EPARSE);
    ck_assert_ptr_null(g);
    ck_assert_str_eq(gmm_error_message(), "edge list: edge 1: column 'to': empty node id");
    ck_assert_uint_eq(gmm_error_index(), 1);
    cj.n = 2;
    ck_assert_int_eq(gmm_graph_check_labels(&ci, &cj), GMM_EINVAL);
}
END_TEST

START_TEST(test_shared_data_graphs)
{
    /* The three real graphs shipped in data/ (counts from their README). */
    const char *file[] = {"data/chicago_road_edges.csv", "data/berlin_adlershof_road_edges.csv",
                          "data/flu_bybw_edges.csv"};
    size_t nodes[] = {338, 2407, 140}, nedges[] = {503, 2718, 336};
    for (int k = 0; k < 3; k++) {
        gmm_table *t = NULL;
        ck_assert_int_eq(gmm_table_read(file[k], &t), GMM_OK);
        gmm_graph *g = NULL;
        ck_assert_int_eq(gmm_mdl_graph_read(t, NULL, NULL, "length", 1, &g), GMM_OK);
        ck_assert_uint_eq(g->n, nodes[k]);
        ck_assert_uint_eq(g->nedge, nedges[k]);
        ck_assert_uint_eq(g->nmerged, 0);
        size_t *comp = malloc(g->n * sizeof *comp), nc;
        ck_assert_int_eq(gmm_graph_components(g, comp, &nc), GMM_OK);
        ck_assert_uint_eq(nc, 1);
        free(comp);
        gmm_graph_free(g);
        gmm_table_free(t);
    }
}
END_TEST

extern Suite *graph_suite(void);
Suite *graph_suite(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_csr_sorted_with_lengths);
    tcase_add_test(tc, test_no_lengths_means_one);
    tcase_add_test(tc, test_duplicates_merged);
    tcase_add_test(tc, test_bad_inputs_name_the_line);
    tcase_add_test(tc, test_index_graph_labels);
    tcase_add_test(tc, test_large_random_consistent);
    tcase_add_test(tc, test_out_of_memory_paths);
    tcase_add_test(tc, test_table_labels_in_order_of_appearance);
    tcase_add_test(tc, test_table_bad_inputs_name_file_and_line);
    tcase_add_test(tc, test_attach_nodes);
    tcase_add_test(tc, test_labels_from_arrays);
    tcase_add_test(tc, test_shared_data_graphs);
    suite_add_tcase(s, tc);
    return s;
}
