/* cmd_loglik.c -- `gmm-infer loglik`: the log marginal likelihood and its
 * gradient with respect to every named parameter, as JSON on stdout. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "gmm/alloc.h"
#include "gmm/json.h"
#include "gmm/modelfile.h"

static const char usage_text[] =
    "Usage: gmm-infer loglik DATA.csv [--kernel SPEC | --graph EDGES.csv --precision SPEC]\n"
    "                        [OPTIONS]\n"
    "       gmm-infer loglik --model MODEL.json [DATA.csv]\n"
    "Print the log marginal likelihood and its gradient (natural scale) as JSON.\n\n"
    "  --model FILE        take the model (spec, values, data) from fit's output\n"
    "  -h, --help          this help\n";

/* The log likelihood at the model's values and its gradient (*have_grad
 * 0 when the model gives the one but not the other here), both finite.  0
 * or an exit code after the message. */
static int evaluate(const char *cmd, gmm_objective *obj, double *ll, double *grad,
                    int *have_grad)
{
    *have_grad = 1;
    gmm_status s = obj->eval(obj->ctx, obj->value, ll, grad);
    if (s == GMM_EDOM) {
        /* A model that can give its log likelihood but not its gradient
         * here: report the log likelihood, with "gradient": null.  (A
         * state-space gradient shares its log likelihood's spacing limit
         * since the square-root form has its own; this stays for any
         * model that refuses a gradient alone.) */
        char why[GMM_ERROR_MAX];
        snprintf(why, sizeof why, "%s", gmm_error_message());
        if (obj->eval(obj->ctx, obj->value, ll, NULL) == GMM_OK) {
            cli_msg(cmd, "warning: no gradient: %s", why);
            *have_grad = 0;
            s = GMM_OK;
        } else {
            s = gmm_error(GMM_EDOM, "%s", why);
        }
    }
    if (s != GMM_OK)
        return cli_fail(cmd, s);
    /* JSON has no NaN or infinity: a non-finite entry is an error, never a
     * key silently missing from the output. */
    if (!isfinite(*ll)) {
        cli_msg(cmd, "the log likelihood is not finite (%g)", *ll);
        return CLI_EXIT_ERROR;
    }
    for (size_t i = 0; i < obj->nparam && *have_grad; i++)
        if (!isfinite(grad[i])) {
            cli_msg(cmd, "the gradient with respect to '%s' is not finite at %s = %g",
                    obj->name[i], obj->name[i], obj->value[i]);
            return CLI_EXIT_ERROR;
        }
    return 0;
}

/* The report on stdout: loglik, gradient (or null), parameters, and what
 * the model is (rows observed, state size, likelihood, approximation,
 * bandwidth, factorisation).  0 or an exit code. */
static int report(const char *cmd, gmm_mdl *m, double ll, const double *grad, int have_grad,
                  int verbose)
{
    gmm_objective *obj = gmm_mdl_objective(m);
    json_t *root = json_object(), *g = json_object(), *p = json_object();
    if (!root || !g || !p) {
        json_decref(root);
        json_decref(g);
        json_decref(p);
        return cli_fail(cmd, GMM_ENOMEM);
    }
    gmm_status s = gmm_json_set_number(root, "loglik", ll);
    for (size_t i = 0; i < obj->nparam && s == GMM_OK; i++)
        if (!have_grad || (s = gmm_json_set_number(g, obj->name[i], grad[i])) == GMM_OK)
            s = gmm_json_set_number(p, obj->name[i], obj->value[i]);
    if (s == GMM_OK && have_grad) {
        s = gmm_json_set_new(root, "gradient", g);
    } else {
        json_decref(g);
        if (s == GMM_OK)
            s = gmm_json_set_new(root, "gradient", json_null());
    }
    if (s == GMM_OK)
        s = gmm_json_set_new(root, "parameters", p);
    else
        json_decref(p);
    if (s == GMM_OK)
        s = gmm_json_set_new(root, "n_observed", json_integer((json_int_t)gmm_mdl_nobs(m)));
    if (s == GMM_OK)
        s = gmm_json_set_new(root, "state_dim", json_integer((json_int_t)gmm_mdl_state_dim(m)));
    if (s == GMM_OK)
        s = gmm_json_set_new(root, "likelihood",
                             json_string(gmm_mdl_likelihood_name(m)));
    if (s == GMM_OK)
        s = gmm_json_set_new(root, "approximation", json_string(gmm_mdl_approximation(m)));
    if (s == GMM_OK && strcmp(gmm_mdl_approximation(m), "exact"))
        s = gmm_json_set_new(root, "newton_iterations",
                             json_integer((json_int_t)gmm_mdl_newton_iterations(m)));
    if (s == GMM_OK)
        s = gmm_json_set_new(root, "bandwidth", json_integer((json_int_t)gmm_mdl_bandwidth(m)));
    if (s == GMM_OK)
        s = gmm_json_set_new(root, "factorisation",
                             json_string(cli_model_factorisation(cmd, m, verbose)));
    if (s == GMM_OK)
        s = gmm_json_write(stdout, root, "-");
    json_decref(root);
    return s == GMM_OK ? 0 : cli_fail(cmd, s);
}

int cmd_loglik(int argc, char **argv)
{
    const char *cmd = "loglik";
    enum { OPT_MODEL = CLI_OPT_FIRST_COMMAND };
    static const struct option longopts[] = {
        CLI_MODEL_LONGOPTS, {"model", required_argument, NULL, OPT_MODEL},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    cli_model_opts o;
    cli_model_opts_init(&o);
    const char *model_path = NULL;
    int c, rc = 0, have_grad = 0;
    gmm_mdl *m = NULL;
    gmm_model mf;
    gmm_model_init(&mf);
    double *grad = NULL, ll;

    optind = 1;
    while ((c = cli_model_getopt(&o, cmd, argc, argv, "h", longopts, usage_text, &rc)) != -1) {
        if (c == CLI_MODEL_OPT_STOP)
            goto done;
        if (c == OPT_MODEL)
            model_path = optarg;
    }
    if ((rc = cli_model_positional(cmd, argc, argv, &o)) != 0 ||
        (rc = cli_model_open(cmd, &o, model_path, &mf, NULL, &m)) != 0)
        goto done;
    gmm_objective *obj = gmm_mdl_objective(m);
    if (!(grad = gmm_malloc(obj->nparam, sizeof(double)))) {
        rc = cli_fail(cmd, GMM_ENOMEM);
        goto done;
    }
    if ((rc = evaluate(cmd, obj, &ll, grad, &have_grad)) == 0)
        rc = report(cmd, m, ll, grad, have_grad, o.verbose);
done:
    gmm_free(grad);
    gmm_mdl_free(m);
    gmm_model_free(&mf);
    cli_model_opts_free(&o);
    return rc;
}
