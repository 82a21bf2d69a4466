/* cmd_fit.c -- `gmm-infer fit`: maximise the log marginal likelihood with
 * L-BFGS and write the model JSON (stdout, or -o FILE atomically). */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "gmm/io.h"
#include "gmm/alloc.h"
#include "gmm/fit.h"
#include "gmm/modelfile.h"

static const char usage_text[] =
    "Usage: gmm-infer fit DATA.csv [--kernel SPEC | --graph EDGES.csv --precision SPEC]\n"
    "                     [OPTIONS]\n"
    "Maximise the log marginal likelihood (L-BFGS) and write the model as JSON.\n\n"
    "  -o, --output FILE   write the model to FILE (atomically) instead of stdout\n"
    "  --restarts K        K starts (the first from the given values), keep the best\n"
    "  --max-iter N        iterations per start (default 500)\n"
    "  --seed S            seed of the restarts' jitter (default 1)\n"
    "  -h, --help          this help\n";

typedef struct {
    const char *cmd;
    int show;
} progress_ctx;

static int progress(void *user, const gmm_fit_progress *p)
{
    const progress_ctx *pc = user;
    if (pc->show)
        fprintf(stderr, "gmm-infer %s: start %zu iter %3zu  loglik %.10g  |grad| %.3g\n",
                pc->cmd, p->start + 1, p->iteration, p->loglik, p->grad_norm);
    return cli_stop_requested();
}

/* Polled between Newton steps inside an evaluation too: on a 1e6-node
 * lattice one evaluation takes half a minute. */
static int stop_now(void *user)
{
    (void)user;
    return cli_stop_requested();
}

/* What the test at the returned point said (fit.h, CONVERGED): boundaries
 * named, and what a fit that did not converge left. */
static void report_fit(const char *cmd, const gmm_objective *obj, const gmm_fit_result *res,
                       const int *bnd, int verbose)
{
    for (size_t i = 0; i < obj->nparam; i++) {
        if (bnd[i] != 1)
            continue;
        int logit = obj->scale[i] == GMM_SCALE_LOGIT, one = logit && obj->value[i] > 0.5;
        int cor = obj->scale[i] == GMM_SCALE_ATANH;
        one = cor ? (obj->value[i] > 0.0 ? 1 : -1) : one;
        cli_msg(cmd, "warning: boundary (singular) fit: %s -> %d (%.9g here, loglik %.10g; no "
                     "higher value inside): %s; no standard error",
                obj->name[i], one, obj->value[i], res->loglik,
                cor ? "the term's covariance is singular (lme4's correlation of +-1)"
                : logit ? (one ? "the term is its structured part alone"
                               : "the term is its unstructured part alone")
                : strncmp(obj->name[i], "likelihood.", 11)
                    ? "the term's effects are shrunk to 0"
                    : "the likelihood's noise vanishes");
    }
    if (res->unbounded) {
        for (size_t i = 0; i < obj->nparam; i++)
            if (bnd[i] == 2)
                cli_msg(cmd, "warning: the likelihood has no maximum: it grows without bound "
                             "as %s -> 0 (the latent terms can interpolate the data); writing "
                             "the point reached with \"converged\": false",
                        obj->name[i]);
    } else if (!res->converged) {
        cli_msg(cmd, "warning: not converged after %zu iterations and %zu Newton steps (%s); "
                     "writing the best point with \"converged\": false",
                res->iterations, res->newton_steps, res->message);
        if (res->left_param && !isnan(res->left_to))
            cli_msg(cmd, "a Newton step would still raise loglik by %.3g, moving %s to %.6g",
                    res->gain, res->left_param, res->left_to);
        else if (res->left_param)
            cli_msg(cmd, "loglik's curvature is not negative along %s: not at a maximum",
                    res->left_param);
        if (res->domain_msg[0])
            cli_msg(cmd, "the last refused trial point: %s", res->domain_msg);
    }
    if (verbose && !strcmp(res->lbfgs_stop, "scoring"))
        cli_msg(cmd, "scoring stopped (decrement) after %zu iterations; %zu evaluations in all",
                res->iterations, res->evaluations);
    else if (verbose && res->scoring_steps)
        cli_msg(cmd, "L-BFGS stopped (%s) after %zu scoring steps and %zu iterations; %zu "
                     "evaluations in all",
                res->lbfgs_stop, res->scoring_steps, res->iterations - res->scoring_steps,
                res->evaluations);
    else if (verbose)
        cli_msg(cmd, "L-BFGS stopped (%s) after %zu iterations; %zu evaluations in all",
                res->lbfgs_stop, res->iterations, res->evaluations);
    if (verbose && !isnan(res->noise))
        cli_msg(cmd, "stop: %s after %zu Newton steps (decrement %.2g, loglik rounding noise "
                     "%.2g)",
                res->stop, res->newton_steps, res->gain, res->noise);
    else if (verbose)
        cli_msg(cmd, "stop: %s after %zu Newton steps (decrement %.2g)", res->stop,
                res->newton_steps, res->gain);
}

typedef struct {
    cli_model_opts model;
    gmm_fit_params fp;
    const char *out;
    int stop;                  /* end now with the exit code returned (--help) */
} fit_args;

enum { OPT_RESTARTS = CLI_OPT_FIRST_COMMAND, OPT_MAXITER, OPT_SEED };
static const struct option longopts[] = {CLI_MODEL_LONGOPTS,
                                         {"output", required_argument, NULL, 'o'},
                                         {"restarts", required_argument, NULL, OPT_RESTARTS},
                                         {"max-iter", required_argument, NULL, OPT_MAXITER},
                                         {"seed", required_argument, NULL, OPT_SEED},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};

/* The options: 0, or an exit code after the message (a->stop: --help). */
static int parse_args(const char *cmd, int argc, char **argv, fit_args *a)
{
    int c, rc = 0;
    size_t v;
    optind = 1;
    while ((c = cli_model_getopt(&a->model, cmd, argc, argv, "ho:", longopts, usage_text,
                                 &rc)) != -1) {
        if (c == CLI_MODEL_OPT_STOP) {
            a->stop = 1;
            return rc;
        }
        switch (c) {
        case 'o': a->out = optarg; break;
        case OPT_RESTARTS:
            if (cli_parse_size(cmd, "restarts", optarg, 1, 100000, &a->fp.restarts))
                return CLI_EXIT_USAGE;
            break;
        case OPT_MAXITER:
            if (cli_parse_size(cmd, "max-iter", optarg, 1, 1000000000, &a->fp.max_iterations))
                return CLI_EXIT_USAGE;
            break;
        case OPT_SEED:
            if (cli_parse_size(cmd, "seed", optarg, 0, 0, &v))
                return CLI_EXIT_USAGE;
            a->fp.seed = v;
            break;
        default: break;
        }
    }
    return cli_model_positional(cmd, argc, argv, &a->model);
}

/* The model, once -o is known writable and not the data or an edge list
 * (said before the work, not after it).  0 or an exit code. */
static int open_model(const char *cmd, fit_args *a, gmm_mdl **m)
{
    cli_io io;
    cli_io_init(&io);
    gmm_status s;
    int rc;
    if (a->out && strcmp(a->out, "-") && (s = gmm_outfile_check(a->out)) != GMM_OK) {
        rc = cli_fail(cmd, s);
    } else {
        cli_io_output(&io, "-o", a->out, NULL);
        if ((rc = cli_model_open(cmd, &a->model, NULL, NULL, &io, m)) == 0)
            rc = cli_model_fit_check(cmd, *m);
    }
    cli_io_free(&io);
    return rc;
}

/* lme4's VarCorr table of the random-effect terms on stderr. */
static void print_varcorr(const char *cmd, const gmm_mdl_varcorr *v)
{
    if (!v->n)
        return;
    cli_msg(cmd, "random effects (lme4's VarCorr):");
    fprintf(stderr, "  %-12s %-14s %10s  %s\n", "Groups", "Name", "Std.Dev.", "Corr");
    for (size_t i = 0; i < v->n; i++) {
        const gmm_model_varcorr *r = &v->row[i];
        int first = i == 0 || strcmp(v->row[i - 1].group, r->group);
        fprintf(stderr, "  %-12s %-14s %10.4g ", first ? r->group : "", r->name, r->sd);
        for (size_t j = 0; j < r->ncorr; j++)
            fprintf(stderr, " %6.3f", r->corr[j]);
        fputc('\n', stderr);
    }
}

/* The model file: the fit, the coefficients' standard errors
 * (gmm_mdl_coef_std_errors) and lme4's VarCorr, then the log-likelihood,
 * the VarCorr table and the factorisation reported. */
static int save_fit(const char *cmd, const fit_args *a, gmm_mdl *m, const gmm_fit_result *res,
                    double *se, int *bnd)
{
    int have_se = gmm_mdl_coef_std_errors(m, se), rc;
    if (gmm_mdl_ncoef(m) && !have_se && res->converged)
        cli_msg(cmd, "warning: no standard errors: the observed information is not positive "
                     "definite");
    gmm_model mf;
    gmm_mdl_varcorr vc = {0};
    char *scratch = NULL;
    gmm_status s = gmm_mdl_varcorr_get(m, &vc);
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if ((rc = cli_model_describe(cmd, m, &mf, &scratch)) != 0)
        goto done;
    mf.nvarcorr = vc.n;
    mf.varcorr = vc.row;
    mf.std_error = have_se ? se : NULL;
    mf.loglik = res->loglik;
    mf.iterations = res->iterations;
    mf.converged = res->converged;
    mf.stop = res->stop;
    mf.decrement = res->gain;
    mf.boundary = res->nboundary ? bnd : NULL;
    s = gmm_model_save(&mf, a->out);
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (a->model.verbose || isatty(STDERR_FILENO)) {
        cli_msg(cmd, "loglik %.10g", res->loglik);
        print_varcorr(cmd, &vc);
    }
    (void)cli_model_factorisation(cmd, m, a->model.verbose); /* of the last evaluation */
done:
    gmm_mdl_varcorr_free(&vc);
    gmm_free(scratch);
    return rc;
}

int cmd_fit(int argc, char **argv)
{
    const char *cmd = "fit";
    fit_args a = {.out = NULL};
    cli_model_opts_init(&a.model);
    gmm_fit_params_init(&a.fp);
    gmm_mdl *m = NULL;
    double *se = NULL;
    int *bnd = NULL;

    int rc = parse_args(cmd, argc, argv, &a);
    if (rc || a.stop || (rc = open_model(cmd, &a, &m)) != 0)
        goto done;
    progress_ctx pc = {cmd, a.model.verbose || isatty(STDERR_FILENO)};
    a.fp.progress = progress;
    a.fp.user = &pc;
    cli_install_signals();
    gmm_problem_set_stop(gmm_mdl_problem(m), stop_now, NULL);
    gmm_objective *obj = gmm_mdl_objective(m);
    size_t np = obj->nparam;
    se = gmm_malloc(np ? np : 1, sizeof *se);
    bnd = gmm_calloc(np ? np : 1, sizeof *bnd);
    if (!se || !bnd) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    a.fp.std_errors = se;
    a.fp.boundary = bnd;
    gmm_fit_result res;
    gmm_status s = gmm_fit(obj, &a.fp, &res);
    if (s == GMM_ECANCEL) {
        cli_msg(cmd, "interrupted; no model written");
        rc = cli_interrupt_exit_code();
        goto done;
    }
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    report_fit(cmd, obj, &res, bnd, a.model.verbose);
    if (res.failed_starts)
        cli_msg(cmd, "warning: %zu of %zu starts failed at their starting point",
                res.failed_starts, a.fp.restarts);
    rc = save_fit(cmd, &a, m, &res, se, bnd);
done:
    gmm_free(se);
    gmm_free(bnd);
    gmm_mdl_free(m);
    cli_model_opts_free(&a.model);
    return rc;
}
