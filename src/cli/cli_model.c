/* cli_model.c -- options, data and model construction shared by loglik,
 * fit, gradcheck and predict (see cli_model.h): one latent model (latent.h)
 * and one likelihood (likelihood.h) joined with the data in a gmm_problem
 * (problem.h).  Only construction knows the two families apart. */
/* realpath (XSI) */
#define _XOPEN_SOURCE 700

#include "cli_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "cli.h"
#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/gmrf.h"
#include "gmm/graph.h"
#include "gmm/io.h"
#include "gmm/kernel.h"
#include "gmm/latent.h"
#include "gmm/likelihood.h"
#include "gmm/problem.h"
#include "gmm/qfile.h"
#include "gmm/spec.h"
#include "gmm/ssm.h"
#include "gmm/vi.h"

const char cli_model_options_help[] =
    "Model (state-space GP):\n"
    "  --kernel SPEC       kernel spec, e.g. 'matern32 + quasiperiodic(period=1)'\n"
    "                      (default: " CLI_DEFAULT_KERNEL ",\n"
    "                      period held fixed unless --free-period)\n"
    "  --free-period       let the default kernel's period be fitted too\n"
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
    "Likelihood:\n"
    "  --likelihood L      gaussian (default), poisson, bernoulli or\n"
    "                      negbinomial(dispersion=D); non-Gaussian ones use the\n"
    "                      Laplace approximation\n"
    "  --noise V           Gaussian variance start (default: a tenth of var(y))\n"
    "  --no-center         Gaussian: do not subtract the mean of the observed y\n"
    "  --exposure NAME     poisson/negbinomial: exposure column (default: 1)\n"
    "  --intercept B       non-Gaussian: start of the intercept b in f = b + Hx\n"
    "                      (default: the log rate or logit of the mean of y)\n"
    "  --no-intercept      non-Gaussian: no intercept\n"
    "Both:\n"
    "  --fix NAME          hold parameter NAME (e.g. intercept) where parameters are\n"
    "                      fitted or checked (repeatable)\n"
    "  --verbose           report defaults, sizes and progress on stderr\n";

struct cli_model {
    int graph;
    char *data_file;       /* as given (messages) */
    char *data_rec;        /* as recorded in a model file: absolute, or "-" */
    char *graph_rec;
    char *model_path;      /* the model file as given (NULL: from options, or stdin) */
    char *model_rec;       /* the same, absolute */
    char *xname, *yname, *nodename, *ename;
    char *spec_text;
    gmm_spec_node *spec;
    double center;
    int has_center;
    double merge_tol;
    size_t nrow, nobs;
    double *x, *y, *e; /* nrow each (y centred for Gaussian data, NAN missing) */
    size_t *line;      /* nrow: source line of each row */
    gmm_lik lik;           /* the family; its values only start a fit */
    gmm_lik lik_now;       /* at the current parameters (cli_model_likelihood) */
    gmm_kernel *kernel;
    char *graph_file;
    char *edge_cols[3];
    int len_optional;
    gmm_graph *g;
    gmm_gmrf *gmrf;
    size_t *row_node;
    gmm_latent *lat;
    gmm_problem *prob;
    gmm_objective *obj;
    gmm_vi *vi;        /* a VI result's q (predictions use it), or NULL */
    /* The model file the specs come from, for their error messages (the
     * caller's string, read only while the model is built), or NULL: they
     * come from the command line. */
    const char *spec_file;
};

void cli_model_opts_init(cli_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->noise = NAN;
    o->intercept = NAN;
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

/* Single-valued options given twice are an error, not "last one wins". */
static int once(cli_model_opts *o, const char *cmd, int c, const char *name)
{
    size_t k = (size_t)(c - CLI_OPT_KERNEL);
    if (k < sizeof o->seen / sizeof o->seen[0]) {
        if (o->seen[k]) {
            cli_msg(cmd, "--%s given twice", name);
            return -1;
        }
        o->seen[k] = 1;
    }
    return 1;
}

int cli_model_opt(cli_model_opts *o, const char *cmd, int c, const char *arg)
{
    if (c >= CLI_OPT_KERNEL && c < CLI_OPT_VERBOSE)
        o->given++;
    switch (c) {
    case CLI_OPT_KERNEL: o->kernel = arg; return once(o, cmd, c, "kernel");
    case CLI_OPT_GRAPH: o->graph = arg; return once(o, cmd, c, "graph");
    case CLI_OPT_PRECISION: o->precision = arg; return once(o, cmd, c, "precision");
    case CLI_OPT_EDGE_COLS: o->edge_cols = arg; return once(o, cmd, c, "edge-cols");
    case CLI_OPT_X: o->xcol = arg; return once(o, cmd, c, "x");
    case CLI_OPT_Y: o->ycol = arg; return once(o, cmd, c, "y");
    case CLI_OPT_NODE: o->node = arg; return once(o, cmd, c, "node");
    case CLI_OPT_NOISE:
        if (once(o, cmd, c, "noise") < 0)
            return -1;
        return parse_positive(cmd, "noise", arg, 0, &o->noise);
    case CLI_OPT_NO_CENTER: o->no_center = 1; return 1;
    case CLI_OPT_STRICT_NODES: o->strict_nodes = 1; return 1;
    case CLI_OPT_MERGE_TOL:
        if (once(o, cmd, c, "merge-tol") < 0)
            return -1;
        return parse_positive(cmd, "merge-tol", arg, 1, &o->merge_tol);
    case CLI_OPT_FREE_PERIOD: o->free_period = 1; return 1;
    case CLI_OPT_LIKELIHOOD: o->likelihood = arg; return once(o, cmd, c, "likelihood");
    case CLI_OPT_EXPOSURE: o->exposure = arg; return once(o, cmd, c, "exposure");
    case CLI_OPT_INTERCEPT: {
        char *end;
        if (once(o, cmd, c, "intercept") < 0)
            return -1;
        o->intercept = strtod(arg, &end);
        if (end == arg || *end || !isfinite(o->intercept)) {
            cli_msg(cmd, "--intercept: '%s' is not a finite number", arg);
            return -1;
        }
        return 1;
    }
    case CLI_OPT_NO_INTERCEPT: o->no_intercept = 1; return 1;
    case CLI_OPT_VERBOSE: o->verbose = 1; return 1;
    case CLI_OPT_FACTOR:
        if (once(o, cmd, c, "factor") < 0)
            return -1;
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
    gmm_vi_free(m->vi);
    gmm_problem_free(m->prob);
    gmm_latent_free(m->lat);
    gmm_kernel_free(m->kernel);
    gmm_gmrf_free(m->gmrf);
    gmm_graph_free(m->g);
    gmm_spec_free(m->spec);
    gmm_free(m->row_node);
    gmm_free(m->x);
    gmm_free(m->y);
    gmm_free(m->e);
    gmm_free(m->line);
    gmm_free(m->data_file);
    gmm_free(m->data_rec);
    gmm_free(m->graph_rec);
    gmm_free(m->xname);
    gmm_free(m->yname);
    gmm_free(m->nodename);
    gmm_free(m->ename);
    gmm_free(m->spec_text);
    gmm_free(m->graph_file);
    gmm_free(m->model_path);
    gmm_free(m->model_rec);
    for (int i = 0; i < 3; i++)
        gmm_free(m->edge_cols[i]);
    gmm_free(m);
}

/* Count the observed y and, for a Gaussian likelihood, centre them in
 * place: by `fixed` when given (a model file's centre, so other data stay
 * on the fitted model's scale), else by their mean; no_center leaves them.
 * Counts and binary outcomes are never centred (their intercept plays that
 * part). */
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
    if (no_center || !m->lik.type->conjugate) {
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

/* A spec error of m's spec under KEY of its model file ("kernel"), with a
 * caret at the library's error index; cli_exit_code(s). */
static int spec_error(const char *cmd, const cli_model *m, const char *key, const char *text,
                      gmm_status s)
{
    cli_print_spec_error(cmd, m->spec_file, key, text, gmm_error_index());
    return cli_exit_code(s);
}

/* Parse m's spec under KEY (a spec error names the model file and KEY).
 * 0 or an exit code. */
static int parse_spec(const char *cmd, const cli_model *m, const char *key, const char *text,
                      gmm_spec_node **out)
{
    gmm_status s = gmm_spec_parse(text, out);
    return s != GMM_OK ? spec_error(cmd, m, key, text, s) : 0;
}

/* --likelihood (or a model file's) into m->lik.  0 or an exit code. */
static int parse_likelihood(const char *cmd, cli_model *m, const char *text)
{
    gmm_status s = gmm_lik_parse(text ? text : "gaussian", &m->lik);
    if (s != GMM_OK) {
        if (s == GMM_EPARSE && text)
            return spec_error(cmd, m, "likelihood", text, s);
        return cli_fail(cmd, s);
    }
    return 0;
}

/* Apply --fix names (and the default kernel's fixed period). */
static int apply_fix(const char *cmd, cli_model *m, const char **fix, size_t nfix)
{
    for (size_t f = 0; f < nfix; f++) {
        size_t i;
        /* "noise.variance": the Gaussian variance's name before 0.2 */
        const char *name = !strcmp(fix[f], "noise.variance") && m->lik.type->conjugate
                               ? "likelihood.variance"
                               : fix[f];
        for (i = 0; i < m->obj->nparam; i++)
            if (!strcmp(m->obj->name[i], name))
                break;
        if (i == m->obj->nparam) {
            cli_msg(cmd, "--fix: no parameter '%s'; the parameters are:", fix[f]);
            for (size_t k = 0; k < m->obj->nparam; k++)
                fprintf(stderr, "  %s\n", m->obj->name[k]);
            return CLI_EXIT_USAGE;
        }
        m->obj->fixed[i] = 1;
    }
    return 0;
}

/* The path a model file records for an input: absolute, so the model works
 * from any directory and wherever it is moved ("-" stays "-"). */
static char *record_path(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return dup_str(path);
    char *abs = realpath(path, NULL); /* malloc'ed by libc */
    char *r = dup_str(abs ? abs : path);
    free(abs);
    return r;
}

/* An input named by a model file: absolute as recorded; a relative one
 * (files of earlier versions) against the model file's directory first,
 * then the working directory.  0, or an exit code after a message naming
 * what was looked for. */
static int resolve_path(const char *cmd, const char *model_path, const char *what,
                        const char *rec, char **out)
{
    *out = NULL;
    if (!strcmp(rec, "-")) {
        cli_msg(cmd, "%s: the model's %s came from standard input; give the file again, e.g. "
                     "'gmm-infer %s --model %s DATA.csv'",
                model_path ? model_path : "model", what, cmd, model_path ? model_path : "M.json");
        return CLI_EXIT_USAGE;
    }
    if (rec[0] == '/' || !model_path || !strcmp(model_path, "-")) {
        *out = dup_str(rec);
    } else {
        const char *slash = strrchr(model_path, '/');
        size_t dl = slash ? (size_t)(slash - model_path) + 1 : 0;
        char *cand = gmm_malloc(dl + strlen(rec) + 1, 1);
        if (!cand)
            return cli_fail(cmd, GMM_ENOMEM);
        memcpy(cand, model_path, dl);
        strcpy(cand + dl, rec);
        if (access(cand, R_OK) == 0 || access(rec, R_OK) != 0) {
            if (access(cand, R_OK) != 0) {
                cli_msg(cmd, "%s: the model's %s '%s' is not found (looked for %s and ./%s)",
                        model_path, what, rec, cand, rec);
                gmm_free(cand);
                return CLI_EXIT_ERROR;
            }
            *out = cand;
            return 0;
        }
        gmm_free(cand);
        *out = dup_str(rec);
    }
    if (!*out)
        return cli_fail(cmd, GMM_ENOMEM);
    if (access(*out, R_OK) != 0) {
        cli_msg(cmd, "%s: the model's %s '%s' cannot be read: %s", model_path ? model_path : "model",
                what, *out, strerror(errno));
        return CLI_EXIT_ERROR;
    }
    return 0;
}

/* ---- data ----------------------------------------------------------------------- */

/* The data table's columns: x (state-space) or node (graph, attached later),
 * y, and the exposure when named; every row's source line. */
static int load_data(const char *cmd, cli_model *m, gmm_table *t, const char *xcol,
                     const char *ycol)
{
    gmm_status s;
    size_t cx = 0, cy = 1, ce = 0;
    if (!m->graph) {
        if (t->ncol < 2 && (!xcol || !ycol)) {
            cli_msg(cmd, "%s: need two columns (x and y), found %zu", t->file, t->ncol);
            return CLI_EXIT_ERROR;
        }
        if ((s = xcol ? gmm_table_column(t, xcol, &cx) : GMM_OK) != GMM_OK)
            return cli_fail(cmd, s);
    }
    if ((s = ycol ? gmm_table_column(t, ycol, &cy) : GMM_OK) != GMM_OK)
        return cli_fail(cmd, s);
    if (m->ename && (s = gmm_table_column(t, m->ename, &ce)) != GMM_OK)
        return cli_fail(cmd, s);
    if (t->nrow == 0 && !m->graph) {
        cli_msg(cmd, "%s: no data rows", t->file);
        return CLI_EXIT_ERROR;
    }
    size_t nr = t->nrow ? t->nrow : 1;
    m->nrow = t->nrow;
    m->x = gmm_malloc(nr, sizeof(double));
    m->y = gmm_malloc(nr, sizeof(double));
    m->line = gmm_malloc(nr, sizeof(size_t));
    if (m->ename)
        m->e = gmm_malloc(nr, sizeof(double));
    gmm_free(m->yname);
    m->yname = dup_str(t->header[cy]);
    if (!m->graph) {
        gmm_free(m->xname);
        m->xname = dup_str(t->header[cx]);
    }
    if (!m->x || !m->y || !m->line || (m->ename && !m->e) || !m->yname ||
        (!m->graph && !m->xname))
        return cli_fail(cmd, gmm_error(GMM_ENOMEM, "out of memory for the data"));
    memcpy(m->line, t->line, t->nrow * sizeof(size_t));
    if ((!m->graph && (s = gmm_table_column_double(t, cx, 0, m->x)) != GMM_OK) ||
        (s = gmm_table_column_double(t, cy, 1, m->y)) != GMM_OK)
        return cli_fail(cmd, s);
    if (!m->graph) {
        /* x = 1e16 + year: distinct inputs that are one double would merge
         * rows into one state without a word */
        size_t cnt = 0, ra = 0, rb = 0;
        if ((s = gmm_table_column_collisions(t, cx, m->x, &cnt, &ra, &rb)) != GMM_OK)
            return cli_fail(cmd, s);
        if (cnt)
            cli_msg(cmd, "warning: %s: %zu distinct value(s) of column '%s' read as the same "
                         "number as another (e.g. lines %zu and %zu): those rows become one "
                         "input; rescale or shift the column",
                    t->file, cnt, t->header[cx], t->line[ra], t->line[rb]);
    }
    if (m->e) {
        /* an exposure may be missing only where y is */
        if ((s = gmm_table_column_double(t, ce, 1, m->e)) != GMM_OK)
            return cli_fail(cmd, s);
        for (size_t r = 0; r < t->nrow; r++)
            if (isnan(m->e[r]) && !isnan(m->y[r])) {
                cli_msg(cmd, "%s:%zu: column '%s': missing exposure for an observed outcome",
                        t->file, t->line[r], m->ename);
                return CLI_EXIT_ERROR;
            } else if (isnan(m->e[r])) {
                m->e[r] = 1.0;
            }
    }
    return 0;
}

/* The outcomes against the likelihood, naming file, line and column. */
static int check_outcomes(const char *cmd, cli_model *m)
{
    gmm_status s = gmm_lik_check_data(&m->lik, m->y, m->e, m->nrow);
    if (s == GMM_OK)
        return 0;
    size_t r = gmm_error_index();
    if (r == GMM_NO_INDEX || r >= m->nrow)
        return cli_fail(cmd, s);
    const char *col = strstr(gmm_error_message(), "exposure") && m->ename ? m->ename : m->yname;
    cli_msg(cmd, "%s:%zu: column '%s': %s", m->data_file, m->line[r], col, gmm_error_message());
    return cli_exit_code(s);
}

/* ---- state-space models ---------------------------------------------------- */

/* A working response on the latent's scale for the kernel's default
 * variance: y itself (Gaussian), log((y + 1/2)/e) for a log link, 2y - 1
 * for Bernoulli. */
static double *working_response(const cli_model *m)
{
    double *z = gmm_malloc(m->nrow, sizeof *z);
    if (!z)
        return NULL;
    for (size_t r = 0; r < m->nrow; r++) {
        double y = m->y[r];
        if (m->lik.type->conjugate || isnan(y))
            z[r] = y;
        else if (m->lik.type->link_log)
            z[r] = log((y + 0.5) / (m->e ? m->e[r] : 1.0));
        else
            z[r] = 2.0 * y - 1.0;
    }
    return z;
}

static int build_ssm(const char *cmd, cli_model *m, double merge_tol, int factor, int verbose)
{
    gmm_status s;
    int rc;
    if ((rc = parse_spec(cmd, m, "kernel", m->spec_text, &m->spec)) != 0)
        return rc;
    if ((s = gmm_kernel_from_spec(m->spec, &m->kernel)) != GMM_OK)
        return s == GMM_EPARSE ? spec_error(cmd, m, "kernel", m->spec_text, s) : cli_fail(cmd, s);
    size_t np = gmm_kernel_nparam(m->kernel);
    int *defaulted = gmm_calloc(np ? np : 1, sizeof(int));
    double *z = working_response(m);
    if (!defaulted || !z) {
        gmm_free(defaulted);
        gmm_free(z);
        return cli_fail(cmd, GMM_ENOMEM);
    }
    s = gmm_kernel_fill_defaults(m->kernel, m->x, z, m->nrow, defaulted);
    gmm_free(z);
    if (s != GMM_OK) {
        gmm_free(defaulted);
        return cli_fail(cmd, s);
    }
    if (verbose > 0)
        for (size_t i = 0; i < np; i++)
            if (defaulted[i])
                cli_msg(cmd, "default %s = %.6g", gmm_kernel_param_name(m->kernel, i),
                        gmm_kernel_values(m->kernel)[i]);
    gmm_free(defaulted);

    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.merge_tol = m->merge_tol = merge_tol;
    par.factor = (gmm_ssm_factor)factor;
    if ((s = gmm_latent_ssm_alloc(m->kernel, m->x, m->nrow, &par, &m->lat)) != GMM_OK)
        return cli_fail(cmd, s);
    const gmm_ssm *ssm = gmm_latent_ssm(m->lat);
    if (gmm_ssm_nmerged(ssm) > 0 && verbose >= 0)
        cli_msg(cmd, "warning: %zu distinct inputs within --merge-tol %g of another were merged "
                     "into one state",
                gmm_ssm_nmerged(ssm), merge_tol);
    if (verbose > 0)
        cli_msg(cmd, "state dimension %zu, %zu states, bandwidth %zu, %zu distinct intervals",
                gmm_ssm_dim(ssm), gmm_ssm_nstates(ssm), gmm_ssm_bandwidth(ssm),
                gmm_ssm_nintervals(ssm));
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

/* Read the graph, attach the data's nodes, order by RCM, build the latent. */
static int build_graph(const char *cmd, cli_model *m, gmm_table *data, int strict, int verbose)
{
    gmm_status s;
    int rc;
    gmm_table *edges = NULL;
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
    if (m->g->nmerged && verbose >= 0)
        cli_msg(cmd, "warning: %zu duplicate edge(s) in %s merged", m->g->nmerged,
                m->graph_file);
    m->row_node = gmm_malloc(data->nrow ? data->nrow : 1, sizeof(size_t));
    if (!m->row_node) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if ((s = gmm_graph_attach_nodes(m->g, data, m->nodename, strict, m->row_node, &isolated,
                                    &nisolated)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (nisolated && verbose >= 0) {
        char buf[64];
        cli_msg(cmd, "warning: %zu node(s) of %s are not in %s and become isolated nodes:",
                nisolated, data->file, m->graph_file);
        for (size_t k = 0; k < nisolated && k < 20; k++)
            fprintf(stderr, "  %s\n", gmm_graph_node_label(m->g, isolated[k], buf));
        if (nisolated > 20)
            fprintf(stderr, "  ... and %zu more\n", nisolated - 20);
    }
    if ((rc = parse_spec(cmd, m, "precision", m->spec_text, &m->spec)) != 0)
        goto done;
    if ((s = gmm_gmrf_alloc(m->g, m->spec, m->spec_text, &m->gmrf)) != GMM_OK) {
        rc = s == GMM_EPARSE ? spec_error(cmd, m, "precision", m->spec_text, s)
                             : cli_fail(cmd, s);
        goto done;
    }
    if (verbose > 0) {
        char buf[256];
        gmm_gmrf_describe(m->gmrf, buf, sizeof buf);
        cli_msg(cmd, "%s", buf);
    }
    if ((s = gmm_latent_gmrf_alloc(m->gmrf, m->nrow, m->row_node, &m->lat)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    rc = 0;
done:
    gmm_free(isolated);
    gmm_table_free(edges);
    return rc;
}

/* ---- the problem ---------------------------------------------------------------- */

/* A default intercept: the log of the overall rate (log link), the logit of
 * the mean outcome (Bernoulli), clamped away from the degenerate ends. */
static double default_intercept(const cli_model *m)
{
    double sy = 0.0, se = 0.0;
    for (size_t r = 0; r < m->nrow; r++)
        if (!isnan(m->y[r])) {
            sy += m->y[r];
            se += m->e ? m->e[r] : 1.0;
        }
    if (se == 0.0)
        return 0.0;
    if (m->lik.type->link_log)
        return log((sy + 0.5) / se);
    double p = (sy + 0.5) / (se + 1.0);
    return log(p / (1.0 - p));
}

/* Likelihood defaults, the problem, the objective; starting values. */
static int build_problem(const char *cmd, cli_model *m, double noise, int no_intercept,
                         double intercept, int verbose)
{
    gmm_status s;
    int rc;
    if ((rc = check_outcomes(cmd, m)) != 0)
        return rc;
    if (!isnan(noise))
        m->lik.par[0] = noise; /* Gaussian only: checked by the caller */
    int defaulted = m->lik.type->nparam && isnan(m->lik.par[0]);
    gmm_lik_fill_defaults(&m->lik, m->y, m->nrow);
    if (verbose && defaulted) {
        char name[64];
        cli_msg(cmd, "default %s = %.6g", gmm_lik_param_name(&m->lik, 0, name), m->lik.par[0]);
    }
    int has_b = !m->lik.type->conjugate && !no_intercept;
    double b0 = isnan(intercept) ? default_intercept(m) : intercept;
    if (has_b && verbose && isnan(intercept))
        cli_msg(cmd, "default intercept = %.6g", b0);
    if ((s = gmm_problem_alloc(m->lat, &m->lik, m->y, m->e, has_b, has_b ? b0 : 0.0,
                               &m->prob)) != GMM_OK) {
        if (s == GMM_EINVAL && gmm_error_index() < m->nrow)
            return check_outcomes(cmd, m);
        return cli_fail(cmd, s);
    }
    m->obj = gmm_problem_objective(m->prob);
    if (verbose) {
        cli_msg(cmd, "%s latent model: %zu latent variables, bandwidth %zu; likelihood %s (%s)",
                gmm_latent_family(m->lat), gmm_latent_dim(m->lat),
                gmm_latent_bandwidth(m->lat), m->lik.type->name,
                m->lik.type->conjugate ? "exact marginal likelihood" : "Laplace approximation");
        if (!m->graph) {
            (void)0;
        }
    }
    return 0;
}

/* ---- entry points --------------------------------------------------------------- */

static void report_rows(const char *cmd, const cli_model *m)
{
    cli_msg(cmd, "read %zu rows: %zu observed, %zu missing", m->nrow, m->nobs,
            m->nrow - m->nobs);
}

static int check_options(const char *cmd, const cli_model_opts *o, const gmm_lik *lik)
{
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
    if (lik->type->conjugate) {
        if (o->exposure || o->no_intercept || !isnan(o->intercept)) {
            cli_msg(cmd, "--exposure, --intercept and --no-intercept apply to non-Gaussian "
                         "likelihoods (Gaussian data are centred instead)");
            return CLI_EXIT_USAGE;
        }
    } else {
        if (!isnan(o->noise) || o->no_center) {
            cli_msg(cmd, "--noise and --no-center apply to the Gaussian likelihood (use "
                         "--likelihood's own parameters, e.g. 'negbinomial(dispersion=2)')");
            return CLI_EXIT_USAGE;
        }
        if (o->exposure && !lik->type->exposure) {
            cli_msg(cmd, "--exposure: the %s likelihood has no exposure", lik->type->name);
            return CLI_EXIT_USAGE;
        }
        if (o->no_intercept && !isnan(o->intercept)) {
            cli_msg(cmd, "--intercept and --no-intercept exclude each other");
            return CLI_EXIT_USAGE;
        }
    }
    return 0;
}

int cli_model_load(const char *cmd, const cli_model_opts *o, cli_model **out)
{
    int rc;
    gmm_status s;
    gmm_table *data = NULL;
    *out = NULL;
    if (!o->data) {
        cli_msg(cmd, "missing DATA.csv (see '%s --help')", cmd);
        return CLI_EXIT_USAGE;
    }
    cli_model *m = gmm_calloc(1, sizeof *m);
    if (!m)
        return cli_fail(cmd, GMM_ENOMEM);
    /* specs first: a spec error is reported before any data is read */
    if ((rc = parse_likelihood(cmd, m, o->likelihood)) != 0 ||
        (rc = check_options(cmd, o, &m->lik)) != 0)
        goto fail;
    m->graph = o->graph != NULL;
    m->data_file = dup_str(o->data);
    m->data_rec = record_path(o->data);
    m->graph_rec = record_path(o->graph);
    m->spec_text = dup_str(o->graph ? o->precision : o->kernel ? o->kernel : CLI_DEFAULT_KERNEL);
    m->ename = dup_str(o->exposure);
    if (!m->data_file || !m->data_rec || (o->graph && !m->graph_rec) || !m->spec_text ||
        (o->exposure && !m->ename)) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto fail;
    }
    gmm_spec_node *probe = NULL;
    if ((rc = parse_spec(cmd, m, NULL, m->spec_text, &probe)) != 0)
        goto fail;
    if (!m->graph) {
        /* kernel names, keys and sizes too, before the data are read */
        gmm_kernel *kp = NULL;
        s = gmm_kernel_from_spec(probe, &kp);
        gmm_kernel_free(kp);
        if (s != GMM_OK) {
            gmm_spec_free(probe);
            rc = s == GMM_EPARSE ? spec_error(cmd, m, NULL, m->spec_text, s) : cli_fail(cmd, s);
            goto fail;
        }
    }
    gmm_spec_free(probe);
    if ((s = gmm_table_read(o->data, &data)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto fail;
    }
    if (m->graph) {
        m->graph_file = dup_str(o->graph);
        m->nodename = dup_str(o->node);
        if (!m->graph_file || !m->nodename) {
            rc = cli_fail(cmd, GMM_ENOMEM);
            goto fail;
        }
        if ((rc = split_edge_cols(cmd, m, o->edge_cols)) != 0 ||
            (rc = load_data(cmd, m, data, NULL, o->ycol)) != 0)
            goto fail;
        center_y(m, o->no_center, NULL);
        /* the precision spec is checked against the graph first: its errors
         * come before the data report */
        if ((rc = build_graph(cmd, m, data, o->strict_nodes, o->quiet ? -1 : o->verbose)) != 0)
            goto fail;
        if (!o->quiet)
            report_rows(cmd, m);
    } else {
        if ((rc = load_data(cmd, m, data, o->xcol, o->ycol)) != 0)
            goto fail;
        center_y(m, o->no_center, NULL);
        if (!o->quiet)
            report_rows(cmd, m);
        if (o->verbose && !o->kernel)
            cli_msg(cmd, "default kernel: %s", CLI_DEFAULT_KERNEL);
        if ((rc = build_ssm(cmd, m, o->merge_tol, o->factor, o->quiet ? -1 : o->verbose)) != 0)
            goto fail;
    }
    if ((rc = build_problem(cmd, m, o->noise, o->no_intercept, o->intercept,
                            o->quiet ? 0 : o->verbose)) != 0)
        goto fail;
    if (!m->graph && !o->kernel && !o->free_period) {
        const char *f = CLI_DEFAULT_KERNEL_FIXED;
        if ((rc = apply_fix(cmd, m, &f, 1)) != 0)
            goto fail;
    }
    if ((rc = apply_fix(cmd, m, o->fix, o->nfix)) != 0)
        goto fail;
    gmm_table_free(data);
    *out = m;
    return 0;
fail:
    gmm_table_free(data);
    cli_model_free(m);
    return rc;
}

/* The value of parameter `name` in a model file; format 1 files name the
 * Gaussian variance "noise.variance". */
static int model_value(const gmm_model *mf, const char *name, double *v)
{
    size_t k;
    if (gmm_model_param_index(mf, name, &k) == GMM_OK ||
        (!strcmp(name, "likelihood.variance") &&
         gmm_model_param_index(mf, "noise.variance", &k) == GMM_OK)) {
        *v = mf->param_value[k];
        return 1;
    }
    return 0;
}

int cli_model_from_file(const char *cmd, const gmm_model *mf, const char *model_path,
                        const char *data, int verbose, int factor, cli_model **out)
{
    int rc;
    gmm_status s;
    gmm_table *t = NULL;
    const char *mp = model_path && strcmp(model_path, "-") ? model_path : "<stdin>";
    *out = NULL;
    cli_model *m = gmm_calloc(1, sizeof *m);
    if (!m)
        return cli_fail(cmd, GMM_ENOMEM);
    m->spec_file = mp;
    if ((rc = parse_likelihood(cmd, m, mf->likelihood)) != 0)
        goto fail;
    m->graph = mf->precision != NULL;
    if (data)
        m->data_file = dup_str(data);
    else if ((rc = resolve_path(cmd, model_path, "data file", mf->data.file, &m->data_file)) != 0)
        goto fail;
    if (m->graph && (rc = resolve_path(cmd, model_path, "edge list", mf->graph,
                                       &m->graph_file)) != 0)
        goto fail;
    m->data_rec = record_path(m->data_file);
    m->graph_rec = record_path(m->graph_file);
    if (model_path && strcmp(model_path, "-") &&
        (!(m->model_path = dup_str(model_path)) || !(m->model_rec = record_path(model_path)))) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto fail;
    }
    m->spec_text = dup_str(mf->kernel ? mf->kernel : mf->precision);
    m->ename = dup_str(mf->data.exposure);
    if (!m->data_file || !m->data_rec || (m->graph && !m->graph_rec) || !m->spec_text ||
        (mf->data.exposure && !m->ename)) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto fail;
    }
    if (mf->data.exposure && !m->lik.type->exposure) {
        cli_msg(cmd, "%s: \"data.exposure\" given for the %s likelihood, which has none", mp,
                m->lik.type->name);
        rc = CLI_EXIT_ERROR;
        goto fail;
    }
    if (m->graph && (!mf->data.node || !mf->data.y)) {
        cli_msg(cmd, "%s: a graph model needs \"data\": {\"node\": ..., \"y\": ...}", mp);
        rc = CLI_EXIT_ERROR;
        goto fail;
    }
    if ((s = gmm_table_read(m->data_file, &t)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto fail;
    }
    if (m->graph) {
        m->nodename = dup_str(mf->data.node);
        if (!m->nodename) {
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
        if ((rc = load_data(cmd, m, t, NULL, mf->data.y)) != 0)
            goto fail;
        center_y(m, !mf->has_center, mf->has_center ? &mf->center : NULL);
        if ((rc = build_graph(cmd, m, t, 0, verbose)) != 0)
            goto fail;
    } else {
        if ((rc = load_data(cmd, m, t, mf->data.x, mf->data.y)) != 0)
            goto fail;
        center_y(m, !mf->has_center, mf->has_center ? &mf->center : NULL);
        if ((rc = build_ssm(cmd, m, mf->merge_tol, factor, verbose)) != 0)
            goto fail;
    }
    double b0 = 0.0;
    int has_b = model_value(mf, "intercept", &b0);
    if (m->lik.type->conjugate && has_b) {
        cli_msg(cmd, "%s: an \"intercept\" parameter with the Gaussian likelihood", mp);
        rc = CLI_EXIT_ERROR;
        goto fail;
    }
    /* a start for the problem only: the file's values go into obj->value
     * below, and cli_model_likelihood reads them there */
    for (size_t k = 0; k < m->lik.type->nparam; k++)
        m->lik.par[k] = 1.0;
    if ((rc = build_problem(cmd, m, NAN, !has_b, has_b ? b0 : NAN, 0)) != 0)
        goto fail;
    for (size_t i = 0; i < m->obj->nparam; i++) {
        if (!model_value(mf, m->obj->name[i], &m->obj->value[i])) {
            cli_msg(cmd, "%s: \"parameters\" has no value for '%s'", mp, m->obj->name[i]);
            rc = CLI_EXIT_ERROR;
            goto fail;
        }
        if (!(m->obj->value[i] > 0.0) &&
            !(m->obj->value[i] == 0.0 && i < gmm_latent_nparam(m->lat) &&
              gmm_latent_param_zero_ok(m->lat, i)) &&
            !(gmm_problem_has_intercept(m->prob) && i == m->obj->nparam - 1)) {
            cli_msg(cmd, "%s: parameter '%s' = %g is out of its domain (it must be positive)",
                    mp, m->obj->name[i], m->obj->value[i]);
            rc = CLI_EXIT_ERROR;
            goto fail;
        }
    }
    if (mf->has_vi && (rc = cli_model_load_vi(cmd, m, mf, model_path)) != 0)
        goto fail;
    /* a key the model does not have is a typo or another model's file */
    for (size_t k = 0; k < mf->nparam; k++) {
        const char *key = mf->param_name[k];
        size_t i;
        for (i = 0; i < m->obj->nparam; i++)
            if (!strcmp(key, m->obj->name[i]) ||
                (!strcmp(key, "noise.variance") && !strcmp(m->obj->name[i], "likelihood.variance")))
                break;
        if (i == m->obj->nparam) {
            cli_msg(cmd, "%s: unknown parameter '%s' in \"parameters\"; the model's are:", mp, key);
            for (size_t j = 0; j < m->obj->nparam; j++)
                fprintf(stderr, "  %s\n", m->obj->name[j]);
            rc = CLI_EXIT_ERROR;
            goto fail;
        }
    }
    gmm_table_free(t);
    *out = m;
    return 0;
fail:
    gmm_table_free(t);
    cli_model_free(m);
    return rc;
}

int cli_model_fit_check(const char *cmd, const cli_model *m)
{
    size_t nobs = 0;
    double first = NAN, same = 1, any = 0;
    for (size_t r = 0; r < m->nrow; r++) {
        if (isnan(m->y[r]))
            continue;
        if (nobs++ == 0)
            first = m->y[r];
        else if (m->y[r] != first)
            same = 0;
        any += m->y[r] != 0.0;
    }
    if (nobs == 0) {
        cli_msg(cmd, "%s: no observed y: nothing to fit", m->data_file);
        return CLI_EXIT_ERROR;
    }
    if (nobs == 1) {
        cli_msg(cmd, "%s: only one observed y: a fit needs at least two (loglik and predict "
                     "work with one)",
                m->data_file);
        return CLI_EXIT_ERROR;
    }
    if (same && m->lik.type->conjugate) {
        cli_msg(cmd, "%s: every observed %s is %.17g: there is no variation to fit (its "
                     "variance would go to 0)",
                m->data_file, m->yname, first + m->center);
        return CLI_EXIT_ERROR;
    }
    if (!any && m->lik.type->link_log) {
        cli_msg(cmd, "%s: every observed count in '%s' is 0: the rate's maximum likelihood is 0 "
                     "(the intercept would go to -infinity)",
                m->data_file, m->yname);
        return CLI_EXIT_ERROR;
    }
    if (same && !m->lik.type->conjugate && !m->lik.type->link_log) {
        cli_msg(cmd, "%s: every observed '%s' is %g: the probability's maximum likelihood is %g "
                     "(the intercept would go to %sinfinity)",
                m->data_file, m->yname, first, first, first > 0 ? "+" : "-");
        return CLI_EXIT_ERROR;
    }
    return 0;
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
    return cli_model_from_file(cmd, mf, model_path, o->data, o->verbose, o->factor, out);
}

gmm_objective *cli_model_objective(cli_model *m) { return m->obj; }
gmm_problem *cli_model_problem(cli_model *m) { return m->prob; }
size_t cli_model_nobs(const cli_model *m) { return m->nobs; }
int cli_model_has_inputs(const cli_model *m) { return gmm_latent_has_inputs(m->lat); }

const char *cli_model_approximation(const cli_model *m)
{
    return gmm_problem_exact(m->prob) ? "exact" : "laplace";
}

const char *cli_model_posterior_kind(const cli_model *m)
{
    return m->vi ? "vi" : cli_model_approximation(m);
}

gmm_vi *cli_model_vi(cli_model *m) { return m->vi; }

void cli_model_set_vi(cli_model *m, gmm_vi *v)
{
    gmm_vi_free(m->vi);
    m->vi = v;
}

int cli_model_load_vi(const char *cmd, cli_model *m, const gmm_model *mf, const char *model_path)
{
    int rc = 0;
    gmm_status s;
    char *path = NULL;
    gmm_vi *v = NULL;
    const char *mp = model_path && strcmp(model_path, "-") ? model_path : "<stdin>";
    if ((rc = resolve_path(cmd, model_path, "variational parameters", mf->vi_file, &path)) != 0)
        return rc;
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.bandwidth = mf->vi_bandwidth;
    if ((s = gmm_vi_alloc(m->prob, &par, &v)) != GMM_OK ||
        (s = gmm_qfile_read_vi(path, m->obj->value, v)) != GMM_OK) {
        if (s == GMM_EINVAL || s == GMM_EDIM)
            cli_msg(cmd, "%s (variational parameters of %s): %s", path, mp, gmm_error_message());
        else
            cli_fail(cmd, s);
        rc = CLI_EXIT_ERROR;
        goto done;
    }
    cli_model_set_vi(m, v);
    v = NULL;
done:
    gmm_vi_free(v);
    gmm_free(path);
    return rc;
}

size_t cli_model_newton_iterations(const cli_model *m) { return gmm_problem_iterations(m->prob); }

const char *cli_model_factorisation(const char *cmd, const cli_model *m, int verbose)
{
    double bound;
    const char *f = gmm_latent_factorisation(m->lat, &bound);
    if (verbose && gmm_problem_exact(m->prob) && bound > 0.0)
        cli_msg(cmd, "factorisation: %s (the Cholesky's rounding bound at these parameters: "
                     "%.2g of log-likelihood)",
                strcmp(f, "cholesky") ? "square-root form" : "Cholesky", bound);
    return gmm_problem_exact(m->prob) ? f : "cholesky";
}

size_t cli_model_state_dim(const cli_model *m) { return gmm_latent_obs_width(m->lat); }

size_t cli_model_bandwidth(const cli_model *m) { return gmm_latent_bandwidth(m->lat); }

double cli_model_center(const cli_model *m, int *has_center)
{
    if (has_center)
        *has_center = m->has_center > 0;
    return m->has_center > 0 ? m->center : 0.0;
}

const gmm_lik *cli_model_likelihood(cli_model *m)
{
    /* obj->value holds the parameters (a model file's, or a fit's result);
     * they are in their domain by construction, so this cannot fail */
    if (gmm_problem_lik_at(m->prob, m->obj->value, &m->lik_now) != GMM_OK)
        m->lik_now = m->lik;
    return &m->lik_now;
}

int cli_model_describe(const char *cmd, cli_model *m, gmm_model *mf, char **scratch)
{
    *scratch = NULL;
    gmm_model_init(mf);
    gmm_objective *o = m->obj;
    size_t nl = gmm_latent_nparam(m->lat);
    if (m->graph) {
        size_t need = gmm_spec_format(m->spec, nl, o->name, o->value, NULL, 0);
        char *buf = gmm_malloc(need + 1, 1);
        if (!buf)
            return cli_fail(cmd, GMM_ENOMEM);
        gmm_spec_format(m->spec, nl, o->name, o->value, buf, need + 1);
        *scratch = buf;
        mf->precision = buf;
        mf->graph = m->graph_rec;
        for (int k = 0; k < 3; k++)
            mf->edge_cols[k] = m->edge_cols[k];
        mf->data.node = m->nodename;
    } else {
        size_t need = gmm_kernel_format(m->kernel, o->value, NULL, 0) + 1;
        char *buf = gmm_malloc(need, 1);
        if (!buf)
            return cli_fail(cmd, GMM_ENOMEM);
        gmm_kernel_format(m->kernel, o->value, buf, need);
        *scratch = buf;
        mf->kernel = buf;
        mf->data.x = m->xname;
        mf->merge_tol = m->merge_tol;
    }
    mf->data.file = m->data_rec;
    mf->data.y = m->yname;
    mf->data.exposure = m->ename;
    mf->nparam = o->nparam;
    mf->param_name = o->name;
    mf->param_value = o->value;
    mf->likelihood = (char *)m->lik.type->name;
    mf->has_center = m->has_center > 0;
    mf->center = m->center;
    return 0;
}

size_t cli_model_nsites(const cli_model *m)
{
    return gmm_latent_has_inputs(m->lat) ? m->nrow : m->gmrf->n;
}

static int predict_progress(void *user, size_t done, size_t total)
{
    cli_msg((const char *)user, "predicted %zu of %zu inputs", done, total);
    return cli_stop_requested();
}

void cli_model_progress(cli_model *m, const char *cmd)
{
    gmm_ssm *ssm = gmm_latent_ssm(m->lat);
    if (ssm)
        gmm_ssm_set_progress(ssm, predict_progress, (void *)cmd);
}

gmm_status cli_model_predict(cli_model *m, const double *xq, size_t nq, double *mean, double *var)
{
    gmm_status s;
    if (gmm_latent_has_inputs(m->lat)) {
        s = m->vi ? gmm_vi_predict_at(m->vi, xq, nq, mean, var)
                  : gmm_problem_predict_at(m->prob, m->obj->value, xq, nq, mean, var);
    } else {
        if (nq != m->gmrf->n)
            return gmm_error(GMM_EDIM, "predict: %zu outputs for %zu nodes", nq, m->gmrf->n);
        s = m->vi ? gmm_vi_predict_nodes(m->vi, mean, var)
                  : gmm_problem_predict_nodes(m->prob, m->obj->value, mean, var);
    }
    if (s == GMM_OK && m->has_center > 0)
        for (size_t i = 0; i < nq; i++)
            mean[i] += m->center;
    return s;
}

int cli_model_site_find(const cli_model *m, const char *label, size_t *v)
{
    return !gmm_latent_has_inputs(m->lat) && gmm_graph_node_find(m->g, label, v);
}

const char *cli_model_data_exposure_name(const cli_model *m) { return m->ename; }
const char *cli_model_data_y_name(const cli_model *m) { return m->yname; }
const char *cli_model_data_site_name(const cli_model *m)
{
    return gmm_latent_has_inputs(m->lat) ? m->xname : m->nodename;
}

const char *cli_model_site_label(const cli_model *m, size_t v, char *buf)
{
    return gmm_graph_node_label(m->g, v, buf);
}

const double *cli_model_data_x(const cli_model *m, size_t *n)
{
    *n = m->nrow;
    return m->x;
}

double cli_model_noise(const cli_model *m)
{
    return m->lik.type->conjugate ? m->obj->value[gmm_latent_nparam(m->lat)] : 0.0;
}

/* ---- the model draws belong to --------------------------------------------------- */

/* m's identity (draws.h); the digests go into dig[3] (model file, sites,
 * data).  sampled: nparam flags or NULL. */
static gmm_status draws_origin(cli_model *m, const int *sampled, gmm_draws_origin *o,
                               char dig[3][32])
{
    gmm_status s;
    uint64_t h;
    memset(o, 0, sizeof *o);
    o->model_file = m->model_rec;
    if (m->model_path) {
        if ((s = gmm_digest_file(m->model_path, dig[0])) != GMM_OK)
            return s;
        o->model_digest = dig[0];
    }
    o->likelihood = m->lik.type->name;
    o->latent = gmm_latent_family(m->lat);
    o->latent_size = gmm_latent_dim(m->lat);
    o->rows = m->nrow;
    gmm_digest_init(&h);
    if (gmm_latent_has_inputs(m->lat)) {
        gmm_digest_add(&h, m->x, m->nrow * sizeof *m->x);
    } else {
        char buf[64];
        for (size_t v = 0; v < m->gmrf->n; v++) {
            const char *l = gmm_graph_node_label(m->g, v, buf);
            gmm_digest_add(&h, l, strlen(l) + 1);
        }
    }
    gmm_digest_format(h, dig[1]);
    o->sites_digest = dig[1];
    /* y as modelled (centred), the centre, the exposures; NAN has one
     * pattern here (the table reader's) */
    gmm_digest_init(&h);
    gmm_digest_add(&h, m->y, m->nrow * sizeof *m->y);
    double c = m->has_center > 0 ? m->center : 0.0;
    gmm_digest_add(&h, &c, sizeof c);
    if (m->e)
        gmm_digest_add(&h, m->e, m->nrow * sizeof *m->e);
    gmm_digest_format(h, dig[2]);
    o->data_digest = dig[2];
    o->nparam = m->obj->nparam;
    o->param_name = (const char *const *)m->obj->name;
    o->param_value = m->obj->value;
    o->sampled = sampled;
    return GMM_OK;
}

gmm_status cli_model_draws_origin(cli_model *m, const int *sampled, json_t **out)
{
    gmm_draws_origin o;
    char dig[3][32];
    gmm_status s = draws_origin(m, sampled, &o, dig);
    return s != GMM_OK ? s : gmm_draws_origin_json(&o, out);
}

/* Draws without a sidecar: their columns must be exactly those hmc writes
 * for m -- f at every data row or node in order, x[1..n] if any, and
 * otherwise lp__, m's parameters and log_lik[row] (not model columns).  NULL when they are, else the first
 * column that is not (in buf). */
static const char *foreign_column(cli_model *m, const gmm_draws *d, char *buf, size_t size)
{
    size_t nf = gmm_latent_has_inputs(m->lat) ? m->nrow : m->gmrf->n, jf = 0, jx = 0;
    size_t nx = gmm_latent_dim(m->lat);
    char want[96], lb[64];
    for (size_t v = 0; v < d->nvar; v++) {
        const char *name = d->name[v];
        if (!strncmp(name, "f[", 2)) {
            if (jf == nf)
                return name;
            if (gmm_latent_has_inputs(m->lat))
                snprintf(want, sizeof want, "f[%zu]", jf + 1);
            else
                snprintf(want, sizeof want, "f[%s]", gmm_graph_node_label(m->g, jf, lb));
            jf++;
            if (strcmp(name, want))
                return name;
        } else if (!strncmp(name, "x[", 2)) {
            snprintf(want, sizeof want, "x[%zu]", ++jx);
            if (jx > nx || strcmp(name, want))
                return name;
        } else if (strncmp(name, "log_lik[", 8) && strcmp(name, "lp__")) {
            size_t k;
            for (k = 0; k < m->obj->nparam && strcmp(name, m->obj->name[k]); k++)
                ;
            if (k == m->obj->nparam)
                return name;
        }
    }
    if (jf < nf) {
        if (gmm_latent_has_inputs(m->lat))
            snprintf(buf, size, "f[%zu] (missing)", jf + 1);
        else
            snprintf(buf, size, "f[%s] (missing)", gmm_graph_node_label(m->g, jf, lb));
        return buf;
    }
    if (jx && jx < nx) {
        snprintf(buf, size, "x[%zu] (missing)", jx + 1);
        return buf;
    }
    return NULL;
}

int cli_model_check_draws(const char *cmd, cli_model *m, const char *const *paths,
                          size_t npath, const gmm_draws *d)
{
    gmm_draws_origin cur;
    char dig[3][32];
    gmm_status s = draws_origin(m, NULL, &cur, dig);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    for (size_t i = 0; i < npath; i++) {
        json_t *rec = NULL;
        int same = 1;
        if ((s = gmm_draws_origin_read(paths[i], &rec)) != GMM_OK)
            return cli_fail(cmd, s);
        if (rec) {
            s = gmm_draws_origin_check(rec, &cur, &same);
            json_decref(rec);
            if (s != GMM_OK) {
                cli_msg(cmd, "%s: %s", paths[i], gmm_error_message());
                return CLI_EXIT_ERROR;
            }
            if (!same)
                cli_msg(cmd, "warning: %s: made from another model file than %s, with the "
                             "same likelihood, latent, data and parameters",
                        paths[i], m->model_path ? m->model_path : "this model");
            continue;
        }
        char buf[96];
        const char *bad = foreign_column(m, d, buf, sizeof buf);
        if (bad) {
            cli_msg(cmd, "%s: no sidecar %s.json says which model these draws came from, and "
                         "column '%s' is not this model's (%s %s, f at %zu %s): give the draws "
                         "of this model (gmm-infer hmc --model ... -o FILE writes FILE.json)",
                    paths[i], strcmp(paths[i], "-") ? paths[i] : "<stdin>", bad,
                    m->lik.type->name, gmm_latent_family(m->lat),
                    gmm_latent_has_inputs(m->lat) ? m->nrow : m->gmrf->n,
                    gmm_latent_has_inputs(m->lat) ? "data rows" : "nodes");
            return CLI_EXIT_ERROR;
        }
        cli_msg(cmd, "warning: %s: no sidecar %s.json, so that the draws come from this model "
                     "is not checked, only that their columns are its columns",
                paths[i], strcmp(paths[i], "-") ? paths[i] : "<stdin>");
    }
    return 0;
}
