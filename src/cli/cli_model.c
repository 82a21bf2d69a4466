/* cli_model.c -- the model a command works on, built by the library
 * (model.h) from the options' description (cli_model_opts.c) or a model
 * file (cli_model_file.c): this file prints what the build reports and how
 * it failed, in the options' words. */

#include "cli_model.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gmm/alloc.h"

static void on_report(void *user, gmm_mdl_report kind, const char *text)
{
    const cli_model_report *r = user;
    if (kind == GMM_MDL_REPORT_DATA && r->quiet) {
        /* a quiet copy still says which kernel it took (as each copy did) */
        if (r->verbose && r->default_kernel)
            cli_msg(r->cmd, "default kernel: %s", GMM_MDL_DEFAULT_KERNEL);
        return;
    }
    if (r->quiet)
        return;
    if (r->from_file && (kind == GMM_MDL_REPORT_DATA || kind == GMM_MDL_REPORT_SUMMARY))
        return;
    if (!r->verbose && (kind == GMM_MDL_REPORT_INFO || kind == GMM_MDL_REPORT_SUMMARY))
        return;
    cli_msg(r->cmd, "%s", text);
    if (kind == GMM_MDL_REPORT_DATA && r->verbose && r->default_kernel)
        cli_msg(r->cmd, "default kernel: %s", GMM_MDL_DEFAULT_KERNEL);
}

/* A broken rule of the description (model.h: gmm_mdl_rule) in the options'
 * words; NULL: the library's message serves. */
static const char *rule_message(gmm_mdl_rule r)
{
    switch (r) {
    case GMM_MDL_RULE_KERNEL_AND_GRAPH: return "--kernel and --graph exclude each other";
    case GMM_MDL_RULE_GRAPH_FIELDS: return "--precision, --node and --edge-cols need --graph";
    case GMM_MDL_RULE_GRAPH_NEEDS:
        return "--graph needs --precision SPEC, --node NAME and --y NAME";
    case GMM_MDL_RULE_STATE_SPACE_FIELDS:
        return "--x, --merge-tol and --free-period apply to state-space models, not to --graph";
    case GMM_MDL_RULE_EXPOSURE_AND_TRIALS: return "--exposure and --trials exclude each other";
    case GMM_MDL_RULE_NON_GAUSSIAN_FIELDS:
        return "--exposure, --intercept and --no-intercept apply to non-Gaussian likelihoods "
               "(Gaussian data are centred instead)";
    case GMM_MDL_RULE_GAUSSIAN_FIELDS:
        return "--noise and --no-center apply to the Gaussian likelihood (use --likelihood's "
               "own parameters, e.g. 'negbinomial(dispersion=2)')";
    case GMM_MDL_RULE_INTERCEPT_AND_NONE:
        return "--intercept and --no-intercept exclude each other";
    case GMM_MDL_RULE_FORMULA_REPLACES:
        return "--formula replaces --kernel, --graph, --precision, --x, --y and --node";
    case GMM_MDL_RULE_MERGE_TOL_NO_KERNEL:
        return "--merge-tol applies to state-space models: --kernel, or kernel terms "
               "f(NAME, 'KERNEL') of a formula";
    default: return NULL;
    }
}

/* A failed build, as the command line says it: a spec with a caret (under
 * the model file's key when spec_file is set), a usage error (exit 2), a
 * list of the parameters.  Returns the exit code. */
static int build_failed(const char *cmd, gmm_status s, const gmm_mdl_failure *f,
                        const char *spec_file)
{
    int rc;
    if (f->spec_text) {
        cli_print_spec_error(cmd, spec_file, f->spec_key, f->spec_text, f->spec_pos);
        rc = cli_exit_code(s);
    } else if (f->usage && rule_message(f->rule)) {
        cli_msg(cmd, "%s", rule_message(f->rule));
        rc = CLI_EXIT_USAGE;
    } else if (f->usage) {
        /* the row column's rule: "FIELD: ..." names the option's field */
        cli_msg(cmd, "%s%s", f->fix ? "--fix: " : f->rule == GMM_MDL_RULE_ROW_COLUMN ? "--" : "",
                gmm_error_message());
        rc = CLI_EXIT_USAGE;
    } else {
        rc = cli_fail(cmd, s);
    }
    if (f->params)
        fputs(f->params, stderr);
    return rc;
}

int cli_model_build(const char *cmd, gmm_mdl_spec *s, cli_model_report *r, const char *spec_file,
                 gmm_mdl **out)
{
    s->report = on_report;
    s->report_user = r;
    gmm_mdl_failure f;
    gmm_status st = gmm_mdl_build(s, out, &f);
    int rc = st != GMM_OK ? build_failed(cmd, st, &f, spec_file) : 0;
    gmm_mdl_failure_free(&f);
    return rc;
}

/* Split "I,J[,LEN]" into cols (pointers into buf, a copy of spec). */
static int split_edge_cols(const char *cmd, const char *spec, char *buf, const char *cols[3])
{
    char *p = strcpy(buf, spec);
    for (int k = 0; k < 3 && *p; k++) {
        size_t len = strcspn(p, ",");
        if (len == 0) {
            cli_msg(cmd, "--edge-cols: empty column name in '%s'", spec);
            return CLI_EXIT_USAGE;
        }
        cols[k] = p;
        p += len;
        if (*p == ',')
            *p++ = '\0';
    }
    if (*p || !cols[1]) {
        cli_msg(cmd, "--edge-cols: expected I,J or I,J,LEN, got '%s'", spec);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

int cli_model_load(const char *cmd, const cli_model_opts *o, gmm_mdl **out)
{
    *out = NULL;
    if (!o->spec.desc.data.file) {
        cli_msg(cmd, "missing DATA.csv (see '%s --help')", cmd);
        return CLI_EXIT_USAGE;
    }
    if (o->spec.desc.graph && o->spec.free_period) {
        cli_msg(cmd, "--x, --merge-tol and --free-period apply to state-space models, not "
                     "to --graph");
        return CLI_EXIT_USAGE;
    }
    if (o->spec.free_period && o->spec.desc.kernel) {
        cli_msg(cmd, "--free-period applies to the default kernel only");
        return CLI_EXIT_USAGE;
    }
    int rc = 0;
    cli_model_report r = {cmd, o->quiet, o->verbose, 0,
                          gmm_mdl_desc_names_no_latent(&o->spec.desc)};
    gmm_mdl_spec s = o->spec;
    char *cols = o->edge_cols ? gmm_malloc(strlen(o->edge_cols) + 1, 1) : NULL;
    if (o->edge_cols && !cols) {
        rc = cli_fail(cmd, gmm_error(GMM_ENOMEM, "out of memory"));
        goto done;
    }
    if (o->edge_cols && (rc = split_edge_cols(cmd, o->edge_cols, cols, s.desc.edge_cols)) != 0)
        goto done;
    s.fix = o->fix;
    s.nfix = o->nfix;
    s.verbose = o->verbose;
    rc = cli_model_build(cmd, &s, &r, NULL, out);
done:
    gmm_free(cols);
    return rc;
}

int cli_model_fit_check(const char *cmd, const gmm_mdl *m)
{
    gmm_status s = gmm_mdl_fit_check(m);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

const char *cli_model_factorisation(const char *cmd, const gmm_mdl *m, int verbose)
{
    double bound;
    const char *f = gmm_mdl_factorisation(m, &bound);
    if (gmm_mdl_sqrt_declined(m))
        cli_msg(cmd, "warning: the likelihood is not log-concave, so the Laplace approximation "
                     "factorised the assembled precision where the square-root form was due "
                     "(a damped periodic, cosine or constant factor, or inputs close relative "
                     "to a lengthscale): the rounding bound there is %.2g of log-likelihood, "
                     "and gradients may be off by more",
                bound);
    if (verbose && bound > 0.0)
        cli_msg(cmd, "factorisation: %s (the Cholesky's rounding bound at these parameters: "
                     "%.2g of log-likelihood)",
                strcmp(f, "cholesky") ? "square-root form" : "Cholesky", bound);
    return f;
}

int cli_model_describe(const char *cmd, gmm_mdl *m, gmm_model *mf, char **scratch)
{
    gmm_status s = gmm_mdl_describe(m, mf, scratch);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

static int predict_progress(void *user, size_t done, size_t total)
{
    cli_msg((const char *)user, "predicted %zu of %zu inputs", done, total);
    return cli_stop_requested();
}

void cli_model_progress(gmm_mdl *m, const char *cmd)
{
    gmm_mdl_set_progress(m, predict_progress, (void *)cmd);
}

int cli_model_check_draws(const char *cmd, gmm_mdl *m, const char *const *paths,
                          size_t npath, gmm_draws *d)
{
    gmm_status st = gmm_mdl_draws_stan_sites(m, d);
    if (st == GMM_EINVAL) {
        cli_msg(cmd, "%s: %s", npath ? paths[0] : "<draws>", gmm_error_message());
        return CLI_EXIT_ERROR;
    }
    if (st != GMM_OK)
        return cli_fail(cmd, st);
    for (size_t i = 0; i < npath; i++) {
        gmm_mdl_draws_verdict v;
        gmm_status s = gmm_mdl_check_draws(m, paths[i], d, &v);
        if (s == GMM_EINVAL) {
            cli_msg(cmd, "%s", gmm_error_message());
            return CLI_EXIT_ERROR;
        }
        if (s != GMM_OK)
            return cli_fail(cmd, s);
        if (v == GMM_MDL_DRAWS_OTHER_FILE)
            cli_msg(cmd, "warning: %s: made from another model file than %s, with the "
                         "same likelihood, latent, data and parameters",
                    paths[i], gmm_mdl_model_path(m) ? gmm_mdl_model_path(m) : "this model");
        else if (v == GMM_MDL_DRAWS_UNCHECKED)
            cli_msg(cmd, "warning: %s: no sidecar %s.json, so that the draws come from this model "
                         "is not checked, only that their columns are its columns",
                    paths[i], strcmp(paths[i], "-") ? paths[i] : "<stdin>");
    }
    return 0;
}
