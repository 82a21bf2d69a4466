/* cmd_vi.c -- `gmm-infer vi`: precision-parameterised variational inference
 * (vi.h): q(x) = N(m, (L L')^-1), L a lower band, fitted by L-BFGS on the
 * exact ELBO gradient, optionally with the hyperparameters.  Writes the
 * model JSON (as fit does, plus "elbo" and "variational") and q's
 * parameters in a CSV beside it, so that predict, score and --init read it
 * back. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/modelfile.h"
#include "gmm/qfile.h"
#include "gmm/vi.h"

static const char usage_text[] =
    "Usage: gmm-infer vi DATA.csv [MODEL OPTIONS] -o MODEL.json [options]\n"
    "       gmm-infer vi --model MODEL.json [DATA.csv] -o OUT.json [options]\n"
    "Fit q(x) = N(m, (L L')^-1), L a lower band matrix, to the posterior of the\n"
    "latent field by maximising the ELBO (L-BFGS on its exact gradient), from the\n"
    "Laplace approximation.  Writes the model (JSON, as fit does, with \"elbo\" and\n"
    "\"variational\") and q's parameters to OUT.q.csv beside it; predict, score and\n"
    "--init read them back.\n\n"
    "  --model FILE          start from a model (fit's or vi's output) instead of\n"
    "                        model options\n"
    "  -o, --output FILE     the model file to write (required)\n"
    "  --bandwidth B         L's lower bandwidth (default: the prior precision's,\n"
    "                        or the starting vi result's; 0: mean-field)\n"
    "  --learn-hyper         also optimise the free hyperparameters (kernel or\n"
    "                        precision, likelihood, intercept) jointly\n"
    "  --init FILE           resume from a vi result (its q, q's bandwidth unless\n"
    "                        --bandwidth is given, and its hyperparameters)\n"
    "  --quadrature-points K Gauss-Hermite points per row for likelihoods without\n"
    "                        a closed form (default: chosen per row);\n"
    "                        refused when the rule's error in the ELBO, estimated\n"
    "                        against twice the points, exceeds 1e-8 max(1, |ELBO|)\n"
    "  --max-iter N          L-BFGS iterations, N >= 1 (default 2000)\n"
    "  --tol T               end the first phase when the ELBO rises by at most T\n"
    "                        relative over 3 iterations (default 1e-9); a final run\n"
    "                        goes on to the gradient test, the only one that counts\n"
    "                        as converged\n"
    "  --posterior FILE      also write the posterior of f per data row or node (CSV\n"
    "                        as predict prints it: mean, var, lower, upper; rate or\n"
    "                        probability too; level)\n"
    "  --level P             --posterior's interval probability, in (0, 1) (default\n"
    "                        0.9)\n"
    "  --quiet               no progress on stderr\n"
    "  -h, --help            this help\n";

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

int cmd_vi(int argc, char **argv)
{
    const char *cmd = "vi";
    enum {
        OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_BANDWIDTH, OPT_LEARN, OPT_INIT, OPT_QUAD,
        OPT_MAXIT, OPT_TOL, OPT_POSTERIOR, OPT_LEVEL, OPT_QUIET
    };
    static const struct option longopts[] = {
        CLI_MODEL_LONGOPTS,
        {"model", required_argument, NULL, OPT_MODEL},
        {"bandwidth", required_argument, NULL, OPT_BANDWIDTH},
        {"learn-hyper", no_argument, NULL, OPT_LEARN},
        {"init", required_argument, NULL, OPT_INIT},
        {"quadrature-points", required_argument, NULL, OPT_QUAD},
        {"max-iter", required_argument, NULL, OPT_MAXIT},
        {"tol", required_argument, NULL, OPT_TOL},
        {"posterior", required_argument, NULL, OPT_POSTERIOR},
        {"level", required_argument, NULL, OPT_LEVEL},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cli_model_opts o;
    cli_model_opts_init(&o);
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    int bw_given = 0; /* else a resumed q keeps its own bandwidth */
    const char *model_path = NULL, *out_path = NULL, *init = NULL, *post = NULL;
    int quiet = 0, c, rc = 0;
    double level = NAN; /* NAN: not given */
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

    optind = 1;
    while ((c = cli_model_getopt(&o, cmd, argc, argv, "ho:", longopts, usage_text, &rc)) != -1) {
        if (c == CLI_MODEL_OPT_STOP)
            goto done;
        switch (c) {
        case OPT_MODEL: model_path = optarg; break;
        case OPT_BANDWIDTH:
            rc = cli_parse_size(cmd, "bandwidth", optarg, 0, 100000000, &par.bandwidth);
            bw_given = 1;
            break;
        case OPT_LEARN: par.learn_hyper = 1; break;
        case OPT_INIT: init = optarg; break;
        case OPT_QUAD:
            rc = cli_parse_size(cmd, "quadrature-points", optarg, 0, GMM_LIK_QUAD_MAX, &par.nquad);
            break;
        case OPT_MAXIT:
            rc = cli_parse_size(cmd, "max-iter", optarg, 1, 100000000, &par.max_iter);
            break;
        case OPT_TOL: rc = cli_parse_nonneg(cmd, "tol", optarg, &par.tol); break;
        case OPT_POSTERIOR: post = optarg; break;
        case OPT_LEVEL: rc = cli_parse_level(cmd, optarg, &level); break;
        case OPT_QUIET: quiet = 1; break;
        case 'o': out_path = optarg; break;
        default: rc = CLI_EXIT_USAGE; break;
        }
        if (rc)
            goto done;
    }
    if ((rc = cli_model_positional(cmd, argc, argv, &o)) != 0)
        goto done;
    if (!out_path || !strcmp(out_path, "-")) {
        cli_msg(cmd, "-o MODEL.json is required: q's parameters are written beside it");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (!isnan(level) && !post) {
        cli_msg(cmd, "--level applies to --posterior's intervals");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if ((s = gmm_vi_params_check(&par)) != GMM_OK) {
        cli_fail(cmd, s);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    /* q goes beside the model (OUT.json -> OUT.q.csv): that needs a model
     * file, not a device or FIFO (no /dev/full.q.csv) */
    int in_place = 0;
    if ((s = gmm_qfile_targets(out_path, &qpath, &in_place)) != GMM_OK ||
        (!in_place && post && (s = gmm_outfile_check(post)) != GMM_OK)) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (in_place) {
        cli_msg(cmd, "-o %s is not a regular file: the model file names q's parameters, "
                     "written beside it (%s)",
                out_path, qpath);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    /* no output may replace an input: the model file, q's file and
     * --posterior against the data, the model and the files it names,
     * --init and its q */
    cli_io_output(&io, "-o", out_path, NULL);
    cli_io_output(&io, "-o", out_path, qpath);
    cli_io_output(&io, "--posterior", post, NULL);
    cli_model_vi_inputs(&io, "--init", init);
    if ((rc = cli_model_open(cmd, &o, model_path, &mf, &io, &m)) != 0)
        goto done;
    if ((rc = cli_model_fit_check(cmd, m)) != 0)
        goto done;
    if (par.nquad && gmm_mdl_likelihood(m)->type->expect) {
        cli_msg(cmd, "--quadrature-points: the %s likelihood's expectations are in closed form, "
                     "without quadrature",
                gmm_mdl_likelihood(m)->type->name);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    /* a --model that is itself a vi result: start from its q unless --init */
    gmm_mdl_set_vi(m, NULL);
    const char *ip = init ? init : model_path;
    const gmm_model *src = NULL;
    if (init) {
        if ((s = gmm_qfile_read_result(init, &mi)) != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        src = &mi;
    } else if (model_path && mf.has_vi) {
        src = &mf;
    }
    /* resuming keeps q's family unless --bandwidth asks for another */
    if (src && !bw_given)
        par.bandwidth = src->vi_bandwidth;
    prog_ctx pc = {cmd, !quiet && (o.verbose || isatty(STDERR_FILENO))};
    par.progress = progress;
    par.user = &pc;
    if ((s = gmm_vi_alloc(gmm_mdl_problem(m), &par, &v)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    const char *start = "laplace";
    if (src && bw_given && gmm_vi_bandwidth(v) != src->vi_bandwidth && !quiet)
        cli_msg(cmd, "%s has q of bandwidth %zu: starting from it %s to %zu", ip,
                src->vi_bandwidth,
                gmm_vi_bandwidth(v) > src->vi_bandwidth ? "zero-extended" : "restricted",
                gmm_vi_bandwidth(v));
    /* its hyperparameters, by name, then its q; or the Laplace approximation */
    if ((rc = cli_model_vi_start(cmd, m, v, src, ip, &start)) != 0)
        goto done;
    if (!quiet)
        cli_msg(cmd, "q: bandwidth %zu, %zu variational parameters, KL through the prior's %s; "
                     "start: %s%s",
                gmm_vi_bandwidth(v), gmm_vi_nvar(v),
                gmm_vi_uses_rows(v) ? "square root" : "assembled precision", start,
                par.learn_hyper ? "; hyperparameters learnt jointly" : "");
    if (par.nquad && (rc = quad_check(cmd, v, par.nquad, "at the start", 1, o.verbose)) != 0)
        goto done;
    cli_install_signals();
    gmm_vi_result res;
    s = gmm_vi_fit(v, &res);
    int interrupted = s == GMM_ECANCEL;
    if (s != GMM_OK && !interrupted) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (!interrupted &&
        (rc = quad_check(cmd, v, par.nquad, "at the optimum", par.nquad != 0, o.verbose)) != 0)
        goto done;
    /* the model, q and --posterior are committed together, at the end: a
     * run that fails writes none of them */
    if ((s = gmm_outset_alloc(&set)) != GMM_OK ||
        (s = gmm_mdl_save_vi(m, v, &res, interrupted, set, out_path, qpath)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (interrupted) {
        s = gmm_outset_commit(set);
        set = NULL;
        if (s != GMM_OK) {
            rc = cli_fail(cmd, s);
            goto done;
        }
        /* --init keeps q's bandwidth; what else the run optimised is named */
        char qopt[64] = "";
        if (par.nquad)
            snprintf(qopt, sizeof qopt, " --quadrature-points %zu", par.nquad);
        cli_msg(cmd, "interrupted after %zu iterations: the last point is in %s (\"converged\": "
                     "false); resume with --init %s%s%s",
                res.iterations, out_path, out_path, par.learn_hyper ? " --learn-hyper" : "",
                qopt);
        rc = cli_interrupt_exit_code();
        goto done;
    }
    if (!quiet)
        cli_msg(cmd, "%s after %zu iterations: ELBO %.10g", res.message, res.iterations,
                res.elbo);
    if (!res.converged)
        cli_msg(cmd, "warning: not converged (%s): gradient norm %.3g left where the test "
                     "asks at most %.3g", res.message, res.grad_norm, res.grad_limit);
    if (post) {
        gmm_mdl_set_vi(m, v);
        v = NULL;
        /* the posterior of f under q per data row or node: predict's table */
        rc = cli_pred_normal(cmd, set, post, m, NULL, gmm_mdl_nsites(m),
                             isnan(level) ? CLI_DEFAULT_LEVEL : level, 0);
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
    cli_model_opts_free(&o);
    return rc;
}
