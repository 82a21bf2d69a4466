/* model_sites.c -- what a built model (model.h) answers: its parts, its
 * sites (data rows or graph nodes), predictions there or at new inputs, a
 * VI result's q, and its description as a model file. */
#include "model_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "gmm/fit.h"
#include "gmm/io.h"
#include "gmm/qfile.h"
#include "gmm/ssm.h"

gmm_objective *gmm_mdl_objective(gmm_mdl *m) { return m->obj; }
gmm_problem *gmm_mdl_problem(gmm_mdl *m) { return m->prob; }
size_t gmm_mdl_nobs(const gmm_mdl *m) { return m->nobs; }
size_t gmm_mdl_rows_dropped(const gmm_mdl *m) { return m->ndropped; }
int gmm_mdl_has_inputs(const gmm_mdl *m) { return gmm_latent_has_inputs(m->lat); }

int gmm_mdl_at_rows(const gmm_mdl *m)
{
    return m->stack || !gmm_latent_has_inputs(m->lat) ||
           !gmm_problem_offset_constant(m->prob, m->obj->value, NULL);
}

gmm_status gmm_mdl_check_new_inputs(const gmm_mdl *m)
{
    if (m->stack)
        return gmm_error(GMM_EINVAL, "a grid has no rows: new rows come from a table "
                                     "(each f() term's column%s)",
                         m->ncoef > 1 ? ", and the formula's covariates and factors" : "");
    if (gmm_mdl_at_rows(m))
        return gmm_error(GMM_EINVAL, "a grid has no %s: new rows come from a table "
                                     "(column '%s'%s)",
                         gmm_latent_has_inputs(m->lat) ? "covariate values" : "nodes",
                         gmm_mdl_data_site_name(m),
                         m->ncoef > 1 ? " and the formula's covariates and factors" : "");
    return GMM_OK;
}
const char *gmm_mdl_model_path(const gmm_mdl *m) { return m->model_path; }
const char *gmm_mdl_data_file(const gmm_mdl *m) { return m->data_file; }

const char *gmm_mdl_approximation(const gmm_mdl *m)
{
    return gmm_problem_exact(m->prob) ? "exact" : "laplace";
}

const char *gmm_mdl_posterior_kind(const gmm_mdl *m)
{
    return m->vi ? "vi" : gmm_mdl_approximation(m);
}

gmm_vi *gmm_mdl_vi(gmm_mdl *m) { return m->vi; }

void gmm_mdl_set_vi(gmm_mdl *m, gmm_vi *v)
{
    gmm_vi_free(m->vi);
    m->vi = v;
}

/* Read the q file at path into v's state (q of v's order and bandwidth) at
 * hyperparameters theta: gmm_qfile_read's errors, then gmm_vi_set_state's. */
static gmm_status q_read(const char *path, const double *theta, gmm_vi *v)
{
    size_t n = gmm_vi_dim(v), b = gmm_vi_bandwidth(v);
    double *mean = gmm_malloc(n ? n : 1, sizeof *mean);
    gmm_band *L = gmm_band_alloc(n, b, 0, GMM_BAND_LOWER);
    gmm_status s = mean && L ? gmm_qfile_read(path, n, b, mean, L)
                             : gmm_error(GMM_ENOMEM, "out of memory for %s", path);
    if (s == GMM_OK)
        s = gmm_vi_set_state(v, theta, mean, L);
    gmm_band_free(L);
    gmm_free(mean);
    return s;
}

gmm_status gmm_mdl_load_vi(gmm_mdl *m, const char *path, size_t b, const char *model_name)
{
    gmm_vi *v = NULL;
    gmm_vi_params par;
    gmm_vi_params_init(&par);
    par.bandwidth = b;
    gmm_status s = gmm_vi_alloc(m->prob, &par, &v);
    if (s == GMM_OK)
        s = q_read(path, m->obj->value, v);
    if (s == GMM_EINVAL || s == GMM_EDIM) {
        char why[GMM_ERROR_MAX];
        snprintf(why, sizeof why, "%s", gmm_error_message());
        s = gmm_error(GMM_EINVAL, "%s (variational parameters of %s): %s", path, model_name,
                      why);
    }
    if (s == GMM_OK) {
        gmm_mdl_set_vi(m, v);
        v = NULL;
    }
    gmm_vi_free(v);
    return s;
}

gmm_status gmm_mdl_vi_start(gmm_mdl *m, gmm_vi *v, const gmm_model *src, const char *qpath,
                            const char *src_name, const char **start)
{
    gmm_mdl_set_vi(m, NULL);
    if (!src)
        return gmm_vi_start_laplace(v, start);
    gmm_status s;
    if ((s = gmm_mdl_take_params(m, src, src_name)) != GMM_OK ||
        (s = gmm_mdl_load_vi(m, qpath, src->vi_bandwidth, src_name)) != GMM_OK)
        return s;
    s = gmm_vi_set_state_from(v, m->obj->value, gmm_mdl_vi(m));
    gmm_mdl_set_vi(m, NULL);
    if (s == GMM_OK)
        *start = "given";
    return s;
}

gmm_status gmm_mdl_save_vi(gmm_mdl *m, gmm_vi *v, const gmm_vi_result *res, int interrupted,
                           gmm_outset *set, const char *path, const char *qpath)
{
    /* the state (the final point, or the last accepted one when
     * interrupted) is written either way, so a run can resume from it */
    memcpy(m->obj->value, gmm_vi_theta(v), m->obj->nparam * sizeof *m->obj->value);
    gmm_model out;
    char *scratch = NULL;
    size_t n = gmm_vi_dim(v), b = gmm_vi_bandwidth(v);
    gmm_band *L = NULL;
    gmm_status s = gmm_mdl_describe(m, &out, &scratch);
    if (s == GMM_OK && !(L = gmm_band_alloc(n, b, 0, GMM_BAND_LOWER)))
        s = gmm_error(GMM_ENOMEM, "out of memory for q's factor");
    if (s == GMM_OK)
        s = gmm_vi_factor(v, L);
    if (s == GMM_OK) {
        out.loglik = res->elbo;
        out.iterations = res->iterations;
        out.converged = res->converged && !interrupted;
        out.has_vi = 1;
        out.elbo = res->elbo;
        out.vi_bandwidth = b;
        const char *qbase = strrchr(qpath, '/');
        out.vi_file = (char *)(qbase ? qbase + 1 : qpath); /* beside the model */
        s = gmm_qfile_save(&out, set, path, qpath, n, b, gmm_vi_mean(v), L);
    }
    gmm_band_free(L);
    gmm_free(scratch);
    return s;
}

size_t gmm_mdl_ncoef(const gmm_mdl *m) { return gmm_problem_ncoef(m->prob); }

size_t gmm_mdl_newton_iterations(const gmm_mdl *m) { return gmm_problem_iterations(m->prob); }

const char *gmm_mdl_factorisation(const gmm_mdl *m, double *bound)
{
    return gmm_problem_factorisation(m->prob, bound);
}

int gmm_mdl_sqrt_declined(const gmm_mdl *m) { return gmm_problem_sqrt_declined(m->prob); }

size_t gmm_mdl_state_dim(const gmm_mdl *m) { return gmm_latent_obs_width(m->lat); }

size_t gmm_mdl_bandwidth(const gmm_mdl *m) { return gmm_latent_bandwidth(m->lat); }

double gmm_mdl_center(const gmm_mdl *m, int *has_center)
{
    if (has_center)
        *has_center = m->has_center > 0;
    return m->has_center > 0 ? m->center : 0.0;
}

const gmm_lik *gmm_mdl_likelihood(gmm_mdl *m)
{
    /* obj->value holds the parameters (a model file's, or a fit's result);
     * they are in their domain by construction, so this cannot fail */
    if (gmm_problem_lik_at(m->prob, m->obj->value, &m->lik_now) != GMM_OK)
        m->lik_now = m->lik;
    return &m->lik_now;
}

double gmm_mdl_noise(const gmm_mdl *m)
{
    return m->lik.type->conjugate ? m->obj->value[gmm_latent_nparam(m->lat)] : 0.0;
}

gmm_status gmm_mdl_describe(const gmm_mdl *m, gmm_model *mf, char **scratch)
{
    *scratch = NULL;
    gmm_model_init(mf);
    const gmm_objective *o = m->obj;
    size_t nl = gmm_latent_nparam(m->lat);
    if (m->stack) {
        /* the formula says it all; the parameters carry the values */
        mf->desc.merge_tol = m->merge_tol;
    } else if (m->graph) {
        /* the spec's keys are the latent's names (a formula renames them) */
        char **lname = gmm_malloc(nl ? nl : 1, sizeof *lname);
        if (!lname)
            return gmm_error(GMM_ENOMEM, "out of memory");
        for (size_t i = 0; i < nl; i++)
            lname[i] = (char *)gmm_latent_param_name(m->lat, i);
        size_t need = gmm_spec_format(m->spec, nl, lname, o->value, NULL, 0);
        char *buf = gmm_malloc(need + 1, 1);
        if (!buf) {
            gmm_free(lname);
            return gmm_error(GMM_ENOMEM, "out of memory");
        }
        gmm_spec_format(m->spec, nl, lname, o->value, buf, need + 1);
        gmm_free(lname);
        *scratch = buf;
        mf->desc.precision = buf;
        mf->desc.graph = m->graph_rec;
        for (int k = 0; k < 3; k++)
            mf->desc.edge_cols[k] = m->edge_cols[k];
        mf->desc.data.node = m->nodename;
    } else {
        size_t need = gmm_kernel_format(m->kernel, o->value, NULL, 0) + 1;
        char *buf = gmm_malloc(need, 1);
        if (!buf)
            return gmm_error(GMM_ENOMEM, "out of memory");
        gmm_kernel_format(m->kernel, o->value, buf, need);
        *scratch = buf;
        mf->desc.kernel = buf;
        mf->desc.data.x = m->xname;
        mf->desc.merge_tol = m->merge_tol;
    }
    mf->desc.formula = m->formula_rec ? m->formula_rec : m->formula;
    mf->desc.factor = m->factor;
    if (m->edgeless)
        memset(mf->desc.edge_cols, 0, sizeof mf->desc.edge_cols);
    mf->desc.data.file = m->data_rec;
    mf->desc.data.y = m->yname;
    /* the per-row quantity's column under the name the family reads it by */
    const char *q = m->lik.type->rowq;
    mf->desc.data.exposure = q && !strcmp(q, "exposure") ? m->ename : NULL;
    mf->desc.data.trials = q && !strcmp(q, "trials") ? m->ename : NULL;
    mf->desc.data.weights = m->wname;
    mf->nparam = o->nparam;
    mf->param_name = o->name;
    mf->param_value = o->value;
    if (m->desc_value) { /* an aliased coefficient is null: not estimated */
        size_t c0 = o->nparam - m->ncoef;
        memcpy(m->desc_value, o->value, o->nparam * sizeof *o->value);
        for (size_t k = 0; k < m->ncoef; k++)
            if (m->aliased[k])
                m->desc_value[c0 + k] = NAN;
        mf->param_value = m->desc_value;
    }
    mf->desc.likelihood = (char *)m->lik.type->name;
    mf->has_center = m->has_center > 0;
    mf->center = m->center;
    return GMM_OK;
}

int gmm_mdl_impl_rows(const gmm_mdl *m)
{
    return m->stack || gmm_latent_has_inputs(m->lat) ||
           !gmm_problem_offset_constant(m->prob, m->obj->value, NULL);
}

size_t gmm_mdl_nsites(const gmm_mdl *m)
{
    return gmm_mdl_impl_rows(m) ? m->nrow : m->gmrf->n;
}

void gmm_mdl_set_progress(gmm_mdl *m, int (*fn)(void *user, size_t done, size_t total),
                          void *user)
{
    gmm_ssm *ssm = gmm_latent_ssm(m->lat);
    if (ssm)
        gmm_ssm_set_progress(ssm, fn, user);
}

gmm_status gmm_mdl_whitened_sites(gmm_mdl *m, const double *v, double *f)
{
    return gmm_mdl_impl_rows(m) ? gmm_problem_whitened_linpred(m->prob, v, f, NULL)
                                         : gmm_problem_whitened_linpred(m->prob, v, NULL, f);
}

gmm_status gmm_mdl_impl_predict_rows(gmm_mdl *m, double *mean, double *var)
{
    gmm_status s = m->vi ? gmm_vi_predict_rows(m->vi, mean, var)
                         : gmm_problem_predict_rows(m->prob, m->obj->value, mean, var);
    for (size_t i = 0; s == GMM_OK && m->has_center > 0 && i < m->nrow; i++)
        mean[i] += m->center;
    return s;
}

gmm_status gmm_mdl_impl_coef_var(gmm_mdl *m, const double *X, size_t n, double *var)
{
    size_t np = m->obj->nparam, nc = m->ncoef, c0 = np - nc;
    if (gmm_latent_dim(m->lat) > 0 || nc == 0 || m->vi || n == 0)
        return GMM_OK;
    double *A = gmm_calloc(n * np, sizeof *A), *v = gmm_malloc(n, sizeof *v);
    gmm_status s = A && v ? GMM_OK
                          : gmm_error(GMM_ENOMEM, "out of memory for the coefficients' variance");
    for (size_t r = 0; s == GMM_OK && r < n; r++)
        memcpy(A + r * np + c0, X + r * nc, nc * sizeof *A);
    if (s == GMM_OK)
        s = gmm_fit_lincomb_var(m->obj, A, n, v); /* a fixed coefficient counts for nothing */
    for (size_t r = 0; s == GMM_OK && r < n; r++)
        var[r] += v[r];
    gmm_free(A);
    gmm_free(v);
    return s;
}

gmm_status gmm_mdl_predict(gmm_mdl *m, const double *xq, size_t nq, double *mean, double *var)
{
    gmm_status s;
    if (m->stack) {
        if (nq != m->nrow)
            return gmm_error(GMM_EDIM, "predict: %zu outputs for %zu data rows", nq, m->nrow);
        if ((s = gmm_mdl_impl_predict_rows(m, mean, var)) != GMM_OK)
            return s;
        return gmm_mdl_impl_coef_var(m, m->X, nq, var);
    }
    if (gmm_mdl_impl_rows(m) && !gmm_problem_offset_constant(m->prob, m->obj->value, NULL) &&
        (gmm_latent_has_inputs(m->lat) ? xq == m->x : 1) && nq == m->nrow) {
        /* at the data rows themselves the covariates are known */
        return gmm_mdl_impl_predict_rows(m, mean, var);
    } else if (gmm_latent_has_inputs(m->lat)) {
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

int gmm_mdl_site_find(const gmm_mdl *m, const char *label, size_t *v)
{
    return !gmm_mdl_impl_rows(m) && gmm_graph_node_find(m->g, label, v);
}

const char *gmm_mdl_data_exposure_name(const gmm_mdl *m) { return m->ename; }
const char *gmm_mdl_data_y_name(const gmm_mdl *m) { return m->yname; }
const char *gmm_mdl_data_site_name(const gmm_mdl *m)
{
    return gmm_latent_has_inputs(m->lat) ? m->xname : m->stack ? "row" : m->nodename;
}

const char *gmm_mdl_site_label(const gmm_mdl *m, size_t v, char *buf)
{
    if (gmm_latent_has_inputs(m->lat)) {
        snprintf(buf, 64, "%.17g", m->x[v]);
        return buf;
    }
    if (m->stack) { /* the data row, counted from 1 */
        snprintf(buf, 64, "%zu", v + 1);
        return buf;
    }
    /* a data row of a graph model with covariates: its node */
    return gmm_graph_node_label(m->g, gmm_mdl_impl_rows(m) ? m->row_node[v] : v, buf);
}

const char *gmm_mdl_site_column(const gmm_mdl *m)
{
    return gmm_latent_has_inputs(m->lat) ? "x" : m->stack ? "row" : "node";
}

int gmm_mdl_observed_normal(const gmm_mdl *m) { return m->lik.type->conjugate; }

const char *gmm_mdl_likelihood_name(const gmm_mdl *m) { return m->lik.type->name; }

int gmm_mdl_expect_closed_form(const gmm_mdl *m) { return m->lik.type->expect != NULL; }

const char *gmm_mdl_response_name(const gmm_mdl *m)
{
    return m->lik.type->resp;
}

gmm_status gmm_mdl_predict_summary(gmm_mdl *m, const double *xq, size_t nq, double level,
                                   int observed, gmm_summary_pred *pr)
{
    /* only the exact Gaussian path has normal new observations */
    if (observed && !gmm_mdl_observed_normal(m))
        return gmm_error(GMM_EINVAL, "predict: new observations of the %s likelihood have no "
                                     "normal interval",
                         m->lik.type->name);
    if (!xq && gmm_mdl_impl_rows(m)) {
        if (nq != m->nrow)
            return gmm_error(GMM_EDIM, "predict: %zu outputs for %zu data rows", nq, m->nrow);
        xq = m->x;
    }
    double *mean = gmm_malloc(nq ? nq : 1, sizeof *mean);
    double *var = gmm_malloc(nq ? nq : 1, sizeof *var);
    gmm_status s = mean && var ? GMM_OK : gmm_error(GMM_ENOMEM, "out of memory");
    if (s == GMM_OK)
        s = gmm_mdl_predict(m, xq, nq, mean, var);
    if (s == GMM_OK) {
        /* non-Gaussian: the mean outcome per unit exposure (rate) or the
         * probability too, its interval f's mapped through the inverse link */
        const gmm_lik *lik = gmm_mdl_likelihood(m);
        double noise = observed ? gmm_mdl_noise(m) : 0.0;
        for (size_t i = 0; i < nq && s == GMM_OK; i++)
            s = gmm_summary_pred_normal(lik, mean[i], var[i] + noise, level, &pr[i]);
    }
    gmm_free(mean);
    gmm_free(var);
    return s;
}


const double *gmm_mdl_data_x(const gmm_mdl *m, size_t *n)
{
    *n = m->nrow;
    return m->x;
}

int gmm_mdl_coef_std_errors(const gmm_mdl *m, double *se)
{
    size_t np = m->obj->nparam, nc = gmm_mdl_ncoef(m);
    int have = 0;
    for (size_t k = 0; k < np; k++) {
        if (k < np - nc)
            se[k] = NAN;
        have = have || isfinite(se[k]);
    }
    return have;
}
