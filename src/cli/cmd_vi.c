/* cmd_vi.c -- `gmm-infer vi`: precision-parameterised variational inference
 * (vi.h): q(x) = N(m, (L L')^-1), L a lower band, fitted by L-BFGS on the
 * exact ELBO gradient, optionally with the hyperparameters.  Writes the
 * model JSON (as fit does, plus "elbo" and "variational") and q's
 * parameters in a CSV beside it, so that predict, score and --init read it
 * back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "cli_vi.h"
#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/modelfile.h"
#include "gmm/problem.h"
#include "gmm/qfile.h"
#include "gmm/vi.h"

typedef struct {
    const char *cmd;
    int show;
} prog_ctx;

static int progress(void *user, const gmm_vi_progress *p)
{
    prog_ctx *c = user;
    if (cli_stop_requested())
        return 1;
    if (c->show && (p->iteration <= 5 || p->iteration % 10 == 0))
        cli_msg(c->cmd, "iteration %4zu  ELBO %.10g  |grad| %.3g", p->iteration, p->elbo,
                p->grad_norm);
    return 0;
}

/* 0 when the rule of nquad points (0: automatic) is accurate at v's state,
 * else a message and CLI_EXIT_ERROR (refuse) or a warning and 0. */
static int quad_check(const char *cmd, gmm_vi *v, size_t nquad, const char *when, int refuse,
                      int verbose)
{
    double err, lim;
    gmm_status s = gmm_vi_quad_check(v, nquad, &err, &lim);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    if (verbose)
        cli_msg(cmd, "%s: quadrature error of the ELBO %.3g (limit %.3g)", when, err, lim);
    if (err <= lim)
        return 0;
    if (refuse) {
        cli_msg(cmd, "--quadrature-points %zu: the rule's error in the ELBO %s is %.3g "
                     "(estimated against a rule of twice the points), above %g max(1, |ELBO|) "
                     "= %.3g: give more points, or omit the option (points chosen per row)",
                nquad, when, err, GMM_VI_QUAD_RTOL, lim);
        return CLI_EXIT_ERROR;
    }
    cli_msg(cmd, "warning: the quadrature error in the ELBO %s is %.3g, above %g max(1, "
                 "|ELBO|) = %.3g (some rows' variances are too large for the Gauss-Hermite "
                 "rules)",
            when, err, GMM_VI_QUAD_RTOL, lim);
    return 0;
}

/* q goes beside the model (OUT.json -> OUT.q.csv): that needs a model
 * file, not a device or FIFO (no /dev/full.q.csv).  No output may replace
 * an input: the model file, q's file and --posterior against the data,
 * the model and the files it names, --init and its q.  0 or an exit
 * code. */
static int plan_outputs(const char *cmd, const cli_vi_args *a, cli_io *io, char **qpath)
{
    int in_place = 0;
    gmm_status s;
    if ((s = gmm_qfile_targets(a->out, qpath, &in_place)) != GMM_OK ||
        (!in_place && a->post && (s = gmm_outfile_check(a->post)) != GMM_OK))
        return cli_fail(cmd, s);
    if (in_place) {
        cli_msg(cmd, "-o %s is not a regular file: the model file names q's parameters, "
                     "written beside it (%s)",
                a->out, *qpath);
        return CLI_EXIT_USAGE;
    }
    cli_io_output(io, "-o", a->out, NULL);
    cli_io_output(io, "-o", a->out, *qpath);
    cli_io_output(io, "--posterior", a->post, NULL);
    cli_model_vi_inputs(io, "--init", a->init);
    return 0;
}

/* q for model m, where it starts (a --model that is itself a vi result:
 * from its q unless --init; else the Laplace approximation), reported.  0
 * or an exit code. */
static int start_q(const char *cmd, cli_vi_args *a, gmm_mdl *m, const gmm_model *mf,
                   gmm_model *mi, gmm_vi **v)
{
    gmm_vi_params *par = &a->par;
    gmm_status s;
    int rc = 0;
    if (par->nquad && gmm_mdl_expect_closed_form(m)) {
        cli_msg(cmd, "--quadrature-points: the %s likelihood's expectations are in closed form, "
                     "without quadrature",
                gmm_mdl_likelihood_name(m));
        return CLI_EXIT_USAGE;
    }
    gmm_mdl_set_vi(m, NULL);
    const char *ip = a->init ? a->init : a->model_path;
    const gmm_model *src = NULL;
    if (a->init) {
        if ((s = gmm_qfile_read_result(a->init, mi)) != GMM_OK)
            return cli_fail(cmd, s);
        src = mi;
    } else if (a->model_path && mf->has_vi) {
        src = mf;
    }
    /* resuming keeps q's family unless --bandwidth asks for another */
    if (src && !a->bw_given)
        par->bandwidth = src->vi_bandwidth;
    if ((s = gmm_vi_alloc(gmm_mdl_problem(m), par, v)) != GMM_OK) {
        int code = cli_fail(cmd, s);
        if (gmm_problem_sparse(gmm_mdl_problem(m)))
            cli_msg(cmd, "run vi with --factor band");
        return code;
    }
    const char *start = "laplace";
    if (src && a->bw_given && gmm_vi_bandwidth(*v) != src->vi_bandwidth && !a->quiet)
        cli_msg(cmd, "%s has q of bandwidth %zu: starting from it %s to %zu", ip,
                src->vi_bandwidth,
                gmm_vi_bandwidth(*v) > src->vi_bandwidth ? "zero-extended" : "restricted",
                gmm_vi_bandwidth(*v));
    /* its hyperparameters, by name, then its q; or the Laplace approximation */
    if ((rc = cli_model_vi_start(cmd, m, *v, src, ip, &start)) != 0)
        return rc;
    if (!a->quiet)
        cli_msg(cmd, "q: bandwidth %zu, %zu variational parameters, KL through the prior's %s; "
                     "start: %s%s",
                gmm_vi_bandwidth(*v), gmm_vi_nvar(*v),
                gmm_vi_uses_rows(*v) ? "square root" : "assembled precision", start,
                par->learn_hyper ? "; hyperparameters learnt jointly" : "");
    if (par->nquad)
        rc = quad_check(cmd, *v, par->nquad, "at the start", 1, a->model.verbose);
    return rc;
}

/* After an interrupt: the last point is written; how to resume. */
static int interrupted_exit(const char *cmd, const cli_vi_args *a, const gmm_vi_result *res,
                            gmm_outset *set)
{
    gmm_status s = gmm_outset_commit(set);
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    /* --init keeps q's bandwidth; what else the run optimised is named */
    char qopt[64] = "";
    if (a->par.nquad)
        snprintf(qopt, sizeof qopt, " --quadrature-points %zu", a->par.nquad);
    cli_msg(cmd, "interrupted after %zu iterations: the last point is in %s (\"converged\": "
                 "false); resume with --init %s%s%s",
            res->iterations, a->out, a->out, a->par.learn_hyper ? " --learn-hyper" : "", qopt);
    return cli_interrupt_exit_code();
}

int cmd_vi(int argc, char **argv)
{
    const char *cmd = "vi";
    cli_vi_args a;
    gmm_model mf, mi;
    gmm_model_init(&mf);
    gmm_model_init(&mi);
    gmm_mdl *m = NULL;
    char *qpath = NULL;
    gmm_vi *v = NULL;
    gmm_outset *set = NULL;
    cli_io io;
    cli_io_init(&io);
    gmm_status s;

    int rc = cli_vi_args_parse(cmd, argc, argv, &a);
    if (rc || a.stop || (rc = plan_outputs(cmd, &a, &io, &qpath)) != 0 ||
        (rc = cli_model_open(cmd, &a.model, a.model_path, &mf, &io, &m)) != 0 ||
        (rc = cli_model_fit_check(cmd, m)) != 0)
        goto done;
    prog_ctx pc = {cmd, !a.quiet && (a.model.verbose || isatty(STDERR_FILENO))};
    a.par.progress = progress;
    a.par.user = &pc;
    if ((rc = start_q(cmd, &a, m, &mf, &mi, &v)) != 0)
        goto done;
    cli_install_signals();
    gmm_vi_result res;
    s = gmm_vi_fit(v, &res);
    int interrupted = s == GMM_ECANCEL;
    if (s != GMM_OK && !interrupted) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (!interrupted && (rc = quad_check(cmd, v, a.par.nquad, "at the optimum",
                                         a.par.nquad != 0, a.model.verbose)) != 0)
        goto done;
    /* the model, q and --posterior are committed together, at the end: a
     * run that fails writes none of them */
    if ((s = gmm_outset_alloc(&set)) != GMM_OK ||
        (s = gmm_mdl_save_vi(m, v, &res, interrupted, set, a.out, qpath)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (interrupted) {
        rc = interrupted_exit(cmd, &a, &res, set);
        set = NULL;
        goto done;
    }
    if (!a.quiet)
        cli_msg(cmd, "%s after %zu iterations: ELBO %.10g", res.message, res.iterations,
                res.elbo);
    if (!res.converged)
        cli_msg(cmd, "warning: not converged (%s): gradient norm %.3g left where the test "
                     "asks at most %.3g", res.message, res.grad_norm, res.grad_limit);
    if (a.post) {
        gmm_mdl_set_vi(m, v);
        v = NULL;
        /* the posterior of f under q per data row or node: predict's table */
        rc = cli_pred_normal(cmd, set, a.post, m, NULL, gmm_mdl_nsites(m),
                             isnan(a.level) ? CLI_DEFAULT_LEVEL : a.level, 0);
        if (rc != 0)
            goto done;
    }
    s = gmm_outset_commit(set);
    set = NULL;
    if (s != GMM_OK)
        rc = cli_fail(cmd, s);
done:
    gmm_outset_abort(set);
    cli_io_free(&io);
    gmm_vi_free(v);
    gmm_free(qpath);
    gmm_mdl_free(m);
    gmm_model_free(&mf);
    gmm_model_free(&mi);
    cli_vi_args_free(&a);
    return rc;
}
