/* cli_model.c -- options, data and model construction shared by loglik,
 * fit, gradcheck and predict (see cli_model.h). */
#include "cli_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/io.h"
#include "gmm/kernel.h"
#include "gmm/spec.h"
#include "gmm/ssm.h"

const char cli_model_options_help[] =
    "Model (state-space GP):\n"
    "  --kernel SPEC       kernel spec, e.g. 'matern32 + quasiperiodic(period=1)'\n"
    "                      (default: " CLI_DEFAULT_KERNEL ",\n"
    "                      period held fixed unless --free-period)\n"
    "  --x NAME, --y NAME  input and output columns (default: the first two)\n"
    "  --merge-tol T       inputs closer than T share one state (default 0)\n"
    "  --factor F          auto (default), cholesky or square-root: how the posterior\n"
    "                      precision is factorised (man page: Factorisation)\n"
    "Model (graph GMRF):\n"
    "  --graph EDGES.csv   edge list (columns i,j[,length])\n"
    "  --edge-cols I,J[,LEN]  its column names\n"
    "  --precision SPEC    e.g. 'edge-ou(variance=1, lengthscale=10)'\n"
    "  --node NAME, --y NAME  node and outcome columns of DATA.csv\n"
    "  --strict-nodes      a DATA.csv node missing from the graph is an error\n"
    "Both:\n"
    "  --noise V           Gaussian noise variance (default: a tenth of var(y))\n"
    "  --no-center         do not subtract the mean of the observed y\n"
    "  --fix NAME          hold parameter NAME during a fit (repeatable)\n"
    "  --verbose           report defaults, sizes and progress on stderr\n";

struct cli_model {
    int graph;
    char *data_file;
    char *xname, *yname, *nodename;
    char *spec_text;
    gmm_spec_node *spec;
    double center;
    int has_center;
    double merge_tol;
    size_t nrow, nobs;
    double *x, *y; /* nrow each (y centred, NAN missing) */
    /* state-space */
    gmm_kernel *kernel;
    gmm_ssm *ssm;
    /* graph */
    char *graph_file;
    char *edge_cols[3];
    int len_optional;
    gmm_graph *g;
    gmm_gmrf *gmrf;
    gmm_gmrf_obs *gobs;
    size_t *row_node;
    gmm_objective *gobj;  /* graph objective (owned) */
    gmm_objective obj;    /* the model's objective; for graphs a copy of *gobj
                           * sharing its arrays */
};

void cli_model_opts_init(cli_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->noise = NAN;
}

void cli_model_opts_free(cli_model_opts *o)
{
    gmm_free((void *)o->fix);
    o->fix = NULL;
    o->nfix = 0;
}

static int parse_positive(const char *cmd, const char *opt, const char *arg, int zero_ok,
                          double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end || !isfinite(v) || v < 0 || (!zero_ok && v == 0)) {
        cli_msg(cmd, "--%s: '%s' is not a %s number", opt, arg,
                zero_ok ? "non-negative" : "positive");
        return -1;
    }
    *out = v;
    return 1;
}

int cli_model_opt(cli_model_opts *o, const char *cmd, int c, const char *arg)
{
    if (c >= CLI_OPT_KERNEL && c < CLI_OPT_VERBOSE)
        o->given++;
    switch (c) {
    case CLI_OPT_KERNEL: o->kernel = arg; return 1;
    case CLI_OPT_GRAPH: o->graph = arg; return 1;
    case CLI_OPT_PRECISION: o->precision = arg; return 1;
    case CLI_OPT_EDGE_COLS: o->edge_cols = arg; return 1;
    case CLI_OPT_X: o->xcol = arg; return 1;
    case CLI_OPT_Y: o->ycol = arg; return 1;
    case CLI_OPT_NODE: o->node = arg; return 1;
    case CLI_OPT_NOISE: return parse_positive(cmd, "noise", arg, 0, &o->noise);
    case CLI_OPT_NO_CENTER: o->no_center = 1; return 1;
    case CLI_OPT_STRICT_NODES: o->strict_nodes = 1; return 1;
    case CLI_OPT_MERGE_TOL: return parse_positive(cmd, "merge-tol", arg, 1, &o->merge_tol);
    case CLI_OPT_FREE_PERIOD: o->free_period = 1; return 1;
    case CLI_OPT_VERBOSE: o->verbose = 1; return 1;
    case CLI_OPT_FACTOR:
        if (!strcmp(arg, "auto"))
            o->factor = GMM_SSM_FACTOR_AUTO;
        else if (!strcmp(arg, "cholesky"))
            o->factor = GMM_SSM_FACTOR_CHOL;
        else if (!strcmp(arg, "square-root"))
            o->factor = GMM_SSM_FACTOR_ROWS;
        else {
            cli_msg(cmd, "--factor: '%s' is not auto, cholesky or square-root", arg);
            return -1;
        }
        return 1;
    case CLI_OPT_EXPOSURE:
        /* An exposure scales a count's rate; the Gaussian model has none.
         * Refused by name rather than accepted and ignored. */
        cli_msg(cmd, "--exposure applies to count likelihoods (Poisson), not to the Gaussian "
                     "marginal likelihood of this command");
        return -1;
    case CLI_OPT_FIX: {
        const char **f = gmm_realloc((void *)o->fix, o->nfix + 1, sizeof *f);
        if (!f) {
            cli_msg(cmd, "out of memory");
            return -1;
        }
        f[o->nfix++] = arg;
        o->fix = f;
        return 1;
    }
    default: return 0;
    }
}

int cli_model_common_opt(cli_model_opts *o, const char *cmd, int c, const char *arg,
                         const char *usage_text, int *rc)
{
    int r = cli_model_opt(o, cmd, c, arg);
    if (r > 0)
        return 1;
    if (r < 0) {
        *rc = CLI_EXIT_USAGE;
        return -1;
    }
    if (c == 'h') {
        fputs(usage_text, stdout);
        fputs(cli_model_options_help, stdout);
        *rc = CLI_EXIT_OK;
        return -1;
    }
    if (c == '?' || c == ':') {
        fprintf(stderr, "Try 'gmm-infer %s --help'.\n", cmd);
        *rc = CLI_EXIT_USAGE;
        return -1;
    }
    return 0;
}

static char *dup_str(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = gmm_malloc(n, 1);
    if (d)
        memcpy(d, s, n);
    return d;
}

void cli_model_free(cli_model *m)
{
    if (!m)
        return;
    gmm_ssm_free(m->ssm);
    gmm_kernel_free(m->kernel);
    gmm_gmrf_objective_free(m->gobj);
    gmm_gmrf_obs_free(m->gobs);
    gmm_gmrf_free(m->gmrf);
    gmm_graph_free(m->g);
    gmm_spec_free(m->spec);
    gmm_free(m->row_node);
    gmm_free(m->x);
    gmm_free(m->y);
    gmm_free(m->data_file);
    gmm_free(m->xname);
    gmm_free(m->yname);
    gmm_free(m->nodename);
    gmm_free(m->spec_text);
    gmm_free(m->graph_file);
    for (int i = 0; i < 3; i++)
        gmm_free(m->edge_cols[i]);
    gmm_free(m);
}

/* Count the observed y and centre them in place: by `fixed` when given (a
 * model file's centre, so other data stay on the fitted model's scale), else
 * by their mean; no_center leaves them as they are. */
static void center_y(cli_model *m, int no_center, const double *fixed)
{
    double sum = 0.0;
    size_t nobs = 0;
    for (size_t r = 0; r < m->nrow; r++)
        if (!isnan(m->y[r])) {
            sum += m->y[r];
            nobs++;
        }
    m->nobs = nobs;
    if (no_center) {
        m->has_center = 0;
        m->center = 0.0;
        return;
    }
    m->has_center = fixed != NULL || nobs > 0;
    m->center = fixed ? *fixed : nobs > 0 ? sum / (double)nobs : 0.0;
    if (m->has_center)
        for (size_t r = 0; r < m->nrow; r++)
            m->y[r] -= m->center;
}

/* Parse a spec, printing a caret on error.  0 or an exit code. */
static int parse_spec(const char *cmd, const char *text, gmm_spec_node **out)
{
    gmm_status s = gmm_spec_parse(text, out);
    if (s != GMM_OK) {
        cli_print_spec_error(cmd, text, gmm_error_index());
        return cli_exit_code(s);
    }
    return 0;
}

/* Apply --fix names (and the default kernel's fixed period). */
static int apply_fix(const char *cmd, cli_model *m, const char **fix, size_t nfix)
{
    for (size_t f = 0; f < nfix; f++) {
        size_t i;
        for (i = 0; i < m->obj.nparam; i++)
            if (!strcmp(m->obj.name[i], fix[f]))
                break;
        if (i == m->obj.nparam) {
            cli_msg(cmd, "--fix: no parameter '%s'; the parameters are:", fix[f]);
            for (size_t k = 0; k < m->obj.nparam; k++)
                fprintf(stderr, "  %s\n", m->obj.name[k]);
            return CLI_EXIT_USAGE;
        }
        m->obj.fixed[i] = 1;
    }
    return 0;
}

/* ---- state-space models ---------------------------------------------------- */

static int load_table_xy(const char *cmd, cli_model *m, const char *path, const char *xcol,
                         const char *ycol)
{
    gmm_table *t = NULL;
    gmm_status s = gmm_table_read(path, &t);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    int rc = 0;
    size_t cx, cy;
    if (t->ncol < 2 && (!xcol || !ycol)) {
        cli_msg(cmd, "%s: need two columns (x and y), found %zu", t->file, t->ncol);
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    if ((s = xcol ? gmm_table_column(t, xcol, &cx) : (cx = 0, GMM_OK)) != GMM_OK ||
        (s = ycol ? gmm_table_column(t, ycol, &cy) : (cy = 1, GMM_OK)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (t->nrow == 0) {
        cli_msg(cmd, "%s: no data rows", t->file);
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    m->nrow = t->nrow;
    m->x = gmm_malloc(t->nrow, sizeof(double));
    m->y = gmm_malloc(t->nrow, sizeof(double));
    m->xname = dup_str(t->header[cx]);
    m->yname = dup_str(t->header[cy]);
    if (!m->x || !m->y || !m->xname || !m->yname) {
        cli_msg(cmd, "out of memory");
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    if ((s = gmm_table_column_double(t, cx, 0, m->x)) != GMM_OK ||
        (s = gmm_table_column_double(t, cy, 1, m->y)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
done:
    gmm_table_free(t);
    return rc;
}

static int build_ssm(const char *cmd, cli_model *m, double noise, double merge_tol, int factor,
                     int verbose)
{
    gmm_status s;
    int rc;
    if ((rc = parse_spec(cmd, m->spec_text, &m->spec)) != 0)
        return rc;
    if ((s = gmm_kernel_from_spec(m->spec, &m->kernel)) != GMM_OK) {
        if (s == GMM_EPARSE) {
            cli_print_spec_error(cmd, m->spec_text, gmm_error_index());
            return cli_exit_code(s);
        }
        return cli_fail(cmd, s);
    }
    size_t np = gmm_kernel_nparam(m->kernel);
    int *defaulted = gmm_calloc(np ? np : 1, sizeof(int));
    if (!defaulted)
        return cli_fail(cmd, GMM_ENOMEM);
    s = gmm_kernel_fill_defaults(m->kernel, m->x, m->y, m->nrow, defaulted);
    if (s != GMM_OK) {
        gmm_free(defaulted);
        return cli_fail(cmd, s);
    }
    if (verbose)
        for (size_t i = 0; i < np; i++)
            if (defaulted[i])
                cli_msg(cmd, "default %s = %.6g", gmm_kernel_param_name(m->kernel, i),
                        gmm_kernel_values(m->kernel)[i]);
    gmm_free(defaulted);

    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.merge_tol = m->merge_tol = merge_tol;
    par.factor = (gmm_ssm_factor)factor;
    if ((s = gmm_ssm_alloc(m->kernel, m->x, m->y, m->nrow, &par, &m->ssm)) != GMM_OK)
        return cli_fail(cmd, s);
    if (gmm_ssm_nmerged(m->ssm) > 0)
        cli_msg(cmd, "warning: %zu distinct inputs within --merge-tol %g of another were merged "
                     "into one state",
                gmm_ssm_nmerged(m->ssm), merge_tol);

    /* Starting values: the kernel's (given or defaulted), then the noise. */
    double *theta0 = gmm_malloc(np + 1, sizeof(double));
    if (!theta0)
        return cli_fail(cmd, GMM_ENOMEM);
    memcpy(theta0, gmm_kernel_values(m->kernel), np * sizeof(double));
    theta0[np] = isnan(noise) ? gmm_kernel_default_noise(m->y, m->nrow) : noise;
    if (verbose && isnan(noise))
        cli_msg(cmd, "default noise.variance = %.6g", theta0[np]);
    s = gmm_ssm_objective(m->ssm, theta0, &m->obj);
    gmm_free(theta0);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if (verbose)
        cli_msg(cmd, "state dimension %zu, %zu states, bandwidth %zu, %zu distinct intervals",
                gmm_ssm_dim(m->ssm), gmm_ssm_nstates(m->ssm), gmm_ssm_bandwidth(m->ssm),
                gmm_ssm_nintervals(m->ssm));
    return 0;
}

/* ---- graph models ------------------------------------------------------------- */

/* Split "I,J[,LEN]" into m->edge_cols. */
static int split_edge_cols(const char *cmd, cli_model *m, const char *spec)
{
    const char *defaults[3] = {"i", "j", "length"};
    m->len_optional = spec == NULL;
    if (!spec) {
        for (int k = 0; k < 3; k++)
            if (!(m->edge_cols[k] = dup_str(defaults[k])))
                return cli_fail(cmd, GMM_ENOMEM);
        return 0;
    }
    const char *p = spec;
    for (int k = 0; k < 3 && *p; k++) {
        size_t len = strcspn(p, ",");
        if (len == 0) {
            cli_msg(cmd, "--edge-cols: empty column name in '%s'", spec);
            return CLI_EXIT_USAGE;
        }
        char *c = gmm_malloc(len + 1, 1);
        if (!c)
            return cli_fail(cmd, GMM_ENOMEM);
        memcpy(c, p, len);
        c[len] = '\0';
        m->edge_cols[k] = c;
        p += len;
        if (*p == ',')
            p++;
    }
    if (*p || !m->edge_cols[1]) {
        cli_msg(cmd, "--edge-cols: expected I,J or I,J,LEN, got '%s'", spec);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static int build_graph(const char *cmd, cli_model *m, double noise, int strict, int verbose,
                       int no_center, const double *fixed_center)
{
    gmm_status s;
    int rc;
    gmm_table *edges = NULL, *data = NULL;
    size_t *isolated = NULL, nisolated = 0;

    if ((s = gmm_table_read(m->graph_file, &edges)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    /* The default "length" column is optional; a named one is required. */
    if ((s = gmm_graph_read_table(edges, m->edge_cols[0], m->edge_cols[1], m->edge_cols[2],
                                  m->len_optional, &m->g)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (m->g->nmerged)
        cli_msg(cmd, "warning: %zu duplicate edge(s) in %s merged", m->g->nmerged,
                m->graph_file);
    if ((s = gmm_table_read(m->data_file, &data)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    size_t cy;
    if ((s = gmm_table_column(data, m->yname, &cy)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    m->nrow = data->nrow;
    m->y = gmm_malloc(data->nrow ? data->nrow : 1, sizeof(double));
    m->row_node = gmm_malloc(data->nrow ? data->nrow : 1, sizeof(size_t));
    if (!m->y || !m->row_node) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if ((s = gmm_table_column_double(data, cy, 1, m->y)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if ((s = gmm_graph_attach_nodes(m->g, data, m->nodename, strict, m->row_node, &isolated,
                                    &nisolated)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (nisolated) {
        char buf[64];
        cli_msg(cmd, "warning: %zu node(s) of %s are not in %s and become isolated nodes:",
                nisolated, data->file, m->graph_file);
        for (size_t k = 0; k < nisolated && k < 20; k++)
            fprintf(stderr, "  %s\n", gmm_graph_node_label(m->g, isolated[k], buf));
        if (nisolated > 20)
            fprintf(stderr, "  ... and %zu more\n", nisolated - 20);
    }
    center_y(m, no_center, fixed_center);
    if ((rc = parse_spec(cmd, m->spec_text, &m->spec)) != 0)
        goto done;
    if ((s = gmm_gmrf_alloc(m->g, m->spec, m->spec_text, &m->gmrf)) != GMM_OK) {
        if (s == GMM_EPARSE)
            cli_print_spec_error(cmd, m->spec_text, gmm_error_index());
        else
            cli_fail(cmd, s);
        rc = cli_exit_code(s);
        goto done;
    }
    if ((s = gmm_gmrf_band_check(m->gmrf, 0)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (verbose) {
        char buf[256];
        gmm_gmrf_describe(m->gmrf, buf, sizeof buf);
        cli_msg(cmd, "%s", buf);
    }
    if ((s = gmm_gmrf_obs_alloc(m->gmrf, m->nrow, m->row_node, m->y, &m->gobs)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (isnan(noise)) {
        noise = gmm_kernel_default_noise(m->y, m->nrow);
        if (verbose)
            cli_msg(cmd, "default noise.variance = %.6g", noise);
    }
    if ((s = gmm_gmrf_objective_alloc(m->gmrf, &m->gobs->obs, noise, 0, &m->gobj)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    m->obj = *m->gobj;
    rc = 0;
done:
    gmm_free(isolated);
    gmm_table_free(edges);
    gmm_table_free(data);
    return rc;
}

/* ---- entry points --------------------------------------------------------------- */

static void report_rows(const char *cmd, const cli_model *m)
{
    cli_msg(cmd, "read %zu rows: %zu observed, %zu missing", m->nrow, m->nobs,
            m->nrow - m->nobs);
}

int cli_model_load(const char *cmd, const cli_model_opts *o, cli_model **out)
{
    int rc;
    *out = NULL;
    if (!o->data) {
        cli_msg(cmd, "missing DATA.csv (see '%s --help')", cmd);
        return CLI_EXIT_USAGE;
    }
    if (o->graph && o->kernel) {
        cli_msg(cmd, "--kernel and --graph exclude each other");
        return CLI_EXIT_USAGE;
    }
    if (!o->graph && (o->precision || o->node || o->edge_cols)) {
        cli_msg(cmd, "--precision, --node and --edge-cols need --graph");
        return CLI_EXIT_USAGE;
    }
    if (o->graph && (!o->precision || !o->node || !o->ycol)) {
        /* --y has no default for graphs: node files often carry coordinate
         * columns named x and y, and modelling one by accident is silent. */
        cli_msg(cmd, "--graph needs --precision SPEC, --node NAME and --y NAME");
        return CLI_EXIT_USAGE;
    }
    if (o->graph && (o->xcol || o->merge_tol > 0 || o->free_period)) {
        cli_msg(cmd, "--x, --merge-tol and --free-period apply to state-space models, not "
                     "to --graph");
        return CLI_EXIT_USAGE;
    }
    if (o->free_period && o->kernel) {
        cli_msg(cmd, "--free-period applies to the default kernel only");
        return CLI_EXIT_USAGE;
    }
    cli_model *m = gmm_calloc(1, sizeof *m);
    if (!m)
        return cli_fail(cmd, GMM_ENOMEM);
    m->data_file = dup_str(o->data);
    if (!m->data_file) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto fail;
    }
    if (o->graph) {
        m->graph = 1;
        m->graph_file = dup_str(o->graph);
        m->spec_text = dup_str(o->precision);
        m->nodename = dup_str(o->node);
        m->yname = dup_str(o->ycol);
        if (!m->graph_file || !m->spec_text || !m->nodename || !m->yname) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto fail;
        }
        if ((rc = split_edge_cols(cmd, m, o->edge_cols)) != 0)
            goto fail;
        if ((rc = build_graph(cmd, m, o->noise, o->strict_nodes, o->verbose, o->no_center,
                              NULL)) != 0)
            goto fail;
        report_rows(cmd, m);
    } else {
        if ((rc = load_table_xy(cmd, m, o->data, o->xcol, o->ycol)) != 0)
            goto fail;
        center_y(m, o->no_center, NULL);
        report_rows(cmd, m);
        m->spec_text = dup_str(o->kernel ? o->kernel : CLI_DEFAULT_KERNEL);
        if (!m->spec_text) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto fail;
        }
        if (o->verbose && !o->kernel)
            cli_msg(cmd, "default kernel: %s", CLI_DEFAULT_KERNEL);
        if ((rc = build_ssm(cmd, m, o->noise, o->merge_tol, o->factor, o->verbose)) != 0)
            goto fail;
        if (!o->kernel && !o->free_period) {
            const char *f = CLI_DEFAULT_KERNEL_FIXED;
            if ((rc = apply_fix(cmd, m, &f, 1)) != 0)
                goto fail;
        }
    }
    if ((rc = apply_fix(cmd, m, o->fix, o->nfix)) != 0)
        goto fail;
    *out = m;
    return 0;
fail:
    cli_model_free(m);
    return rc;
}

int cli_model_from_file(const char *cmd, const gmm_model *mf, const char *data, int verbose,
                        int factor, cli_model **out)
{
    int rc;
    *out = NULL;
    if (mf->likelihood && strcmp(mf->likelihood, "gaussian")) {
        cli_msg(cmd, "model likelihood '%s' is not supported by this command", mf->likelihood);
        return CLI_EXIT_ERROR;
    }
    cli_model *m = gmm_calloc(1, sizeof *m);
    if (!m)
        return cli_fail(cmd, GMM_ENOMEM);
    m->data_file = dup_str(data ? data : mf->data.file);
    m->spec_text = dup_str(mf->kernel ? mf->kernel : mf->precision);
    if (!m->data_file || !m->spec_text) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto fail;
    }
    /* The values are taken from "parameters" (by name) after the build. */
    if (mf->data.exposure) {
        cli_msg(cmd, "model file: \"data.exposure\" belongs to count likelihoods; this "
                     "Gaussian model cannot use it");
        rc = CLI_EXIT_ERROR;
        goto fail;
    }
    if (mf->precision && (!mf->data.node || !mf->data.y)) {
        cli_msg(cmd, "model file: a graph model needs \"data\": {\"node\": ..., \"y\": ...}");
        rc = CLI_EXIT_ERROR;
        goto fail;
    }
    if (mf->precision) {
        m->graph = 1;
        m->graph_file = dup_str(mf->graph);
        m->nodename = dup_str(mf->data.node);
        m->yname = dup_str(mf->data.y);
        if (!m->graph_file || !m->nodename || !m->yname) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto fail;
        }
        for (int k = 0; k < 3; k++)
            if (mf->edge_cols[k] && !(m->edge_cols[k] = dup_str(mf->edge_cols[k]))) {
                rc = cli_fail(cmd, GMM_ENOMEM);
                goto fail;
            }
        if (!mf->edge_cols[0] && (rc = split_edge_cols(cmd, m, NULL)) != 0)
            goto fail;
        /* The length column was checked when the model was fitted. */
        m->len_optional = 1;
        if ((rc = build_graph(cmd, m, 1.0, 0, verbose, !mf->has_center,
                              mf->has_center ? &mf->center : NULL)) != 0)
            goto fail;
    } else {
        if ((rc = load_table_xy(cmd, m, m->data_file, mf->data.x, mf->data.y)) != 0)
            goto fail;
        center_y(m, !mf->has_center, mf->has_center ? &mf->center : NULL);
        if ((rc = build_ssm(cmd, m, 1.0, mf->merge_tol, factor, verbose)) != 0)
            goto fail;
    }
    for (size_t i = 0; i < m->obj.nparam; i++) {
        size_t k;
        if (gmm_model_param_index(mf, m->obj.name[i], &k) != GMM_OK) {
            rc = cli_fail(cmd, GMM_EPARSE);
            goto fail;
        }
        m->obj.value[i] = mf->param_value[k];
    }
    *out = m;
    return 0;
fail:
    cli_model_free(m);
    return rc;
}

int cli_model_positional(const char *cmd, int argc, char **argv, cli_model_opts *o)
{
    if (optind < argc)
        o->data = argv[optind++];
    if (optind < argc) {
        cli_msg(cmd, "unexpected argument '%s'", argv[optind]);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_model_open(const char *cmd, const cli_model_opts *o, const char *model_path,
                   gmm_model *mf, cli_model **out)
{
    *out = NULL;
    if (!model_path)
        return cli_model_load(cmd, o, out);
    if (o->given) {
        cli_msg(cmd, "--model takes the model from the file: give no model options with it");
        return CLI_EXIT_USAGE;
    }
    gmm_status s = gmm_model_read(model_path, mf);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    return cli_model_from_file(cmd, mf, o->data, o->verbose, o->factor, out);
}

gmm_objective *cli_model_objective(cli_model *m) { return &m->obj; }
int cli_model_is_graph(const cli_model *m) { return m->graph; }
size_t cli_model_nobs(const cli_model *m) { return m->nobs; }

size_t cli_model_state_dim(const cli_model *m) { return m->graph ? 1 : gmm_ssm_dim(m->ssm); }

const char *cli_model_factorisation(const char *cmd, const cli_model *m, int verbose)
{
    int rows = !m->graph && gmm_ssm_used_rows(m->ssm);
    if (verbose && !m->graph)
        cli_msg(cmd, "factorisation: %s (the Cholesky's rounding bound at these parameters: "
                     "%.2g of log-likelihood)",
                rows ? "square-root form" : "Cholesky", gmm_ssm_chol_bound(m->ssm));
    return rows ? "square-root" : "cholesky";
}

size_t cli_model_bandwidth(const cli_model *m)
{
    return m->graph ? m->gmrf->bw : gmm_ssm_bandwidth(m->ssm);
}

double cli_model_center(const cli_model *m, int *has_center)
{
    if (has_center)
        *has_center = m->has_center > 0;
    return m->has_center > 0 ? m->center : 0.0;
}

double cli_model_noise(const cli_model *m) { return m->obj.value[m->obj.nparam - 1]; }

int cli_model_describe(const char *cmd, cli_model *m, gmm_model *mf, char **scratch)
{
    *scratch = NULL;
    gmm_model_init(mf);
    if (m->graph) {
        size_t need = gmm_spec_format(m->spec, m->obj.nparam, m->obj.name, m->obj.value, NULL, 0);
        char *buf = gmm_malloc(need + 1, 1);
        if (!buf)
            return cli_fail(cmd, GMM_ENOMEM);
        gmm_spec_format(m->spec, m->obj.nparam, m->obj.name, m->obj.value, buf, need + 1);
        *scratch = buf;
        mf->precision = buf;
        mf->graph = m->graph_file;
        for (int k = 0; k < 3; k++)
            mf->edge_cols[k] = m->edge_cols[k];
        mf->data.node = m->nodename;
    } else {
        size_t need = gmm_kernel_format(m->kernel, m->obj.value, NULL, 0) + 1;
        char *buf = gmm_malloc(need, 1);
        if (!buf)
            return cli_fail(cmd, GMM_ENOMEM);
        gmm_kernel_format(m->kernel, m->obj.value, buf, need);
        *scratch = buf;
        mf->kernel = buf;
        mf->data.x = m->xname;
        mf->merge_tol = m->merge_tol;
    }
    mf->data.file = m->data_file;
    mf->data.y = m->yname;
    mf->nparam = m->obj.nparam;
    mf->param_name = m->obj.name;
    mf->param_value = m->obj.value;
    mf->likelihood = "gaussian";
    mf->has_center = m->has_center > 0;
    mf->center = m->center;
    return 0;
}

/* Evaluate at the current values, then read the posterior (in RCM-permuted
 * rows) back into graph numbering. */
static gmm_status predict_graph(cli_model *m, size_t nq, double *mean, double *var)
{
    const gmm_gmrf *g = m->gmrf;
    if (nq != g->n)
        return gmm_error(GMM_EDIM, "predict: %zu outputs for %zu nodes", nq, g->n);
    double ll;
    gmm_status s = m->obj.eval(m->obj.ctx, m->obj.value, &ll, NULL);
    if (s != GMM_OK)
        return s;
    gmm_band *cov = gmm_gmrf_band_alloc(g, 0);
    double *mp = gmm_malloc(g->n ? g->n : 1, sizeof(double));
    if (!cov || !mp) {
        s = gmm_error(GMM_ENOMEM, "predict: out of memory");
        goto done;
    }
    if ((s = gmm_marglik_posterior(gmm_gmrf_objective_work(m->gobj), mp, cov)) != GMM_OK)
        goto done;
    for (size_t v = 0; v < g->n; v++) {
        size_t r = g->iperm[v];
        mean[v] = mp[r];
        var[v] = gmm_band_get(cov, r, r);
    }
done:
    gmm_band_free(cov);
    gmm_free(mp);
    return s;
}

gmm_status cli_model_predict(cli_model *m, const double *xq, size_t nq, double *mean, double *var)
{
    gmm_status s = m->graph ? predict_graph(m, nq, mean, var)
                            : gmm_ssm_predict(m->ssm, m->obj.value, xq, nq, mean, var);
    if (s == GMM_OK && m->has_center > 0)
        for (size_t i = 0; i < nq; i++)
            mean[i] += m->center;
    return s;
}

size_t cli_model_nnodes(const cli_model *m) { return m->graph ? m->gmrf->n : 0; }

const char *cli_model_node_label(const cli_model *m, size_t v, char *buf)
{
    return gmm_graph_node_label(m->g, v, buf);
}

const double *cli_model_data_x(const cli_model *m, size_t *n)
{
    *n = m->nrow;
    return m->x;
}
