/* cli_hmc_setup.c -- hmc's options that need the model (cli_hmc.h):
 * --latent-subset's sites, --prior's priors, --init's start and --metric's
 * choice, each checked against the model and reported. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_hmc.h"
#include "gmm/alloc.h"
#include "gmm/modelfile.h"

/* --latent-subset: data rows (1-based numbers and ranges A-B, state-space)
 * or node labels (graphs), comma-separated, into a mask of nsites. */
int cli_hmc_parse_subset(const char *cmd, gmm_mdl *m, const char *spec, unsigned char **keep)
{
    size_t ns = gmm_mdl_nsites(m);
    *keep = gmm_calloc(ns ? ns : 1, 1);
    if (!*keep)
        return cli_fail(cmd, GMM_ENOMEM);
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ","), a, b;
        char tok[256];
        if (len == 0 || len >= sizeof tok) {
            cli_msg(cmd, "--latent-subset: empty or overlong item in '%s'", spec);
            return CLI_EXIT_USAGE;
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (gmm_mdl_sites_parse(m, tok, &a, &b) != GMM_OK) {
            cli_msg(cmd, "--latent-subset: %s", gmm_error_message());
            return CLI_EXIT_USAGE;
        }
        for (size_t r = a; r <= b; r++)
            (*keep)[r] = 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

int cli_hmc_priors(const char *cmd, gmm_mdl *m, const char **args, size_t nargs, int **sampled,
                   gmm_prior **priors, int quiet)
{
    const gmm_objective *o = gmm_mdl_objective(m);
    size_t np = o->nparam;
    *sampled = gmm_calloc(np ? np : 1, sizeof **sampled);
    *priors = gmm_calloc(np ? np : 1, sizeof **priors);
    if (!*sampled || !*priors)
        return cli_fail(cmd, GMM_ENOMEM);
    gmm_hmc_default_priors(gmm_mdl_problem(m), *sampled, *priors);
    for (size_t a = 0; a < nargs; a++) {
        const char *eq = strchr(args[a], '=');
        char name[256], kind[16];
        double mu, sigma;
        int used = 0;
        if (!eq || (size_t)(eq - args[a]) >= sizeof name ||
            sscanf(eq + 1, "%15[a-z](%lf ,%lf )%n", kind, &mu, &sigma, &used) != 3 ||
            eq[1 + used] != '\0' || !isfinite(mu) || !(sigma > 0.0) || !isfinite(sigma)) {
            cli_msg(cmd, "--prior: '%s' is not NAME=lognormal(MU,SIGMA), "
                         "NAME=logitnormal(MU,SIGMA), NAME=atanhnormal(MU,SIGMA) or "
                         "NAME=normal(MU,SIGMA) with SIGMA > 0",
                    args[a]);
            return CLI_EXIT_USAGE;
        }
        memcpy(name, args[a], (size_t)(eq - args[a]));
        name[eq - args[a]] = '\0';
        for (size_t e = 0; e < a; e++)
            if (!strncmp(args[e], name, (size_t)(eq - args[a])) && args[e][eq - args[a]] == '=') {
                cli_msg(cmd, "--prior: %s given twice", name);
                return CLI_EXIT_USAGE;
            }
        size_t k;
        for (k = 0; k < np && strcmp(o->name[k], name); k++)
            ;
        if (k == np || !(*sampled)[k]) {
            cli_msg(cmd, "--prior: '%s' is not a sampled parameter%s", name,
                    k < np ? " (it is held by --fix or the formula's 'fixed')" : "");
            return CLI_EXIT_USAGE;
        }
        /* the kind follows the parameter's scale: a coefficient is sampled
         * as it is, a variance on its log, a mixing weight on its logit */
        gmm_prior_kind want = gmm_prior_kind_of(o->scale[k]);
        if (strcmp(kind, gmm_prior_kind_name(want))) {
            cli_msg(cmd, "--prior: %s takes a %s prior (on %s)", name,
                    gmm_prior_kind_name(want),
                    want == GMM_PRIOR_LOGNORMAL     ? "its log: it is > 0"
                    : want == GMM_PRIOR_LOGITNORMAL ? "its logit: it is in (0, 1)"
                    : want == GMM_PRIOR_ATANHNORMAL ? "its atanh: it is in (-1, 1)"
                                                    : "its value");
            return CLI_EXIT_USAGE;
        }
        (*priors)[k] = (gmm_prior){want, mu, sigma};
    }
    /* every prior checked before any is printed */
    for (size_t k = 0; k < np; k++)
        if ((*sampled)[k] && (*priors)[k].kind != GMM_PRIOR_NORMAL &&
            !gmm_scale_inside(o->scale[k], o->value[k])) {
            cli_msg(cmd, "%s = %g cannot be sampled on the %s scale: hold it with --fix %s",
                    o->name[k], o->value[k], gmm_scale_name(o->scale[k]), o->name[k]);
            return CLI_EXIT_USAGE;
        }
    for (size_t k = 0; k < np && !quiet; k++)
        if ((*sampled)[k])
            cli_msg(cmd, "prior: %s ~ %s(%.6g, %.6g)", o->name[k],
                    gmm_prior_kind_name((*priors)[k].kind), (*priors)[k].mu,
                    (*priors)[k].sigma);
    return 0;
}

int cli_hmc_init_point(const char *cmd, gmm_mdl *m, const char *init, double **x0)
{
    gmm_model mi;
    gmm_model_init(&mi);
    gmm_status s = gmm_model_read(init, &mi);
    int rc = 0;
    if (s != GMM_OK) {
        rc = cli_fail(cmd, s);
    } else if (!mi.has_vi) {
        cli_msg(cmd, "--init %s: not a vi result (no \"variational\")", init);
        rc = CLI_EXIT_ERROR;
    } else {
        rc = cli_model_load_vi(cmd, m, &mi, init);
    }
    gmm_model_free(&mi);
    if (rc)
        return rc;
    gmm_status s2 = gmm_mdl_take_vi_mean(m, x0);
    return s2 == GMM_OK ? 0 : cli_fail(cmd, s2);
}

int cli_hmc_metric(const char *cmd, gmm_mdl *m, const char *arg, int sample_hyper, int quiet,
                   gmm_metric *metric)
{
    const char *name = arg ? arg : "auto";
    int rc = cli_hmc_metric_check(cmd, arg, sample_hyper);
    if (rc)
        return rc;
    if (sample_hyper && gmm_problem_sparse(gmm_mdl_problem(m))) {
        cli_msg(cmd, "--sample-hyper differentiates the prior's whitening in the "
                     "hyperparameters, which the sparse factorisation does not: run it with "
                     "--factor band");
        return CLI_EXIT_USAGE;
    }
    *metric = !strcmp(name, "laplace") ? GMM_METRIC_LAPLACE : GMM_METRIC_PRIOR;
    if (strcmp(name, "auto")) {
        if (!quiet)
            cli_msg(cmd, "metric: %s", name);
        return 0;
    }
    if (sample_hyper) {
        if (!quiet)
            cli_msg(cmd, "metric: prior (auto: the hyperparameters are sampled)");
        return 0;
    }
    double lmax;
    gmm_status s = gmm_mdl_hmc_metric_auto(m, metric, &lmax);
    if (s == GMM_ENOMEM)
        return cli_fail(cmd, s);
    if (s != GMM_OK) { /* no Laplace fit, no Laplace map */
        if (!quiet)
            cli_msg(cmd, "metric: prior (auto: %s)", gmm_error_message());
        return 0;
    }
    if (!quiet && isnan(lmax))
        cli_msg(cmd, "metric: laplace (auto: on the sparse factorisation, where no band of "
                     "the prior is formed to compare the data's information with)");
    else if (!quiet)
        cli_msg(cmd, "metric: %s (auto: the data's information is %.3g times the prior's in "
                     "the stiffest direction, %s %g)",
                *metric == GMM_METRIC_LAPLACE ? "laplace" : "prior", lmax,
                *metric == GMM_METRIC_LAPLACE ? "above" : "at most", GMM_METRIC_AUTO_INFO);
    return 0;
}
