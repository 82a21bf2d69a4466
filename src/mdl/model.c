/* model.c -- building a whole model from its description (model.h): one
 * latent model (latent.h) and one likelihood (likelihood.h) joined with the
 * data in a gmm_problem (problem.h).  Only construction knows the two
 * latent families apart.
 *
 * THE DESCRIPTION.  gmm_mdl_spec, with its gmm_model_desc, does not depend
 * on the command line: a program fills it from its options, or from a
 * model file through spec.values (its centre, intercept and parameter
 * values; the paths and spec strings come from the desc fields).
 * gmm_mdl_describe gives the model back as a model file: gmm_model
 * (modelfile.h) is that file's contents, gmm_mdl the model built and ready
 * to evaluate.  A build fails early: the specs are parsed before any data
 * is read; then come the data (and the edge list), the likelihood's check
 * of every observed row, the centring of Gaussian data, the kernel's and
 * likelihood's defaults from the data, the latent, problem and objective,
 * the parameters held fixed and, with values, every parameter's value.
 *
 * WHAT A BUILD SAYS.  Nothing here prints: what a user may want to know
 * while a model is built (the data read, warnings, defaults, sizes) goes to
 * the spec's report callback; failures are gmm_status with gmm_error's
 * message, and for those the caller words differently (a spec error with a
 * caret, an inconsistent description) a gmm_mdl_failure says which
 * (model_build_msg.c). */
#include "model_build.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/problem.h"
#include "gmm/ssm.h"
#include "gmm/stack.h"

void gmm_mdl_spec_init(gmm_mdl_spec *s)
{
    memset(s, 0, sizeof *s);
    s->noise = NAN;
    s->intercept = NAN;
}

int gmm_mdl_desc_names_no_latent(const gmm_model_desc *d)
{
    return !d->kernel && !d->graph && !d->formula;
}

void gmm_mdl_failure_free(gmm_mdl_failure *fail)
{
    if (!fail)
        return;
    gmm_free(fail->params);
    fail->params = NULL;
}

void gmm_mdl_free(gmm_mdl *m)
{
    if (!m)
        return;
    gmm_vi_free(m->vi);
    gmm_problem_free(m->prob);
    gmm_latent_free(m->lat);
    gmm_kernel_free(m->kernel);
    gmm_gmrf_free(m->gmrf);
    gmm_graph_free(m->g);
    gmm_spec_free(m->spec);
    gmm_free(m->row_node);
    gmm_free(m->x);
    gmm_free(m->y);
    gmm_free(m->e);
    gmm_free(m->line);
    gmm_free(m->data_file);
    gmm_free(m->data_rec);
    gmm_free(m->graph_rec);
    gmm_free(m->xname);
    gmm_free(m->yname);
    gmm_free(m->nodename);
    gmm_free(m->ename);
    gmm_free(m->wname);
    gmm_free(m->wt);
    gmm_free(m->spec_text);
    gmm_free(m->graph_file);
    gmm_free(m->model_path);
    gmm_free(m->model_rec);
    for (int i = 0; i < 3; i++)
        gmm_free(m->edge_cols[i]);
    gmm_free(m->formula);
    gmm_free(m->formula_rec);
    gmm_formula_free(m->fm);
    for (size_t k = 0; k < m->nterm; k++) {
        gmm_gmrf_free(m->sgmrf[k]);
        if (m->skern)
            gmm_kernel_free(m->skern[k]);
        gmm_spec_free(m->sspec[k]);
        gmm_graph_free(m->sg[k]);
        if (m->scorr)
            gmm_mdl_impl_corr_free(&m->scorr[k]);
    }
    gmm_free(m->scorr);
    gmm_free(m->sg);
    gmm_free(m->sspec);
    gmm_free(m->sgmrf);
    gmm_free(m->skern);
    for (size_t r = 0; m->rowkey && r < m->nrow; r++)
        gmm_free(m->rowkey[r]);
    gmm_free(m->rowkey);
    gmm_free(m->X);
    gmm_free(m->coef_name);
    gmm_free(m->coef_label);
    gmm_free(m->aliased);
    gmm_free(m->desc_value);
    gmm_mdl_impl_levels_free(m);
    gmm_free(m);
}

/* Count the observed y and, for a Gaussian likelihood, centre them in
 * place: by `fixed` when given (a model file's centre, so other data stay
 * on the fitted model's scale), else by their mean; no_center leaves them.
 * Counts and binary outcomes are never centred (their intercept plays that
 * part). */
static void center_y(gmm_mdl *m, int no_center, const double *fixed)
{
    double sum = 0.0;
    size_t nobs = 0;
    for (size_t r = 0; r < m->nrow; r++)
        if (!isnan(m->y[r])) {
            sum += m->y[r];
            nobs++;
        }
    m->nobs = nobs;
    if (no_center || !m->lik.type->conjugate) {
        m->has_center = 0;
        m->center = 0.0;
        return;
    }
    m->has_center = fixed != NULL || nobs > 0;
    m->center = fixed ? *fixed : nobs > 0 ? sum / (double)nobs : 0.0;
    if (m->has_center)
        for (size_t r = 0; r < m->nrow; r++)
            m->y[r] -= m->center;
}

/* The likelihood spec (NULL: gaussian) into m->lik. */
static gmm_status parse_likelihood(const mdl_build *b, gmm_mdl *m, const char *text)
{
    gmm_status s = gmm_lik_parse(text ? text : "gaussian", &m->lik);
    if (s == GMM_EPARSE && text)
        return gmm_mdl_impl_spec_error(b, "likelihood", text, s);
    return s;
}

/* ---- data ----------------------------------------------------------------------- */

/* The prior weights' column m->wname into m->wt (after y): finite and >= 0
 * where y is observed; a row to predict may have none (1). */
static gmm_status load_weights(gmm_mdl *m, const gmm_table *t)
{
    size_t cw = 0;
    gmm_status s;
    if ((s = gmm_table_column(t, m->wname, &cw)) != GMM_OK)
        return s;
    if (!(m->wt = gmm_malloc(t->nrow ? t->nrow : 1, sizeof *m->wt)))
        return gmm_error(GMM_ENOMEM, "out of memory for the data");
    if ((s = gmm_table_column_double(t, cw, 1, m->wt)) != GMM_OK)
        return s;
    for (size_t r = 0; r < t->nrow; r++)
        if (isnan(m->wt[r]) && !isnan(m->y[r]))
            return gmm_error_at(GMM_EPARSE, r,
                                "%s:%zu: column '%s': missing weight for an observed outcome",
                                t->file, t->line[r], m->wname);
        else if (isnan(m->wt[r]))
            m->wt[r] = 1.0; /* a row to predict */
        else if (!isfinite(m->wt[r]) || m->wt[r] < 0.0)
            return gmm_error_at(GMM_EPARSE, r,
                                "%s:%zu: column '%s': weight %g is not finite and >= 0",
                                t->file, t->line[r], m->wname, m->wt[r]);
    return GMM_OK;
}

/* The data table's columns: x (state-space) or node (graph, attached later),
 * y, and the exposure when named; every row's source line. */
static gmm_status load_data(const mdl_build *b, gmm_mdl *m, gmm_table *t, const char *xcol,
                            const char *ycol)
{
    gmm_status s;
    size_t cx = 0, cy = 1, ce = 0;
    if (!(m->graph || m->stack)) {
        if (t->ncol < 2 && (!xcol || !ycol))
            return gmm_error(GMM_EPARSE, "%s: need two columns (x and y), found %zu", t->file,
                             t->ncol);
        if ((s = xcol ? gmm_table_column(t, xcol, &cx) : GMM_OK) != GMM_OK)
            return s;
    }
    if ((s = ycol ? gmm_table_column(t, ycol, &cy) : GMM_OK) != GMM_OK)
        return s;
    if (m->ename && (s = gmm_table_column(t, m->ename, &ce)) != GMM_OK)
        return s;
    if (t->nrow == 0 && !(m->graph || m->stack))
        return gmm_error(GMM_EPARSE, "%s: no data rows", t->file);
    size_t nr = t->nrow ? t->nrow : 1;
    m->nrow = t->nrow;
    m->x = gmm_malloc(nr, sizeof(double));
    m->y = gmm_malloc(nr, sizeof(double));
    m->line = gmm_malloc(nr, sizeof(size_t));
    if (m->ename)
        m->e = gmm_malloc(nr, sizeof(double));
    gmm_free(m->yname);
    m->yname = gmm_strdup(t->header[cy]);
    if (!(m->graph || m->stack)) {
        gmm_free(m->xname);
        m->xname = gmm_strdup(t->header[cx]);
    }
    if (!m->x || !m->y || !m->line || (m->ename && !m->e) || !m->yname ||
        (!(m->graph || m->stack) && !m->xname))
        return gmm_error(GMM_ENOMEM, "out of memory for the data");
    memcpy(m->line, t->line, t->nrow * sizeof(size_t));
    if ((!(m->graph || m->stack) && (s = gmm_table_column_double(t, cx, 0, m->x)) != GMM_OK) ||
        (s = gmm_table_column_double(t, cy, 1, m->y)) != GMM_OK)
        return s;
    if (!(m->graph || m->stack)) {
        /* x = 1e16 + year: distinct inputs that are one double would merge
         * rows into one state without a word */
        size_t cnt = 0, ra = 0, rb = 0;
        if ((s = gmm_table_column_collisions(t, cx, m->x, &cnt, &ra, &rb)) != GMM_OK)
            return s;
        if (cnt)
            gmm_mdl_impl_report(b, GMM_MDL_REPORT_WARNING,
                   "warning: %s: %zu distinct value(s) of column '%s' read as the same "
                   "number as another (e.g. lines %zu and %zu): those rows become one "
                   "input; rescale or shift the column",
                   t->file, cnt, t->header[cx], t->line[ra], t->line[rb]);
    }
    if (m->wname && (s = load_weights(m, t)) != GMM_OK)
        return s;
    if (m->e) {
        /* an exposure (trials) may be missing only where y is */
        if ((s = gmm_table_column_double(t, ce, 1, m->e)) != GMM_OK)
            return s;
        for (size_t r = 0; r < t->nrow; r++)
            if (isnan(m->e[r]) && !isnan(m->y[r]))
                return gmm_error_at(GMM_EPARSE, r,
                                    "%s:%zu: column '%s': missing %s for an observed outcome",
                                    t->file, t->line[r], m->ename, m->lik.type->rowq);
            else if (isnan(m->e[r]))
                m->e[r] = 1.0;
    }
    return GMM_OK;
}

/* "read N rows: O observed, M missing", and the rows dropped for a missing
 * value when there are any. */
static void report_rows(const mdl_build *b, const gmm_mdl *m)
{
    if (m->ndropped)
        gmm_mdl_impl_report(b, GMM_MDL_REPORT_DATA,
                            "read %zu rows: %zu observed, %zu missing; %zu more dropped for a "
                            "missing value in a column the model uses",
                            m->nrow + m->ndropped, m->nobs, m->nrow - m->nobs, m->ndropped);
    else
        gmm_mdl_impl_report(b, GMM_MDL_REPORT_DATA, "read %zu rows: %zu observed, %zu missing",
                            m->nrow, m->nobs, m->nrow - m->nobs);
}

/* ---- entry point ----------------------------------------------------------------- */

static gmm_status build_model(const mdl_build *b, gmm_mdl *m)
{
    const gmm_mdl_spec *o = b->s;
    const gmm_model *mf = o->values;
    const char *mp = o->values_name ? o->values_name : "<stdin>";
    gmm_status s;
    gmm_table *data = NULL;
    /* specs first: a spec error is reported before any data is read */
    if ((s = parse_likelihood(b, m, o->desc.likelihood)) != GMM_OK ||
        (s = gmm_mdl_impl_check_spec(b, &m->lik)) != GMM_OK)
        return s;
    m->graph = o->desc.graph != NULL || b->edgeless;
    if (!o->desc.data.file || (!m->stack && !(m->graph ? o->desc.precision : o->desc.kernel)))
        return gmm_error(GMM_EINVAL, "model: no data file, or no %s spec",
                         m->graph ? "precision" : "kernel");
    m->data_file = gmm_strdup(o->desc.data.file);
    m->data_rec = gmm_mdl_impl_record_path(o->desc.data.file);
    m->graph_file = gmm_strdup(o->desc.graph);
    m->graph_rec = gmm_mdl_impl_record_path(o->desc.graph);
    m->spec_text = gmm_strdup(m->stack ? "" : m->graph ? o->desc.precision : o->desc.kernel);
    const char *qcol = o->desc.data.exposure ? o->desc.data.exposure : o->desc.data.trials;
    m->ename = gmm_strdup(qcol);
    m->wname = gmm_strdup(o->desc.data.weights);
    m->nodename = gmm_strdup(o->desc.data.node);
    if (o->model_path) {
        m->model_path = gmm_strdup(o->model_path);
        m->model_rec = gmm_mdl_impl_record_path(o->model_path);
    }
    const char *defaults[3] = {"i", "j", "length"};
    m->len_optional = !o->desc.edge_cols[0] || mf;
    for (int k = 0; k < 3; k++) {
        const char *c = o->desc.edge_cols[0] ? o->desc.edge_cols[k] : defaults[k];
        if (m->graph && c && !(m->edge_cols[k] = gmm_strdup(c)))
            return gmm_error(GMM_ENOMEM, "out of memory");
    }
    if (!m->data_file || !m->data_rec || (o->desc.graph && (!m->graph_rec || !m->graph_file)) ||
        !m->spec_text || (qcol && !m->ename) || (o->desc.data.weights && !m->wname) || (o->desc.data.node && !m->nodename) ||
        (o->model_path && (!m->model_path || !m->model_rec)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    if (!mf && !m->stack) {
        gmm_spec_node *probe = NULL;
        const char *key = m->graph ? "precision" : "kernel";
        const char *text = m->graph ? o->desc.precision : o->desc.kernel;
        if ((s = gmm_mdl_impl_parse_spec(b, key, text, &probe)) != GMM_OK)
            return s;
        if (!m->graph) {
            /* kernel names, keys and sizes too, before the data are read */
            gmm_kernel *kp = NULL;
            s = gmm_kernel_from_spec(probe, &kp);
            gmm_kernel_free(kp);
            if (s != GMM_OK) {
                gmm_spec_free(probe);
                return s == GMM_EPARSE ? gmm_mdl_impl_spec_error(b, key, text, s) : s;
            }
        }
        gmm_spec_free(probe);
    }
    if ((s = gmm_table_read(o->desc.data.file, &data)) != GMM_OK ||
        (s = gmm_mdl_impl_group_columns(m->fm, data)) != GMM_OK)
        goto done;
    if (!o->na_fail && (s = gmm_mdl_impl_omit_missing(m, &o->desc, data, &m->ndropped)) != GMM_OK)
        goto done;
    const char *xcol = m->graph || m->stack ? NULL : o->desc.data.x;
    if ((s = load_data(b, m, data, xcol, o->desc.data.y)) != GMM_OK)
        goto done;
    /* the coefficients: a formula's fixed terms and its intercept (for every
     * likelihood: the intercept a formula names is estimated), else the
     * intercept of a non-Gaussian likelihood (Gaussian data without a
     * formula are centred instead) */
    double b_file = NAN;
    int file_b = mf && gmm_mdl_impl_model_value(mf, "intercept", &b_file);
    int gauss = m->lik.type->conjugate, want_b;
    if (m->fm && mf) /* the file says: its intercept, or a Gaussian's centre before */
        want_b = m->fm->intercept && (file_b || (gauss && mf->has_center));
    else if (m->fm)
        want_b = m->fm->intercept && !o->no_intercept;
    else
        want_b = mf ? file_b : !gauss && !o->no_intercept;
    if (mf && gauss && file_b && !m->fm) {
        s = gmm_error(GMM_EPARSE, "%s: an \"intercept\" parameter with the Gaussian likelihood",
                      mp);
        goto done;
    }
    static const gmm_formula no_terms;
    size_t fpos;
    if ((s = gmm_mdl_impl_design(m, data, m->fm ? m->fm : &no_terms, want_b, &fpos)) != GMM_OK) {
        /* a column or value at fault inside an expression: the caret under it */
        if (fpos != SIZE_MAX && m->fm) {
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            s = gmm_mdl_impl_formula_error(b, fpos, "%s", why);
        }
        goto done;
    }
    if (mf)
        center_y(m, !mf->has_center || m->fm, mf->has_center ? &mf->center : NULL);
    else
        center_y(m, o->no_center || m->ncoef > 0 || m->fm, NULL);
    if (m->stack) {
        if (!mf)
            report_rows(b, m);
        if ((s = gmm_mdl_impl_build_stack((mdl_build *)b, m, data)) != GMM_OK)
            goto done;
    } else if (m->graph) {
        /* the precision spec is checked against the graph first: its errors
         * come before the data report */
        if ((s = gmm_mdl_impl_build_graph(b, m, data, o->strict_nodes)) != GMM_OK)
            goto done;
        if (!mf)
            report_rows(b, m);
    } else {
        if (!mf)
            report_rows(b, m);
        if ((s = gmm_mdl_impl_build_ssm(b, m)) != GMM_OK)
            goto done;
    }
    if (mf) {
        /* a start for the problem only: the file's values replace it */
        for (size_t k = 0; k < m->lik.type->nparam; k++)
            m->lik.par[k] = 1.0;
        if ((s = gmm_mdl_impl_build_problem(b, m, NAN, file_b ? b_file : 0.0, 0)) != GMM_OK ||
            (s = gmm_mdl_impl_take_values(b, m, mf, mp)) != GMM_OK)
            goto done;
    } else if ((s = gmm_mdl_impl_build_problem(b, m, o->noise, o->intercept, o->verbose)) !=
               GMM_OK) {
        goto done;
    }
    if ((s = gmm_mdl_impl_term_values(b, m, mf != NULL)) != GMM_OK)
        goto done;
    /* the default kernel's period is a unit (x in years), not estimated */
    if (b->default_kernel && !o->free_period &&
        (s = gmm_mdl_impl_fix_param(b, m, GMM_MDL_DEFAULT_KERNEL_FIXED)) != GMM_OK)
        goto done;
    for (size_t f = 0; f < o->nfix; f++)
        if ((s = gmm_mdl_impl_fix_param(b, m, o->fix[f])) != GMM_OK)
            goto done;
    if (m->ncoef && (s = gmm_mdl_impl_coef_basis(b, m, mf != NULL)) != GMM_OK)
        goto done;
done:
    gmm_table_free(data);
    return s;
}

gmm_status gmm_mdl_build(const gmm_mdl_spec *s, gmm_mdl **out, gmm_mdl_failure *fail)
{
    gmm_mdl_failure scratch;
    if (!fail)
        fail = &scratch;
    memset(fail, 0, sizeof *fail);
    *out = NULL;
    gmm_mdl *m = gmm_calloc(1, sizeof *m);
    if (!m)
        return gmm_error(GMM_ENOMEM, "out of memory");
    mdl_build b = {s, fail, NULL, NULL, 0, 0, 0};
    gmm_mdl_spec d;
    gmm_status st = GMM_OK;
    if (s->desc.formula && (st = gmm_mdl_impl_apply_formula(&b, m, &d)) == GMM_OK) {
        b.s = &d;
    } else if (!s->values && gmm_mdl_desc_names_no_latent(&s->desc)) {
        d = *s;
        d.desc.kernel = GMM_MDL_DEFAULT_KERNEL;
        b.s = &d;
        b.default_kernel = 1;
    }
    if (st == GMM_OK)
        st = build_model(&b, m);
    if (fail == &scratch)
        gmm_mdl_failure_free(fail);
    if (st != GMM_OK) {
        gmm_mdl_free(m);
        return st;
    }
    *out = m;
    return GMM_OK;
}

gmm_status gmm_mdl_fit_check(const gmm_mdl *m)
{
    size_t nobs = 0;
    for (size_t r = 0; r < m->nrow; r++)
        nobs += !isnan(m->y[r]);
    if (nobs == 0)
        return gmm_error(GMM_EINVAL, "%s: no observed y: nothing to fit", m->data_file);
    if (nobs == 1)
        return gmm_error(GMM_EINVAL,
                         "%s: only one observed y: a fit needs at least two (loglik and predict "
                         "work with one)",
                         m->data_file);
    /* the likelihood's own test, on the data's scale (before centring) */
    double *y = gmm_malloc(m->nrow, sizeof *y);
    if (!y)
        return gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t r = 0; r < m->nrow; r++)
        y[r] = m->y[r] + m->center;
    gmm_status s = gmm_lik_check_fit_data(&m->lik, y, m->e, m->nrow, m->yname);
    gmm_free(y);
    if (s == GMM_EINVAL) {
        char why[GMM_ERROR_MAX];
        snprintf(why, sizeof why, "%s", gmm_error_message());
        s = gmm_error(GMM_EINVAL, "%s: %s", m->data_file, why);
    }
    return s;
}
