/* model_hmc.c -- the model's side of an HMC run (model.h): where the
 * chains start, which metric they use, and what the run writes beside its
 * rows -- the draws' columns, CmdStan's comment block of a chain, and the
 * sidecar FILE.json saying how the draws were made. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/draws.h"
#include "gmm/hmc_chains.h"
#include "gmm/json.h"
#include "gmm/latent.h"
#include "gmm/model.h"
#include "gmm/version.h"
#include "gmm/vi.h"

gmm_status gmm_mdl_take_vi_mean(gmm_mdl *m, double **x)
{
    size_t n = gmm_latent_dim(gmm_problem_latent(gmm_mdl_problem(m)));
    if (!(*x = gmm_malloc(n ? n : 1, sizeof **x)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    memcpy(*x, gmm_vi_mean(gmm_mdl_vi(m)), n * sizeof **x);
    gmm_mdl_set_vi(m, NULL);
    return GMM_OK;
}

gmm_status gmm_mdl_hmc_metric_auto(gmm_mdl *m, gmm_metric *metric, double *lmax)
{
    /* the sparse path: the Laplace posterior's factor unless constraints
     * rule it out (no band of the prior to compare the data with) */
    if (gmm_problem_sparse(gmm_mdl_problem(m))) {
        *lmax = NAN;
        if (gmm_latent_nconstr(gmm_problem_latent(gmm_mdl_problem(m))) > 0) {
            *metric = GMM_METRIC_PRIOR;
            return gmm_error(GMM_EINVAL, "the latent has linear constraints, where the Laplace "
                                         "metric is not available");
        }
        *metric = GMM_METRIC_LAPLACE;
        return GMM_OK;
    }
    *metric = GMM_METRIC_PRIOR;
    gmm_status s = gmm_problem_data_information(gmm_mdl_problem(m),
                                                gmm_mdl_objective(m)->value, lmax);
    if (s == GMM_OK && *lmax > GMM_METRIC_AUTO_INFO)
        *metric = GMM_METRIC_LAPLACE;
    return s;
}

/* The columns and the storage they point into. */
typedef struct {
    gmm_draws_columns c;
    const char **param, **site_name;
    size_t *site, *loglik_row;
    char *names;                    /* nsite x 96: the site names */
} columns;

void gmm_mdl_draws_columns_free(gmm_draws_columns *c)
{
    columns *k = (columns *)c;
    if (!k)
        return;
    gmm_free((void *)k->param);
    gmm_free((void *)k->site_name);
    gmm_free(k->site);
    gmm_free(k->loglik_row);
    gmm_free(k->names);
    gmm_free(k);
}

gmm_status gmm_mdl_draws_columns(gmm_mdl *m, const gmm_hmc_run_params *rp, int cmdstan,
                                 gmm_draws_columns **out)
{
    *out = NULL;
    const gmm_objective *o = gmm_mdl_objective(m);
    const gmm_problem *p = gmm_mdl_problem(m);
    const gmm_latent *lat = gmm_problem_latent(p);
    const double *y = gmm_problem_y(p);
    size_t ns = gmm_mdl_nsites(m), nr = gmm_latent_nrows(lat);
    columns *k = gmm_calloc(1, sizeof *k);
    if (!k)
        return gmm_error(GMM_ENOMEM, "out of memory");
    k->param = gmm_calloc(o->nparam + 1, sizeof *k->param);
    k->site_name = gmm_calloc(ns + 1, sizeof *k->site_name);
    k->site = gmm_calloc(ns + 1, sizeof *k->site);
    k->loglik_row = gmm_calloc(nr + 1, sizeof *k->loglik_row);
    k->names = cmdstan ? NULL : gmm_calloc(ns + 1, 96);
    if (!k->param || !k->site_name || !k->site || !k->loglik_row || (!cmdstan && !k->names)) {
        gmm_mdl_draws_columns_free(&k->c);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    gmm_draws_columns *c = &k->c;
    c->cmdstan = cmdstan;
    for (size_t j = 0; rp->sampled && j < o->nparam; j++)
        if (rp->sampled[j])
            k->param[c->nparam++] = o->name[j];
    for (size_t v = 0; v < ns; v++) {
        if (rp->keep && !rp->keep[v])
            continue;
        if (!cmdstan)
            k->site_name[c->nsite] = gmm_mdl_draws_column(m, v, k->names + 96 * c->nsite);
        k->site[c->nsite++] = v;
    }
    c->nstate = rp->states ? gmm_latent_dim(lat) : 0;
    for (size_t r = 0; rp->log_lik && r < nr; r++)
        if (!isnan(y[r]))
            k->loglik_row[c->nloglik++] = r;
    c->param = k->param;
    c->site = k->site;
    c->site_name = k->site_name;
    c->loglik_row = k->loglik_row;
    *out = c;
    return GMM_OK;
}

void gmm_mdl_cmdstan_config(gmm_mdl *m, const gmm_hmc_run_params *rp,
                            const gmm_hmc_chain_info *ci, size_t kept, const char *model_file,
                            const char *data_file, gmm_draws_cmdstan_config *c)
{
    const gmm_hmc_params *par = &rp->hmc;
    int marg = rp->sampled && rp->marginal != GMM_MARGINAL_NONE;
    *c = (gmm_draws_cmdstan_config){
        .model_file = model_file, .data_file = data_file,
        .num_samples = kept, .num_warmup = par->warmup,
        .gamma = par->gamma, .delta = par->target_accept, .kappa = par->kappa, .t0 = par->t0,
        .init_buffer = par->init_buffer, .term_buffer = par->term_buffer,
        .window = par->base_window, .nuts = par->sampler == GMM_HMC_NUTS,
        .max_depth = par->max_depth, .steps = par->steps, .stepsize = par->stepsize,
        .stepsize_jitter = par->stepsize_jitter, .id = ci->id, .seed = par->seed,
        .site_noun = gmm_mdl_site_noun(m),
        .metric_space =
            marg ? "the hyperparameters (positive ones on the log scale, mixing weights on\n"
                   "the logit scale; the latents are drawn given them)"
            : rp->sampled
                ? "the latent field whitened by the prior and the hyperparameters (positive\n"
                  "ones on the log scale, mixing weights on the logit scale)"
            : rp->metric == GMM_METRIC_LAPLACE ? "the latent field whitened by the Laplace posterior"
                                               : "the latent field whitened by the prior"};
}

/* The settings and the hyperparameters: fixed ones' values, sampled ones'
 * priors, and the centred design the coefficients' priors are on
 * (problem.h). */
static int put_settings(json_t *root, gmm_mdl *m, const gmm_hmc_run_params *rp)
{
    const gmm_hmc_params *par = &rp->hmc;
    const gmm_objective *o = gmm_mdl_objective(m);
    json_object_set_new(root, "sampler",
                        json_string(par->sampler == GMM_HMC_NUTS ? "nuts" : "hmc"));
    json_object_set_new(root, "seed", json_integer((json_int_t)par->seed));
    json_object_set_new(root, "warmup", json_integer((json_int_t)par->warmup));
    json_object_set_new(root, "draws", json_integer((json_int_t)par->draws));
    json_object_set_new(root, "max_depth", json_integer((json_int_t)par->max_depth));
    json_object_set_new(root, "steps", json_integer((json_int_t)par->steps));
    gmm_json_set_number(root, "target_accept", par->target_accept);
    gmm_json_set_number(root, "stepsize_jitter", par->stepsize_jitter);
    json_object_set_new(root, "metric",
                        json_string(rp->metric == GMM_METRIC_LAPLACE ? "laplace" : "prior"));
    json_t *hyp = json_object(), *pri = json_object();
    if (!hyp || !pri) {
        json_decref(hyp);
        json_decref(pri);
        return -1;
    }
    char buf[128];
    for (size_t k = 0; k < o->nparam; k++) {
        if (!(rp->sampled && rp->sampled[k])) {
            gmm_json_set_number(hyp, o->name[k], o->value[k]);
            continue;
        }
        snprintf(buf, sizeof buf, "%s(%.17g, %.17g)", gmm_prior_kind_name(rp->prior[k].kind),
                 rp->prior[k].mu, rp->prior[k].sigma);
        json_object_set_new(pri, o->name[k], json_string(buf));
    }
    static const char *const marginal[] = {"none", "laplace", "laplace-mh"};
    if (rp->sampled)
        json_object_set_new(root, "marginal", json_string(marginal[rp->marginal]));
    json_object_set_new(root, "fixed_parameters", hyp);
    json_object_set_new(root, "priors", pri);
    gmm_problem *pb = gmm_mdl_problem(m);
    size_t nc = gmm_problem_ncoef(pb);
    long icpt = -1;
    double *cm = nc && rp->sampled ? gmm_malloc(nc, sizeof *cm) : NULL;
    if (cm && gmm_problem_coef_moments(pb, cm, NULL, &icpt) == GMM_OK) {
        json_t *dm = json_object();
        for (size_t k = 0; dm && k < nc; k++)
            gmm_json_set_number(dm, o->name[o->nparam - nc + k], cm[k]);
        json_object_set_new(root, "coefficient_priors",
                            json_string(icpt >= 0 ? "on the centred design: the intercept's on "
                                                    "intercept + sum_k coef_k design_means[k]"
                                                  : "on the coefficients themselves"));
        if (dm)
            json_object_set_new(root, "design_means", dm);
    }
    gmm_free(cm);
    return 0;
}

/* Per chain: ids, step sizes, divergences, Metropolis-Hastings rejections
 * (laplace-mh), leapfrog steps of warm-up and draws. */
static int put_chains(json_t *root, const gmm_hmc_run_params *rp, const gmm_hmc_chains *ch)
{
    json_t *ids = json_array(), *eps = json_array(), *div = json_array();
    json_t *leap = json_object(), *lw = json_array(), *ld = json_array(), *rej = json_array();
    if (!ids || !eps || !div || !leap || !lw || !ld || !rej) {
        json_t *all[] = {ids, eps, div, leap, lw, ld, rej};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            json_decref(all[k]);
        return -1;
    }
    for (size_t c = 0; c < gmm_hmc_chains_count(ch); c++) {
        const gmm_hmc_chain_info *ci = gmm_hmc_chains_info(ch, c);
        json_array_append_new(ids, json_integer((json_int_t)ci->id));
        json_array_append_new(eps, json_real(ci->stepsize));
        json_array_append_new(div, json_integer((json_int_t)ci->divergences));
        json_array_append_new(rej, json_integer((json_int_t)ci->rejected));
        json_array_append_new(lw, json_integer((json_int_t)ci->leapfrog[0]));
        json_array_append_new(ld, json_integer((json_int_t)ci->leapfrog[1]));
    }
    json_object_set_new(root, "chains", ids);
    json_object_set_new(root, "step_size", eps);
    json_object_set_new(root, "divergences", div);
    if (rp->sampled && rp->marginal == GMM_MARGINAL_LAPLACE_MH)
        json_object_set_new(root, "mh_rejections", rej);
    else
        json_decref(rej);
    json_object_set_new(leap, "warmup", lw);
    json_object_set_new(leap, "draws", ld);
    json_object_set_new(root, "leapfrog_steps", leap);
    return 0;
}

/* After a cancel: the draws per chain and the chains kept. */
static void put_interrupted(json_t *root, const gmm_hmc_chains *ch)
{
    json_t *in = json_object(), *kept = json_array();
    for (size_t c = 0; in && kept && c < gmm_hmc_chains_count(ch); c++)
        if (gmm_hmc_chains_has_draws(ch, c))
            json_array_append_new(kept, json_integer((json_int_t)gmm_hmc_chains_info(ch, c)->id));
    if (in && kept) {
        json_object_set_new(in, "draws_per_chain",
                            json_integer((json_int_t)gmm_hmc_chains_kept(ch)));
        json_object_set_new(in, "chains_kept", kept);
        json_object_set_new(root, "interrupted", in);
    } else {
        json_decref(in);
        json_decref(kept);
    }
}

gmm_status gmm_mdl_hmc_sidecar(gmm_mdl *m, const gmm_hmc_run_params *rp,
                               const gmm_hmc_chains *ch, const char *model_file,
                               const char *data_file, int cmdstan, json_t **out)
{
    *out = NULL;
    json_t *root = json_object(), *org = NULL;
    if (!root)
        return gmm_error(GMM_ENOMEM, "out of memory");
    json_object_set_new(root, "tool_version", json_string(GMM_VERSION));
    json_object_set_new(root, "command", json_string("hmc"));
    json_object_set_new(root, "model", model_file ? json_string(model_file) : json_null());
    json_object_set_new(root, "data", data_file ? json_string(data_file) : json_null());
    gmm_status s = put_settings(root, m, rp) ? gmm_error(GMM_ENOMEM, "out of memory")
                                             : gmm_mdl_draws_origin(m, rp->sampled, &org);
    if (s == GMM_OK) {
        json_object_set_new(root, "origin", org);
        if (put_chains(root, rp, ch))
            s = gmm_error(GMM_ENOMEM, "out of memory");
    }
    if (s != GMM_OK) {
        json_decref(root);
        return s;
    }
    json_object_set_new(root, "format", json_string(cmdstan ? "cmdstan" : "csv"));
    if (gmm_hmc_chains_cut(ch))
        put_interrupted(root, ch);
    *out = root;
    return GMM_OK;
}
