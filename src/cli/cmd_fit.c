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

int cmd_fit(int argc, char **argv)
{
    const char *cmd = "fit";
    enum { OPT_RESTARTS = CLI_OPT_FIRST_COMMAND, OPT_MAXITER, OPT_SEED };
    static const struct option longopts[] = {CLI_MODEL_LONGOPTS,
                                             {"output", required_argument, NULL, 'o'},
                                             {"restarts", required_argument, NULL, OPT_RESTARTS},
                                             {"max-iter", required_argument, NULL, OPT_MAXITER},
                                             {"seed", required_argument, NULL, OPT_SEED},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    cli_model_opts o;
    cli_model_opts_init(&o);
    cli_io io;
    cli_io_init(&io);
    gmm_fit_params fp;
    gmm_fit_params_init(&fp);
    const char *out_path = NULL;
    int c, rc = 0;
    gmm_mdl *m = NULL;
    char *scratch = NULL;
    double *se = NULL;
    size_t v;

    optind = 1;
    while ((c = cli_model_getopt(&o, cmd, argc, argv, "ho:", longopts, usage_text, &rc)) != -1) {
        if (c == CLI_MODEL_OPT_STOP)
            goto done;
        switch (c) {
        case 'o': out_path = optarg; break;
        case OPT_RESTARTS:
            if (cli_parse_size(cmd, "restarts", optarg, 1, 100000, &fp.restarts)) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            break;
        case OPT_MAXITER:
            if (cli_parse_size(cmd, "max-iter", optarg, 1, 1000000000, &fp.max_iterations)) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            break;
        case OPT_SEED:
            if (cli_parse_size(cmd, "seed", optarg, 0, 0, &v)) {
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            fp.seed = v;
            break;
        default: break;
        }
    }
    if ((rc = cli_model_positional(cmd, argc, argv, &o)) != 0)
        goto done;
    /* an unwritable -o is said before the work, not after it */
    gmm_status s0;
    if (out_path && strcmp(out_path, "-") && (s0 = gmm_outfile_check(out_path)) != GMM_OK) {
        rc = cli_fail(cmd, s0);
        goto done;
    }
    /* and so is an -o that would replace the data or an edge list */
    cli_io_output(&io, "-o", out_path, NULL);
    if ((rc = cli_model_open(cmd, &o, NULL, NULL, &io, &m)) != 0)
        goto done;

    if ((rc = cli_model_fit_check(cmd, m)) != 0)
        goto done;
    progress_ctx pc = {cmd, o.verbose || isatty(STDERR_FILENO)};
    fp.progress = progress;
    fp.user = &pc;
    cli_install_signals();
    gmm_objective *obj = gmm_mdl_objective(m);
    gmm_fit_result res;
    gmm_status s = gmm_fit(obj, &fp, &res);
    if (s == GMM_ECANCEL) {
        cli_msg(cmd, "interrupted; no model written");
        rc = cli_interrupt_exit_code();
        goto done;
    }
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (!res.converged)
        cli_msg(cmd, "warning: not converged after %zu iterations (%s); writing the best "
                     "point with \"converged\": false",
                res.iterations, res.message);
    if (!res.converged && res.domain_msg[0])
        cli_msg(cmd, "the last refused trial point: %s", res.domain_msg);
    else if (o.verbose)
        cli_msg(cmd, "%s after %zu iterations, %zu evaluations", res.message, res.iterations,
                res.evaluations);
    if (o.verbose && !isnan(res.noise))
        cli_msg(cmd, "stop: %s (Newton step gain %.2g, loglik rounding noise %.2g)", res.stop,
                res.gain, res.noise);
    else if (o.verbose && !isnan(res.gain))
        cli_msg(cmd, "stop: %s (Newton step gain %.2g)", res.stop, res.gain);
    else if (o.verbose)
        cli_msg(cmd, "stop: %s", res.stop);
    if (res.failed_starts)
        cli_msg(cmd, "warning: %zu of %zu starts failed at their starting point",
                res.failed_starts, fp.restarts);

    /* the coefficients' standard errors (the others are not reported: a
     * variance's is a poor summary of its uncertainty) */
    size_t np = obj->nparam, nc = gmm_mdl_ncoef(m);
    if (nc && (se = gmm_malloc(np, sizeof *se)) == NULL) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if (nc && (s = gmm_fit_std_errors(obj, se)) != GMM_OK) {
        cli_msg(cmd, "warning: no standard errors: %s", gmm_error_message());
        gmm_free(se);
        se = NULL;
    }
    for (size_t k = 0; se && k < np - nc; k++)
        se[k] = NAN;
    gmm_model mf;
    if ((rc = cli_model_describe(cmd, m, &mf, &scratch)) != 0)
        goto done;
    mf.std_error = se;
    mf.loglik = res.loglik;
    mf.iterations = res.iterations;
    mf.converged = res.converged;
    mf.stop = res.stop;
    if ((s = gmm_model_save(&mf, out_path)) != GMM_OK) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    if (o.verbose || isatty(STDERR_FILENO))
        cli_msg(cmd, "loglik %.10g", res.loglik);
    (void)cli_model_factorisation(cmd, m, o.verbose); /* of the last evaluation */
done:
    gmm_free(scratch);
    gmm_free(se);
    gmm_mdl_free(m);
    cli_model_opts_free(&o);
    cli_io_free(&io);
    return rc;
}
