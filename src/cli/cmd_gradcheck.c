/* cmd_gradcheck.c -- `gmm-infer gradcheck`: the analytic gradient against
 * central finite differences, per parameter (as CmdStan's `diagnose`), so a
 * user can check a model on their own data.  Exit 3 when any disagrees, 4
 * when none does but some difference is too uncertain to decide. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_model.h"
#include "gmm/gradcheck.h"
#include "gmm/modelfile.h"

static const char usage_text[] =
    "Usage: gmm-infer gradcheck DATA.csv [--kernel SPEC | --graph EDGES.csv --precision SPEC]\n"
    "                           [OPTIONS]\n"
    "       gmm-infer gradcheck --model MODEL.json [DATA.csv]\n"
    "Compare the analytic gradient with central finite differences; print CSV\n"
    "  parameter,value,analytic,numeric,fd_error,abs_error,allowed,ok\n"
    "with abs_error = |analytic - numeric|, fd_error the finite difference's\n"
    "error bound and, on the scale of log p for a positive parameter p and of\n"
    "logit p for one in (0, 1) (printed on p's scale),\n"
    "  allowed = tol + fd_error,  tol = T max(|analytic|, |numeric|, |loglik|, 1).\n"
    "ok is 'false' when abs_error > allowed, else 'inconclusive' when\n"
    "  fd_error > max(tol, 1e-3 max(|analytic|, |numeric|))\n"
    "(the difference too uncertain to tell a right gradient from a wrong one),\n"
    "else 'true'; 'skipped' for a parameter on the boundary of its domain (e.g.\n"
    "a ridge of 0).  Exit 3 when some gradient is false, else 4 when some is\n"
    "inconclusive.\n\n"
    "  --model FILE        take the model from fit's output\n"
    "  --tol T             T in allowed: relative to the larger of the gradient\n"
    "                      and the log likelihood's size (default 1e-6)\n"
    "  -h, --help          this help\n";

int cmd_gradcheck(int argc, char **argv)
{
    const char *cmd = "gradcheck";
    enum { OPT_MODEL = CLI_OPT_FIRST_COMMAND, OPT_TOL };
    static const struct option longopts[] = {
        CLI_MODEL_LONGOPTS, {"model", required_argument, NULL, OPT_MODEL},
        {"tol", required_argument, NULL, OPT_TOL}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cli_model_opts o;
    cli_model_opts_init(&o);
    gmm_gradcheck_params gp;
    gmm_gradcheck_params_init(&gp);
    const char *model_path = NULL;
    int c, rc = 0;
    gmm_mdl *m = NULL;
    gmm_model mf;
    gmm_model_init(&mf);
    char *end;

    optind = 1;
    while ((c = cli_model_getopt(&o, cmd, argc, argv, "h", longopts, usage_text, &rc)) != -1) {
        if (c == CLI_MODEL_OPT_STOP)
            goto done;
        switch (c) {
        case OPT_MODEL: model_path = optarg; break;
        case OPT_TOL:
            gp.rel_tol = strtod(optarg, &end);
            if (end == optarg || *end || !(gp.rel_tol > 0)) {
                cli_msg(cmd, "--tol: '%s' is not a positive number", optarg);
                rc = CLI_EXIT_USAGE;
                goto done;
            }
            break;
        default: break;
        }
    }
    if ((rc = cli_model_positional(cmd, argc, argv, &o)) != 0 ||
        (rc = cli_model_open(cmd, &o, model_path, &mf, NULL, &m)) != 0)
        goto done;

    gmm_gradcheck_result res;
    gmm_status s = gmm_gradcheck(gmm_mdl_objective(m), &gp, &res);
    if (s != GMM_OK && s != GMM_ECHECK && s != GMM_EINCONCLUSIVE) {
        rc = cli_fail(cmd, s);
        goto done;
    }
    printf("parameter,value,analytic,numeric,fd_error,abs_error,allowed,ok\n");
    for (size_t i = 0; i < res.nparam; i++) {
        const gmm_gradcheck_row *r = &res.row[i];
        printf("%s,%.17g,%.17g,%.17g,%.3g,%.3g,%.3g,%s\n", r->name, r->value, r->analytic,
               r->numeric, r->fd_error, r->abs_error, r->allowed,
               isnan(r->numeric)  ? "skipped"
               : r->inconclusive ? "inconclusive"
               : r->ok           ? "true"
                                 : "false");
    }
    fflush(stdout);
    (void)cli_model_factorisation(cmd, m, 0);
    if (res.ninconclusive > 0)
        cli_msg(cmd, "loglik %.10g; %zu of %zu gradients within tolerance %g, %zu inconclusive",
                res.loglik, res.nparam - res.nfail - res.ninconclusive, res.nparam, gp.rel_tol,
                res.ninconclusive);
    else
        cli_msg(cmd, "loglik %.10g; %zu of %zu gradients within tolerance %g", res.loglik,
                res.nparam - res.nfail, res.nparam, gp.rel_tol);
    gmm_gradcheck_result_free(&res);
    if (s == GMM_ECHECK || s == GMM_EINCONCLUSIVE)
        rc = cli_fail(cmd, s);
done:
    gmm_mdl_free(m);
    gmm_model_free(&mf);
    cli_model_opts_free(&o);
    return rc;
}
