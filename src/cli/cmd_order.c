/* cmd_order.c -- `gmm-infer order EDGES.csv`: the reverse Cuthill-McKee
 * ordering of a graph (the symbolic step of every graph model), reported as
 * JSON, optionally with the permutation as CSV. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/graph.h"
#include "gmm/io.h"
#include "gmm/json.h"
#include "gmm/model.h"
#include "gmm/version.h"

static const char *CMD = "order";

static void usage(FILE *f)
{
    fputs("Usage: gmm-infer order [OPTIONS] EDGES.csv\n"
          "\n"
          "Order the nodes of an undirected graph by reverse Cuthill-McKee and print, as\n"
          "JSON on stdout, the node, edge and component counts with the bandwidth and\n"
          "profile of the adjacency matrix before and after ordering.  EDGES.csv ('-' for\n"
          "stdin) has a header row and one edge per row; node ids are labels (integers or\n"
          "strings), numbered in order of first appearance; the \"before\" figures are\n"
          "for that numbering.\n"
          "\n"
          "Options:\n"
          "  --edge-cols I,J[,LEN]  columns of the two end nodes and of the edge length\n"
          "                         (default i,j,length; the length column is optional\n"
          "                         unless named here, and only validated by this command)\n"
          "  --perm FILE            also write the permutation as CSV 'node,position'\n"
          "                         (position 0-based, one row per node in order of\n"
          "                         appearance), atomically\n"
          "  -h, --help             show this help and exit\n"
          "\n"
          "Exit status: 0 success, 1 bad input or I/O error, 2 usage error.\n",
          f);
}

/* Split "I,J[,LEN]" in place into its names (LEN NULL when absent); 0 on
 * success. */
static int split_cols(char *spec, const char **ci, const char **cj, const char **cl)
{
    char *c1 = strchr(spec, ','), *c2;
    if (!c1)
        return -1;
    *c1 = '\0';
    *ci = spec;
    *cj = c1 + 1;
    *cl = NULL;
    if ((c2 = strchr(c1 + 1, ',')) != NULL) {
        *c2 = '\0';
        *cl = c2 + 1;
        if (strchr(c2 + 1, ',') || !c2[1])
            return -1;
    }
    return (**ci && **cj) ? 0 : -1;
}

static void write_perm(FILE *f, const gmm_graph *g, const size_t *iperm)
{
    char buf[24];
    fputs("node,position\n", f);
    for (size_t v = 0; v < g->n; v++) {
        gmm_csv_put_field(f, gmm_graph_node_label(g, v, buf));
        fprintf(f, ",%zu\n", iperm[v]);
    }
}

static gmm_status print_report(FILE *f, const gmm_graph *g, size_t ncomp, const size_t *iperm)
{
    json_t *root = json_object();
    if (!root)
        return gmm_error(GMM_ENOMEM, "out of memory");
    gmm_status st = GMM_OK;
    const struct {
        const char *key;
        size_t value;
    } items[] = {
        {"nodes", g->n},
        {"edges", g->nedge},
        {"components", ncomp},
        {"bandwidth_before", gmm_graph_bandwidth(g, NULL)},
        {"bandwidth_after", gmm_graph_bandwidth(g, iperm)},
        {"profile_before", gmm_graph_profile(g, NULL)},
        {"profile_after", gmm_graph_profile(g, iperm)},
    };
    if (json_object_set_new(root, "version", json_string(GMM_VERSION)) != 0)
        st = gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t k = 0; st == GMM_OK && k < sizeof items / sizeof items[0]; k++)
        if (json_object_set_new(root, items[k].key, json_integer((json_int_t)items[k].value)))
            st = gmm_error(GMM_ENOMEM, "out of memory");
    if (st == GMM_OK)
        st = gmm_json_write(f, root, "<stdout>");
    json_decref(root);
    return st;
}

/* --perm's table (when perm_path) and the report on stdout, committed
 * together: a report that cannot be written leaves no --perm file. */
static gmm_status write_outputs(const char *perm_path, const gmm_graph *g, size_t ncomp,
                                const size_t *iperm)
{
    gmm_outset *set = NULL;
    gmm_outfile *o = NULL;
    gmm_status st = gmm_outset_alloc(&set);
    if (st == GMM_OK && perm_path && (st = gmm_outset_open(set, perm_path, &o)) == GMM_OK)
        write_perm(gmm_outfile_stream(o), g, iperm);
    if (st == GMM_OK && (st = gmm_outset_open(set, NULL, &o)) == GMM_OK)
        st = print_report(gmm_outfile_stream(o), g, ncomp, iperm);
    if (st == GMM_OK) {
        st = gmm_outset_commit(set);
        set = NULL;
    }
    gmm_outset_abort(set);
    return st;
}

typedef struct {
    const char *edges, *perm;   /* EDGES.csv, --perm FILE */
    const char *ci, *cj, *cl;   /* --edge-cols I,J[,LEN] */
    int len_optional;           /* no --edge-cols: lengths when there is a column */
    char *colbuf;               /* --edge-cols's copy, split */
} order_args;

/* The options: -1 to go on, or the exit code to end with (after the
 * message; 0 after --help). */
static int parse_args(int argc, char **argv, order_args *a)
{
    static const struct option longopts[] = {
        {"edge-cols", required_argument, NULL, 'c'},
        {"perm", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cols = NULL;
    int c;
    optind = 1;
    opterr = 0;
    cli_opt_seen seen = {NULL, {0}, 0};
    while ((c = cli_getopt("order", &seen, argc, argv, ":h", longopts)) != -1) {
        switch (c) {
        case CLI_OPT_REPEATED: return CLI_EXIT_USAGE;
        case 'c': cols = optarg; break;
        case 'p': a->perm = optarg; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case ':':
            return cli_usage_error("order", "option '%s' needs an argument", argv[optind - 1]);
        default: return cli_usage_error("order", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("order", "%s", argc - optind < 1 ? "missing EDGES.csv"
                                                   : "expected one EDGES.csv argument");
    a->edges = argv[optind];
    if (!cols)
        return -1;
    if (!(a->colbuf = malloc(strlen(cols) + 1))) {
        cli_msg(CMD, "out of memory");
        return CLI_EXIT_ERROR;
    }
    strcpy(a->colbuf, cols);
    if (split_cols(a->colbuf, &a->ci, &a->cj, &a->cl) != 0)
        return cli_usage_error("order", "--edge-cols wants I,J or I,J,LEN, got '%s'", cols);
    a->len_optional = 0; /* named: required; absent: no lengths */
    return -1;
}

/* The graph of the edge list, once --perm is known writable and not the
 * edge list (reported before the graph is read).  0 or an exit code. */
static int read_graph(const order_args *a, gmm_table **t, gmm_graph **g)
{
    int rc = 0;
    cli_io io;
    cli_io_init(&io);
    cli_io_output(&io, "--perm", a->perm, NULL);
    cli_io_input(&io, "the edge list", a->edges);
    gmm_status st = gmm_outfile_check(a->perm);
    if (st == GMM_OK)
        rc = cli_io_check(CMD, &io);
    cli_io_free(&io);
    if (rc)
        return rc;
    if (st == GMM_OK)
        st = gmm_table_read(a->edges, t);
    if (st == GMM_OK)
        st = gmm_mdl_graph_read(*t, a->ci, a->cj, a->cl, a->len_optional, g);
    if (st != GMM_OK)
        return cli_fail(CMD, st);
    if ((*g)->nmerged)
        cli_msg(CMD, "%s:%zu: warning: %zu duplicate edge%s merged (first here)", (*t)->file,
                (*g)->dup_line, (*g)->nmerged, (*g)->nmerged == 1 ? "" : "s");
    return 0;
}

/* The RCM order and the components of g, written.  0 or an exit code. */
static int order_graph(const order_args *a, const gmm_graph *g)
{
    size_t *perm = gmm_malloc(g->n, sizeof *perm), *iperm = gmm_malloc(g->n, sizeof *iperm);
    size_t *comp = gmm_malloc(g->n, sizeof *comp), ncomp = 0;
    int rc = 0;
    gmm_status st;
    if (!perm || !iperm || !comp) {
        cli_msg(CMD, "out of memory ordering %zu nodes", g->n);
        rc = CLI_EXIT_ERROR;
    } else if ((st = gmm_graph_rcm(g, perm, iperm)) != GMM_OK ||
               (st = gmm_graph_components(g, comp, &ncomp)) != GMM_OK ||
               (st = write_outputs(a->perm, g, ncomp, iperm)) != GMM_OK) {
        rc = cli_fail(CMD, st);
    }
    gmm_free(perm);
    gmm_free(iperm);
    gmm_free(comp);
    return rc;
}

int cmd_order(int argc, char **argv)
{
    order_args a = {NULL, NULL, "i", "j", "length", 1, NULL};
    gmm_table *t = NULL;
    gmm_graph *g = NULL;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0 && (rc = read_graph(&a, &t, &g)) == 0)
        rc = order_graph(&a, g);
    gmm_graph_free(g);
    gmm_table_free(t);
    free(a.colbuf);
    return rc;
}
