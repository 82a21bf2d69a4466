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

int cmd_order(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"edge-cols", required_argument, NULL, 'c'},
        {"perm", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cols = NULL, *ci = "i", *cj = "j", *cl = "length";
    const char *perm_path = NULL;
    int len_optional = 1, c;

    optind = 1;
    opterr = 0;
    cli_opt_seen seen = {NULL, {0}, 0};
    while ((c = cli_getopt("order", &seen, argc, argv, ":h", longopts)) != -1) {
        switch (c) {
        case CLI_OPT_REPEATED:
            return CLI_EXIT_USAGE;
        case 'c':
            cols = optarg;
            break;
        case 'p':
            perm_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        case ':':
            return cli_usage_error("order", "option '%s' needs an argument", argv[optind - 1]);
        default:
            return cli_usage_error("order", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("order", "%s", argc - optind < 1 ? "missing EDGES.csv"
                                                   : "expected one EDGES.csv argument");
    const char *edges_path = argv[optind];

    char *colbuf = NULL;
    if (cols) {
        colbuf = malloc(strlen(cols) + 1);
        if (!colbuf) {
            cli_msg(CMD, "out of memory");
            return CLI_EXIT_ERROR;
        }
        strcpy(colbuf, cols);
        if (split_cols(colbuf, &ci, &cj, &cl) != 0) {
            free(colbuf);
            return cli_usage_error("order", "--edge-cols wants I,J or I,J,LEN, got '%s'", cols);
        }
        len_optional = 0; /* named: required; absent: no lengths */
    }

    int rc = CLI_EXIT_OK;
    gmm_table *t = NULL;
    gmm_graph *g = NULL;
    size_t *perm = NULL, *iperm = NULL, *comp = NULL, ncomp = 0;
    /* An unwritable --perm, or one that is the edge list, is reported
     * before the graph is read. */
    cli_io io;
    cli_io_init(&io);
    cli_io_output(&io, "--perm", perm_path, NULL);
    cli_io_input(&io, "the edge list", edges_path);
    gmm_status st = gmm_outfile_check(perm_path);
    if (st == GMM_OK && (rc = cli_io_check(CMD, &io)) != 0) {
        cli_io_free(&io);
        free(colbuf);
        return rc;
    }
    cli_io_free(&io);
    if (st == GMM_OK)
        st = gmm_table_read(edges_path, &t);
    if (st == GMM_OK)
        st = gmm_mdl_graph_read(t, ci, cj, cl, len_optional, &g);
    if (st != GMM_OK) {
        rc = cli_fail(CMD, st);
        goto done;
    }
    if (g->nmerged)
        cli_msg(CMD, "%s:%zu: warning: %zu duplicate edge%s merged (first here)", t->file,
                g->dup_line, g->nmerged, g->nmerged == 1 ? "" : "s");
    perm = gmm_malloc(g->n, sizeof *perm);
    iperm = gmm_malloc(g->n, sizeof *iperm);
    comp = gmm_malloc(g->n, sizeof *comp);
    if (!perm || !iperm || !comp) {
        cli_msg(CMD, "out of memory ordering %zu nodes", g->n);
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    if ((st = gmm_graph_rcm(g, perm, iperm)) != GMM_OK ||
        (st = gmm_graph_components(g, comp, &ncomp)) != GMM_OK ||
        (st = write_outputs(perm_path, g, ncomp, iperm)) != GMM_OK) {
        rc = cli_fail(CMD, st);
        goto done;
    }

done:
    gmm_free(perm);
    gmm_free(iperm);
    gmm_free(comp);
    gmm_graph_free(g);
    gmm_table_free(t);
    free(colbuf);
    return rc;
}
