/* model.c -- building a whole model from its description (model.h): one
 * latent model (latent.h) and one likelihood (likelihood.h) joined with the
 * data in a gmm_problem (problem.h).  Only construction knows the two
 * latent families apart. */
/* realpath (XSI) */
#define _XOPEN_SOURCE 700

#include "model_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
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
    }
    gmm_free(m->sg);
    gmm_free(m->sspec);
    gmm_free(m->sgmrf);
    gmm_free(m->skern);
    for (size_t r = 0; m->rowkey && r < m->nrow; r++)
        gmm_free(m->rowkey[r]);
    gmm_free(m->rowkey);
    gmm_free(m->X);
    gmm_free(m->coef_name);
    gmm_free(m->aliased);
    gmm_free(m->desc_value);
    gmm_mdl_impl_levels_free(m);
    gmm_free(m);
}

/* What one build works with: the description, where a failure is told. */
typedef struct {
    const gmm_mdl_spec *s;
    gmm_mdl_failure *fail;
    /* a formula's f() spec: its text within the formula, which errors in
     * it point into (ftext NULL: no formula) */
    const char *ftext, *fspec;
    size_t fbase;
    int edgeless;     /* f(NAME, iid): a graph of the levels alone */
    int default_kernel; /* the description named no latent: GMM_MDL_DEFAULT_KERNEL */
} build;

static void report(const build *b, gmm_mdl_report kind, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void report(const build *b, gmm_mdl_report kind, const char *fmt, ...)
{
    if (!b->s->report)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    b->s->report(b->s->report_user, kind, buf);
}

/* A contradictory description, rule r broken: GMM_EINVAL with usage set. */
static gmm_status usage_error(const build *b, gmm_mdl_rule r, const char *msg)
{
    b->fail->usage = 1;
    b->fail->rule = r;
    return gmm_error(GMM_EINVAL, "%s", msg);
}

/* A spec error under KEY, at the library's error index: status s. */
static gmm_status spec_error(const build *b, const char *key, const char *text, gmm_status s)
{
    size_t pos = gmm_error_index();
    if (b->ftext && text == b->fspec) {
        key = "formula";
        text = b->ftext;
        pos += b->fbase;
    }
    b->fail->spec_key = key;
    b->fail->spec_text = text;
    b->fail->spec_pos = pos;
    return s;
}

static gmm_status formula_error(const build *b, size_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A formula error at offset pos of the formula: GMM_EPARSE. */
static gmm_status formula_error(const build *b, size_t pos, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    gmm_error_at(GMM_EPARSE, pos, "%s", buf);
    b->fail->spec_key = "formula";
    b->fail->spec_text = b->s->desc.formula;
    b->fail->spec_pos = pos;
    return GMM_EPARSE;
}

/* -1, or the index of term t's model among the keyword models
 * (model_names.c: iid and the intrinsic ones, the stacked models) */
static int stack_model(const gmm_formula_latent *t) { return gmm_mdl_impl_term_model(t); }
static gmm_stack_model stack_kind(int k) { return gmm_mdl_impl_term_kind(k); }

int gmm_mdl_impl_stack_kind(const gmm_formula_latent *t)
{
    int k = stack_model(t);
    return k < 0 ? -1 : (int)stack_kind(k);
}

/* A MODEL that is a name but no model's: the error lists them all. */
static gmm_status check_model_name(const build *b, const gmm_formula_latent *t)
{
    char msg[GMM_ERROR_MAX];
    if (!gmm_mdl_impl_model_unknown(t, msg, sizeof msg))
        return GMM_OK;
    return formula_error(b, t->model_pos, "%s", msg);
}

/* Several f() terms, or one intrinsic one: a stacked latent (one iid term
 * alone stays the edgeless graph precision, as before). */
static int is_stack(const gmm_formula *fm)
{
    if (fm->nlatent > 1)
        return 1;
    int k = stack_model(&fm->latent[0]);
    return k > 0;
}

/* Key g of term t is a parameter of its keyword model (model_names.c):
 * nonzero, *unit set for one in (0, 1). */
static int term_param(const gmm_formula_latent *t, const gmm_formula_arg *g, int *unit)
{
    int mk = stack_model(t);
    const char *p;
    for (size_t i = 0; mk >= 0 && (p = gmm_mdl_impl_term_param(mk, i, unit)); i++)
        if (!strcmp(p, g->key))
            return 1;
    return 0;
}

/* A parameter's start value KEY=VALUE of term t: a number in its domain
 * (variance > 0, phi in (0, 1)), into *v. */
static gmm_status term_start(const build *b, const gmm_formula_latent *t,
                             const gmm_formula_arg *g, int unit, double *v)
{
    char *end;
    *v = strtod(g->value, &end);
    if (end == g->value || *end || !isfinite(*v))
        return formula_error(b, g->vpos, "formula: f(%s, %s): %s must be a number, not '%s'",
                             t->name, t->model, g->key, g->value);
    if (unit ? !(*v > 0.0 && *v < 1.0) : !(*v > 0.0))
        return formula_error(b, g->vpos, "formula: f(%s, %s): %s = %s is not %s", t->name,
                             t->model, g->key, g->value, unit ? "in (0, 1)" : "> 0");
    return GMM_OK;
}

/* f()'s keys: graph=EDGES.csv; a keyword model's parameters, variance=V
 * and on bym2 phi=P, their start values (each may be followed by 'fixed');
 * cyclic (a flag, or =true/false) and period=P (needs cyclic) on rw1 and
 * rw2 only. */
static gmm_status check_keys(const build *b, const gmm_formula_latent *t)
{
    int mk = stack_model(t), unit;
    int walk = mk >= 0 && (stack_kind(mk) == GMM_STACK_RW1 || stack_kind(mk) == GMM_STACK_RW2);
    for (size_t a = 0; a < t->narg; a++) {
        const gmm_formula_arg *g = &t->arg[a];
        int cyc = !strcmp(g->key, "cyclic"), per = !strcmp(g->key, "period");
        int par = term_param(t, g, &unit);
        int other = !cyc && !per && !par && strcmp(g->key, "graph");
        if (other && mk < 0)
            return formula_error(b, g->pos,
                                 "formula: f(%s, '%s'): a spec's parameters take their start "
                                 "values in the spec (KIND(%s=...)) and are held fixed by "
                                 "name, f.%s.KIND.%s",
                                 t->name, t->model, g->key, t->name, g->key);
        if (other && (!strcmp(g->key, "variance") || !strcmp(g->key, "phi")))
            return formula_error(b, g->pos, "formula: f(%s, %s) has no parameter '%s' (phi is "
                                            "bym2's mixing weight)",
                                 t->name, t->model, g->key);
        if (other)
            return formula_error(b, g->pos,
                                 "formula: f() has no key '%s' (keys: graph; variance, and phi "
                                 "on bym2; on rw1 and rw2: cyclic, period)",
                                 g->key);
        if ((cyc || per) && !walk)
            return formula_error(b, g->pos,
                                 "formula: f(%s, %s): '%s' applies to rw1 and rw2 only (a "
                                 "seasonal kernel: 'periodic(period=P)')",
                                 t->name, t->model, g->key);
        if (!cyc && g->flag)
            return formula_error(b, g->pos, "formula: key '%s' needs a value (%s=...)", g->key,
                                 g->key);
        if (g->fixed && !par)
            return formula_error(b, g->fixed_pos, "formula: f(%s, %s): 'fixed' holds a "
                                                  "parameter at its start value (variance=1 "
                                                  "fixed); '%s' is not a parameter",
                                 t->name, t->model, g->key);
        double v;
        gmm_status s;
        if (par && (s = term_start(b, t, g, unit, &v)) != GMM_OK)
            return s;
    }
    return GMM_OK;
}

/* The start values of the keyword terms' parameters (f.NAME.KEY from
 * KEY=VALUE; not over a model file's values) and those marked 'fixed'
 * held, on the objective. */
static gmm_status term_values(const build *b, gmm_mdl *m, int from_file)
{
    for (size_t k = 0; m->fm && k < m->fm->nlatent; k++) {
        const gmm_formula_latent *t = &m->fm->latent[k];
        for (size_t a = 0; a < t->narg; a++) {
            const gmm_formula_arg *g = &t->arg[a];
            int unit;
            double v;
            gmm_status s;
            if (!term_param(t, g, &unit))
                continue;
            if ((s = term_start(b, t, g, unit, &v)) != GMM_OK)
                return s;
            char name[160];
            size_t i;
            snprintf(name, sizeof name, "f.%s.%s", t->name, g->key);
            for (i = 0; i < m->obj->nparam && strcmp(m->obj->name[i], name); i++)
                ;
            if (i == m->obj->nparam)
                return gmm_error(GMM_EINVAL, "formula: the model has no parameter '%s'", name);
            if (!from_file)
                m->obj->value[i] = v;
            if (g->fixed)
                m->obj->fixed[i] = 1;
        }
    }
    return GMM_OK;
}

/* f(NAME, rw1|rw2, cyclic[=true|false], period=P): *cyclic, *period (0: the
 * default). */
static gmm_status term_cyclic(const build *b, const gmm_formula_latent *t, int *cyclic,
                              double *period)
{
    size_t pos = 0;
    const char *c = gmm_formula_arg_find(t, "cyclic", &pos);
    *cyclic = 0;
    *period = 0.0;
    if (c) {
        if (!*c || !strcmp(c, "true") || !strcmp(c, "TRUE") || !strcmp(c, "1"))
            *cyclic = 1;
        else if (strcmp(c, "false") && strcmp(c, "FALSE") && strcmp(c, "0"))
            return formula_error(b, pos, "formula: cyclic is a flag: cyclic, cyclic=true or "
                                         "cyclic=false");
    }
    const char *p = gmm_formula_arg_find(t, "period", &pos);
    if (!p)
        return GMM_OK;
    char *end;
    double v = strtod(p, &end);
    if (end == p || *end || !(v > 0.0) || !isfinite(v))
        return formula_error(b, pos, "formula: period must be a positive number, not '%s'", p);
    if (!*cyclic)
        return formula_error(b, pos, "formula: period applies to a cyclic walk (f(%s, %s, "
                                     "cyclic, period=%s))",
                             t->name, t->model, p);
    *period = v;
    return GMM_OK;
}

/* The terms of a stacked formula, before any data is read: known keys, a
 * graph where the model needs one, one term per column (a quoted model
 * without a graph is a kernel spec, read with the data). */
static gmm_status check_stack_terms(const build *b, const gmm_formula *fm)
{
    size_t nkern = 0;
    for (size_t k = 0; k < fm->nlatent; k++) {
        const gmm_formula_latent *t = &fm->latent[k];
        for (size_t j = 0; j < k; j++)
            if (!strcmp(fm->latent[j].name, t->name))
                return formula_error(b, t->pos,
                                     "formula: two f() terms on column '%s' would share their "
                                     "parameter names (f.%s.variance)",
                                     t->name, t->name);
        gmm_status s = check_model_name(b, t);
        if (s != GMM_OK || (s = check_keys(b, t)) != GMM_OK)
            return s;
        size_t gpos = 0;
        const char *graph = gmm_formula_arg_find(t, "graph", &gpos);
        int mk = stack_model(t);
        int needs_graph = mk >= 0 && (stack_kind(mk) == GMM_STACK_BESAG ||
                                      stack_kind(mk) == GMM_STACK_BYM2);
        if (needs_graph && !graph)
            return formula_error(b, t->model_pos, "formula: f(%s, %s) needs graph=EDGES.csv",
                                 t->name, t->model);
        if (!needs_graph && graph && mk >= 0)
            return formula_error(b, gpos, "formula: f(%s, %s) takes no graph", t->name,
                                 t->model);
        int cyclic;
        double period;
        if ((s = term_cyclic(b, t, &cyclic, &period)) != GMM_OK)
            return s;
        nkern += mk < 0 && !graph;
    }
    if (b->s->desc.merge_tol > 0 && nkern == 0)
        return usage_error(b, GMM_MDL_RULE_MERGE_TOL_NO_KERNEL,
                           "merge_tol applies to state-space models: a kernel, or kernel "
                           "terms f(NAME, 'KERNEL') of a formula");
    return GMM_OK;
}

static char *record_formula(const char *text, const gmm_formula *fm);

/* Parse s->desc.formula into m->fm and fill *d: s with the latent, its column
 * and the response from the formula (fields a model file gave are kept). */
static gmm_status apply_formula(build *b, gmm_mdl *m, gmm_mdl_spec *d)
{
    const gmm_mdl_spec *o = b->s;
    gmm_status s;
    *d = *o;
    if (!(m->formula = gmm_strdup(o->desc.formula)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    if ((s = gmm_formula_parse(o->desc.formula, &m->fm)) != GMM_OK)
        return s == GMM_EPARSE ? spec_error(b, "formula", o->desc.formula, s) : s;
    if (!(m->formula_rec = record_formula(o->desc.formula, m->fm)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    const gmm_model_desc *od = &o->desc;
    if (!o->values &&
        (od->kernel || od->precision || od->graph || od->data.x || od->data.y || od->data.node))
        return usage_error(b, GMM_MDL_RULE_FORMULA_REPLACES,
                           "a formula replaces the kernel, graph, precision, x, y and node");
    const gmm_formula *fm = m->fm;
    if (fm->nlatent == 0)
        return formula_error(b, strlen(o->desc.formula),
                             "formula: a model needs a latent term f(NAME, MODEL, ...)");
    if (is_stack(fm)) {
        /* the terms are read with the data (build_stack) */
        if ((s = check_stack_terms(b, fm)) != GMM_OK)
            return s;
        m->stack = 1;
        d->desc.data.y = o->desc.data.y ? o->desc.data.y : fm->response;
        d->desc.kernel = d->desc.precision = d->desc.graph = NULL;
        d->desc.data.x = d->desc.data.node = NULL;
        return GMM_OK;
    }
    const gmm_formula_latent *t = &fm->latent[0];
    if ((s = check_model_name(b, t)) != GMM_OK || (s = check_keys(b, t)) != GMM_OK)
        return s;
    size_t gpos = 0;
    const char *graph = gmm_formula_arg_find(t, "graph", &gpos);
    b->edgeless = !t->quoted && !strcmp(t->model, "iid");
    if (b->edgeless && graph)
        return formula_error(b, gpos, "formula: iid takes no graph (its levels are its nodes)");
    m->edgeless = b->edgeless;
    d->desc.data.y = o->desc.data.y ? o->desc.data.y : fm->response;
    if (b->edgeless) {
        d->desc.precision = o->desc.precision ? o->desc.precision : "iid";
        d->desc.data.node = o->desc.data.node ? o->desc.data.node : t->name;
    } else if (graph) {
        d->desc.precision = o->desc.precision ? o->desc.precision : t->model;
        d->desc.graph = o->desc.graph ? o->desc.graph : graph;
        d->desc.data.node = o->desc.data.node ? o->desc.data.node : t->name;
    } else {
        d->desc.kernel = o->desc.kernel ? o->desc.kernel : t->model;
        d->desc.data.x = o->desc.data.x ? o->desc.data.x : t->name;
    }
    if (!o->values) {
        b->ftext = o->desc.formula;
        b->fspec = t->model;
        b->fbase = t->model_pos;
    }
    return GMM_OK;
}

/* "  name\n" for each of m's parameters, into fail->params. */
static void list_params(const build *b, const gmm_mdl *m)
{
    size_t len = 1;
    for (size_t k = 0; k < m->obj->nparam; k++)
        len += strlen(m->obj->name[k]) + 3;
    char *p = gmm_malloc(len, 1);
    if (!p)
        return;
    size_t at = 0;
    for (size_t k = 0; k < m->obj->nparam; k++)
        at += (size_t)sprintf(p + at, "  %s\n", m->obj->name[k]);
    p[at] = '\0';
    b->fail->params = p;
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

static gmm_status parse_spec(const build *b, const char *key, const char *text,
                             gmm_spec_node **out)
{
    gmm_status s = gmm_spec_parse(text, out);
    return s != GMM_OK ? spec_error(b, key, text, s) : GMM_OK;
}

/* The likelihood spec (NULL: gaussian) into m->lik. */
static gmm_status parse_likelihood(const build *b, gmm_mdl *m, const char *text)
{
    gmm_status s = gmm_lik_parse(text ? text : "gaussian", &m->lik);
    if (s == GMM_EPARSE && text)
        return spec_error(b, "likelihood", text, s);
    return s;
}

/* Hold the parameter `name` fixed. */
static gmm_status fix_param(const build *b, gmm_mdl *m, const char *fix)
{
    /* "noise.variance": the Gaussian variance's name before 0.2 */
    const char *name =
        !strcmp(fix, "noise.variance") && m->lik.type->conjugate ? "likelihood.variance" : fix;
    for (size_t i = 0; i < m->obj->nparam; i++)
        if (!strcmp(m->obj->name[i], name)) {
            m->obj->fixed[i] = 1;
            return GMM_OK;
        }
    b->fail->fix = 1;
    b->fail->usage = 1;
    list_params(b, m);
    return gmm_error(GMM_EINVAL, "no parameter '%s'; the parameters are:", fix);
}

/* The path a model file records for an input: absolute, so the model works
 * from any directory and wherever it is moved ("-" stays "-"). */
static char *record_path(const char *path)
{
    if (!path || !strcmp(path, "-"))
        return gmm_strdup(path);
    char *abs = realpath(path, NULL); /* malloc'ed by libc */
    char *r = gmm_strdup(abs ? abs : path);
    free(abs);
    return r;
}

/* One graph=PATH of a formula, and what a model file records instead. */
typedef struct {
    size_t at, len; /* the value's span in the text (inside any quotes) */
    char *rec;      /* record_path's, quoted when it must be (NULL: keep) */
} graph_arg;

/* rec as the value of a graph= key written at text[at] (quoted there when
 * the character before is a quote): as it is inside the same quotes or
 * unquoted when the parser reads it back whole, else in quotes of the
 * other kind; NULL (keep the text as written) when no quoting can hold it.
 * Takes rec. */
static char *quote_value(const char *text, size_t at, char *rec)
{
    char q = at > 0 && (text[at - 1] == '\'' || text[at - 1] == '"') ? text[at - 1] : 0;
    size_t n = strlen(rec);
    if (q ? !strchr(rec, q)
          : n && !rec[strcspn(rec, ",)'\"")] && !isspace((unsigned char)rec[0]) &&
                !isspace((unsigned char)rec[n - 1]))
        return rec;
    char w = strchr(rec, '\'') ? '"' : '\'';
    char *out = q || strchr(rec, w) ? NULL : gmm_malloc(n + 3, 1);
    if (out)
        sprintf(out, "%c%s%c", w, rec, w);
    gmm_free(rec);
    return out;
}

/* The formula text as a model file records it: each graph=PATH's PATH
 * resolved as record_path resolves the data file (absolute), so that the
 * model works from any directory.  Allocated; NULL when out of memory. */
static char *record_formula(const char *text, const gmm_formula *fm)
{
    size_t ng = 0, len = strlen(text), k = 0;
    for (size_t t = 0; t < fm->nlatent; t++)
        for (size_t a = 0; a < fm->latent[t].narg; a++)
            ng += !strcmp(fm->latent[t].arg[a].key, "graph") && !fm->latent[t].arg[a].flag;
    graph_arg *g = gmm_calloc(ng ? ng : 1, sizeof *g);
    char *out = NULL;
    if (!g)
        return NULL;
    for (size_t t = 0; t < fm->nlatent; t++)
        for (size_t a = 0; a < fm->latent[t].narg; a++) {
            const gmm_formula_arg *r = &fm->latent[t].arg[a];
            if (strcmp(r->key, "graph") || r->flag)
                continue;
            char *rec = record_path(r->value);
            if (!rec)
                goto done;
            g[k] = (graph_arg){r->vpos, strlen(r->value), quote_value(text, r->vpos, rec)};
            len += g[k].rec ? strlen(g[k].rec) : 0;
            k++;
        }
    /* the terms are in text order, and so their keys */
    if (!(out = gmm_malloc(len + 1, 1)))
        goto done;
    size_t from = 0, at = 0;
    for (k = 0; k < ng; k++) {
        if (!g[k].rec)
            continue;
        memcpy(out + at, text + from, g[k].at - from);
        at += g[k].at - from;
        memcpy(out + at, g[k].rec, strlen(g[k].rec));
        at += strlen(g[k].rec);
        from = g[k].at + g[k].len;
    }
    strcpy(out + at, text + from);
done:
    for (k = 0; k < ng; k++)
        gmm_free(g[k].rec);
    gmm_free(g);
    return out;
}

/* ---- data ----------------------------------------------------------------------- */

/* The data table's columns: x (state-space) or node (graph, attached later),
 * y, and the exposure when named; every row's source line. */
static gmm_status load_data(const build *b, gmm_mdl *m, gmm_table *t, const char *xcol,
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
            report(b, GMM_MDL_REPORT_WARNING,
                   "warning: %s: %zu distinct value(s) of column '%s' read as the same "
                   "number as another (e.g. lines %zu and %zu): those rows become one "
                   "input; rescale or shift the column",
                   t->file, cnt, t->header[cx], t->line[ra], t->line[rb]);
    }
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

/* The outcomes against the likelihood, naming file, line and column. */
static gmm_status check_outcomes(gmm_mdl *m)
{
    gmm_status s = gmm_lik_check_data(&m->lik, m->y, m->e, m->nrow);
    if (s == GMM_OK)
        return GMM_OK;
    size_t r = gmm_error_index();
    if (r == GMM_NO_INDEX || r >= m->nrow)
        return s;
    char why[GMM_ERROR_MAX];
    snprintf(why, sizeof why, "%s", gmm_error_message());
    /* which column is at fault: the row's own check says */
    int fault = 0;
    gmm_lik_check_row(&m->lik, m->y[r], m->e ? m->e + r : NULL, &fault);
    const char *col = fault == 1 && m->ename ? m->ename : m->yname;
    return gmm_error_at(s, r, "%s:%zu: column '%s': %s", m->data_file, m->line[r], col, why);
}

/* ---- state-space models ---------------------------------------------------- */

/* A working response on the latent's scale for the kernel's default
 * variance (the likelihood's own, gmm_lik_working). */
static double *working_response(const gmm_mdl *m)
{
    double *z = gmm_malloc(m->nrow, sizeof *z);
    if (!z)
        return NULL;
    for (size_t r = 0; r < m->nrow; r++)
        z[r] = gmm_lik_working(&m->lik, m->y[r], m->e ? m->e[r] : 1.0);
    return z;
}

static gmm_status build_ssm(const build *b, gmm_mdl *m)
{
    const gmm_mdl_spec *sp = b->s;
    gmm_status s;
    if ((s = parse_spec(b, "kernel", b->s->desc.kernel, &m->spec)) != GMM_OK)
        return s;
    if ((s = gmm_kernel_from_spec(m->spec, &m->kernel)) != GMM_OK)
        return s == GMM_EPARSE ? spec_error(b, "kernel", b->s->desc.kernel, s) : s;
    size_t np = gmm_kernel_nparam(m->kernel);
    int *defaulted = gmm_calloc(np ? np : 1, sizeof(int));
    double *z = working_response(m);
    if (!defaulted || !z) {
        gmm_free(defaulted);
        gmm_free(z);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    s = gmm_kernel_fill_defaults(m->kernel, m->x, z, m->nrow, defaulted);
    gmm_free(z);
    if (s != GMM_OK) {
        gmm_free(defaulted);
        return s;
    }
    if (sp->verbose)
        for (size_t i = 0; i < np; i++)
            if (defaulted[i])
                report(b, GMM_MDL_REPORT_INFO, "default %s = %.6g",
                       gmm_kernel_param_name(m->kernel, i), gmm_kernel_values(m->kernel)[i]);
    gmm_free(defaulted);

    gmm_ssm_params par;
    gmm_ssm_params_init(&par);
    par.merge_tol = m->merge_tol = sp->desc.merge_tol;
    par.factor = (gmm_ssm_factor)sp->factor;
    if ((s = gmm_latent_ssm_alloc(m->kernel, m->x, m->nrow, &par, &m->lat)) != GMM_OK)
        return s;
    const gmm_ssm *ssm = gmm_latent_ssm(m->lat);
    if (gmm_ssm_nmerged(ssm) > 0)
        report(b, GMM_MDL_REPORT_WARNING,
               "warning: %zu distinct inputs within merge_tol %g of another were merged "
               "into one state",
               gmm_ssm_nmerged(ssm), sp->desc.merge_tol);
    if (sp->verbose)
        report(b, GMM_MDL_REPORT_INFO,
               "state dimension %zu, %zu states, bandwidth %zu, %zu distinct intervals",
               gmm_ssm_dim(ssm), gmm_ssm_nstates(ssm), gmm_ssm_bandwidth(ssm),
               gmm_ssm_nintervals(ssm));
    return GMM_OK;
}

/* ---- graph models ------------------------------------------------------------- */

/* The isolated nodes' warning: a header and up to 20 labels. */
static void report_isolated(const build *b, gmm_mdl *m, const gmm_table *data,
                            const size_t *isolated, size_t nisolated)
{
    if (!b->s->report)
        return;
    size_t cap = 256 + 70 * (nisolated < 20 ? nisolated : 20) + 64;
    char *buf = gmm_malloc(cap, 1), lb[64];
    if (!buf)
        return;
    int at = snprintf(buf, cap,
                      "warning: %zu node(s) of %s are not in %s and become isolated nodes:",
                      nisolated, data->file, m->graph_file);
    for (size_t k = 0; k < nisolated && k < 20 && at >= 0 && (size_t)at < cap; k++)
        at += snprintf(buf + at, cap - (size_t)at, "\n  %s",
                       gmm_graph_node_label(m->g, isolated[k], lb));
    if (nisolated > 20 && at >= 0 && (size_t)at < cap)
        snprintf(buf + at, cap - (size_t)at, "\n  ... and %zu more", nisolated - 20);
    b->s->report(b->s->report_user, GMM_MDL_REPORT_WARNING, buf);
    gmm_free(buf);
}

/* Read the graph, attach the data's nodes, order by RCM, build the latent. */
static gmm_status build_graph(const build *b, gmm_mdl *m, gmm_table *data, int strict)
{
    gmm_status s;
    gmm_table *edges = NULL;
    size_t *isolated = NULL, nisolated = 0;

    if (m->edgeless) {
        if ((s = gmm_graph_empty(&m->g)) != GMM_OK)
            goto done;
    } else if ((s = gmm_table_read(m->graph_file, &edges)) != GMM_OK ||
               /* The default "length" column is optional; a named one is required. */
               (s = gmm_mdl_graph_read(edges, m->edge_cols[0], m->edge_cols[1],
                                       m->edge_cols[2], m->len_optional, &m->g)) != GMM_OK) {
        goto done;
    }
    if (m->g->nmerged)
        report(b, GMM_MDL_REPORT_WARNING, "warning: %zu duplicate edge(s) in %s merged",
               m->g->nmerged, m->graph_file);
    m->row_node = gmm_malloc(data->nrow ? data->nrow : 1, sizeof(size_t));
    if (!m->row_node) {
        s = gmm_error(GMM_ENOMEM, "out of memory");
        goto done;
    }
    if ((s = gmm_mdl_graph_attach(m->g, data, m->nodename, strict, m->row_node, &isolated,
                                  &nisolated)) != GMM_OK)
        goto done;
    if (nisolated && !m->edgeless)
        report_isolated(b, m, data, isolated, nisolated);
    if ((s = parse_spec(b, "precision", b->s->desc.precision, &m->spec)) != GMM_OK)
        goto done;
    if ((s = gmm_gmrf_alloc(m->g, m->spec, m->spec_text, &m->gmrf)) != GMM_OK) {
        if (s == GMM_EPARSE)
            spec_error(b, "precision", b->s->desc.precision, s);
        goto done;
    }
    if (b->s->verbose) {
        char buf[256];
        gmm_gmrf_describe(m->gmrf, buf, sizeof buf);
        report(b, GMM_MDL_REPORT_INFO, "%s", buf);
    }
    s = gmm_latent_gmrf_alloc(m->gmrf, m->nrow, m->row_node, &m->lat);
done:
    gmm_free(isolated);
    gmm_table_free(edges);
    return s;
}

/* ---- stacked latents (several f() terms) ------------------------------------- */

char *gmm_mdl_impl_join_cells(const gmm_table *t, size_t r, const size_t *col, size_t nc)
{
    size_t len = 1;
    for (size_t k = 0; k < nc; k++)
        len += strlen(t->cell[r][col[k]]) + 1;
    char *key = gmm_malloc(len, 1);
    if (!key)
        return NULL;
    size_t at = 0;
    for (size_t k = 0; k < nc; k++) {
        size_t l = strlen(t->cell[r][col[k]]);
        memcpy(key + at, t->cell[r][col[k]], l);
        at += l;
        key[at++] = '\x1f';
    }
    key[at] = '\0';
    return key;
}

/* Each row's cells of the formula's columns (f() indices, covariates,
 * factors), joined by a unit separator: the key by which draws without
 * latent states find a new row's data row. */
static gmm_status stack_rowkeys(gmm_mdl *m, const gmm_table *data)
{
    const gmm_formula *fm = m->fm;
    size_t nc = fm->nlatent + fm->nfixed;
    size_t *col = gmm_malloc(nc, sizeof *col);
    if (!col)
        return gmm_error(GMM_ENOMEM, "out of memory");
    gmm_status s = GMM_OK;
    for (size_t k = 0; k < nc && s == GMM_OK; k++)
        s = gmm_table_column(data, k < fm->nlatent ? fm->latent[k].name
                                                   : fm->fixed[k - fm->nlatent].name, &col[k]);
    if (s == GMM_OK && !(m->rowkey = gmm_calloc(m->nrow ? m->nrow : 1, sizeof *m->rowkey)))
        s = gmm_error(GMM_ENOMEM, "out of memory");
    for (size_t r = 0; s == GMM_OK && r < m->nrow; r++)
        if (!(m->rowkey[r] = gmm_mdl_impl_join_cells(data, r, col, nc)))
            s = gmm_error(GMM_ENOMEM, "out of memory");
    gmm_free(col);
    return s;
}

/* The graph of a besag, bym2 or graph-precision term: its edge list (columns
 * i, j and an optional length) with the rows' nodes attached. */
static gmm_status stack_graph(const build *b, const gmm_table *data,
                              const gmm_formula_latent *t, const char *path, size_t *row_node,
                              gmm_graph **g)
{
    gmm_table *edges = NULL;
    size_t *isolated = NULL, nisolated = 0;
    gmm_status s;
    if ((s = gmm_table_read(path, &edges)) != GMM_OK ||
        (s = gmm_mdl_graph_read(edges, "i", "j", "length", 1, g)) != GMM_OK)
        goto done;
    if ((*g)->nmerged)
        report(b, GMM_MDL_REPORT_WARNING, "warning: %zu duplicate edge(s) in %s merged",
               (*g)->nmerged, path);
    if ((s = gmm_mdl_graph_attach(*g, data, t->name, 0, row_node, &isolated, &nisolated)) != GMM_OK)
        goto done;
    if (nisolated)
        report(b, GMM_MDL_REPORT_WARNING,
               "warning: %zu value(s) of column '%s' are not nodes of %s and become isolated "
               "nodes",
               nisolated, t->name, path);
done:
    gmm_free(isolated);
    gmm_table_free(edges);
    return s;
}

/* A stacked kernel term's spec and kernel (its errors point into the
 * formula), its unset parameters defaulted from the index values x and the
 * working response as a kernel alone is (build_ssm). */
static gmm_status stack_kernel(build *b, gmm_mdl *m, const gmm_formula_latent *t,
                               const double *x, gmm_spec_node **spec, gmm_kernel **k)
{
    gmm_status s;
    b->ftext = b->s->desc.formula;
    b->fspec = t->model;
    b->fbase = t->model_pos;
    if ((s = parse_spec(b, "kernel", t->model, spec)) != GMM_OK)
        return s;
    if ((s = gmm_kernel_from_spec(*spec, k)) != GMM_OK)
        return s == GMM_EPARSE ? spec_error(b, "kernel", t->model, s) : s;
    size_t np = gmm_kernel_nparam(*k);
    int *defaulted = gmm_calloc(np ? np : 1, sizeof(int));
    double *z = working_response(m);
    if (!defaulted || !z)
        s = gmm_error(GMM_ENOMEM, "out of memory");
    else
        s = gmm_kernel_fill_defaults(*k, x, z, m->nrow, defaulted);
    for (size_t i = 0; s == GMM_OK && b->s->verbose && i < np; i++)
        if (defaulted[i])
            report(b, GMM_MDL_REPORT_INFO, "default f.%s: %s = %.6g", t->name,
                   gmm_kernel_param_name(*k, i), gmm_kernel_values(*k)[i]);
    gmm_free(defaulted);
    gmm_free(z);
    return s;
}

/* Every f() term a component of one stacked latent (stack.h), indexed by
 * the data rows' values of its column. */
static gmm_status build_stack(build *b, gmm_mdl *m, const gmm_table *data)
{
    const gmm_formula *fm = m->fm;
    size_t K = fm->nlatent, nr = m->nrow ? m->nrow : 1;
    gmm_status s = GMM_OK;
    gmm_stack_term *terms = gmm_calloc(K, sizeof *terms);
    char (*names)[72] = gmm_calloc(K, sizeof *names);
    size_t **level = gmm_calloc(K, sizeof *level);
    double **value = gmm_calloc(K, sizeof *value);
    m->sg = gmm_calloc(K, sizeof *m->sg);
    m->sspec = gmm_calloc(K, sizeof *m->sspec);
    m->sgmrf = gmm_calloc(K, sizeof *m->sgmrf);
    m->skern = gmm_calloc(K, sizeof *m->skern);
    if (!terms || !names || !level || !value || !m->sg || !m->sspec || !m->sgmrf ||
        !m->skern) {
        s = gmm_error(GMM_ENOMEM, "out of memory");
        goto done;
    }
    m->nterm = K;
    for (size_t k = 0; k < K && s == GMM_OK; k++) {
        const gmm_formula_latent *t = &fm->latent[k];
        const char *graph = gmm_formula_arg_find(t, "graph", NULL);
        int mk = stack_model(t);
        snprintf(names[k], sizeof names[k], "f.%s", t->name);
        terms[k].name = names[k];
        int kern = mk < 0 && !graph;
        if (kern || (mk >= 0 && (stack_kind(mk) == GMM_STACK_RW1 ||
                              stack_kind(mk) == GMM_STACK_RW2))) {
            size_t c;
            terms[k].model = kern ? GMM_STACK_KERNEL : stack_kind(mk);
            if (!(value[k] = gmm_malloc(nr, sizeof **value))) {
                s = gmm_error(GMM_ENOMEM, "out of memory");
                goto done;
            }
            if ((s = gmm_table_column(data, t->name, &c)) != GMM_OK ||
                (s = gmm_table_column_double(data, c, 0, value[k])) != GMM_OK)
                goto done;
            terms[k].value = value[k];
            if (kern) {
                if ((s = stack_kernel(b, m, t, value[k], &m->sspec[k], &m->skern[k])) != GMM_OK)
                    goto done;
                terms[k].kernel = m->skern[k];
                terms[k].merge_tol = m->merge_tol = b->s->desc.merge_tol;
                continue;
            }
            if ((s = term_cyclic(b, t, &terms[k].cyclic, &terms[k].period)) != GMM_OK)
                goto done;
            continue;
        }
        if (!(level[k] = gmm_malloc(nr, sizeof **level))) {
            s = gmm_error(GMM_ENOMEM, "out of memory");
            goto done;
        }
        if (!graph) { /* iid: the column's levels alone */
            size_t *added = NULL, nadded = 0;
            if ((s = gmm_graph_empty(&m->sg[k])) == GMM_OK)
                s = gmm_mdl_graph_attach(m->sg[k], data, t->name, 0, level[k], &added,
                                         &nadded);
            gmm_free(added);
        } else {
            s = stack_graph(b, data, t, graph, level[k], &m->sg[k]);
        }
        if (s != GMM_OK)
            goto done;
        terms[k].level = level[k];
        terms[k].nlevel = m->sg[k]->n;
        terms[k].graph = m->sg[k];
        if (mk >= 0) {
            terms[k].model = stack_kind(mk);
            continue;
        }
        /* a graph precision spec: its errors point into the formula */
        terms[k].model = GMM_STACK_GRAPH;
        b->ftext = b->s->desc.formula;
        b->fspec = t->model;
        b->fbase = t->model_pos;
        if ((s = parse_spec(b, "precision", t->model, &m->sspec[k])) != GMM_OK)
            goto done;
        if ((s = gmm_gmrf_alloc(m->sg[k], m->sspec[k], t->model, &m->sgmrf[k])) != GMM_OK) {
            if (s == GMM_EPARSE)
                spec_error(b, "precision", t->model, s);
            goto done;
        }
        terms[k].gmrf = m->sgmrf[k];
    }
    if ((s = gmm_latent_stack_alloc(m->nrow, K, terms, 0, &m->lat)) != GMM_OK) {
        if (gmm_error_index() < m->nrow) {
            char why[GMM_ERROR_MAX];
            snprintf(why, sizeof why, "%s", gmm_error_message());
            s = gmm_error(s, "%s:%zu: %s", m->data_file, m->line[gmm_error_index()], why);
        }
        goto done;
    }
    for (size_t k = 0; k < K; k++)
        if (gmm_latent_stack_nmerged(m->lat, k) > 0)
            report(b, GMM_MDL_REPORT_WARNING,
                   "warning: %s: %zu distinct inputs within merge_tol %g of another were "
                   "merged into one state",
                   names[k], gmm_latent_stack_nmerged(m->lat, k), b->s->desc.merge_tol);
    if (b->s->verbose) {
        char buf[1024];
        gmm_latent_stack_describe(m->lat, buf, sizeof buf);
        report(b, GMM_MDL_REPORT_INFO, "%s", buf);
    }
    s = stack_rowkeys(m, data);
done:
    for (size_t k = 0; k < K; k++) {
        if (level)
            gmm_free(level[k]);
        if (value)
            gmm_free(value[k]);
    }
    gmm_free(level);
    gmm_free(value);
    gmm_free(names);
    gmm_free(terms);
    return s;
}

/* ---- the problem ---------------------------------------------------------------- */

/* A formula's latent parameters named after their term: the latent's
 * "LEAF.KIND.PARAM" becomes "f.NAME.PARAM" for a model named by a keyword
 * (f(g, iid): "f.g.variance"), "f.NAME.KIND.PARAM" for a spec
 * (f(t, 'matern32 + periodic'): "f.t.matern32.lengthscale",
 * "f.t.periodic.period"), a kind that recurs in a sum numbered from its
 * second leaf on ("f.t.matern32.2.variance").  Latent parameters i0..i1-1
 * of term t, their names read from character skip on (a stack's graph
 * precision is named "f.NAME.LEAF.KIND.PARAM" by the latent). */
static gmm_status rename_leaves(gmm_mdl *m, const gmm_formula_latent *t, size_t i0, size_t i1,
                                size_t skip)
{
    for (size_t i = i0; i < i1; i++) {
        const char *orig = gmm_latent_param_name(m->lat, i) + skip;
        const char *k0 = strchr(orig, '.'), *p0 = k0 ? strchr(k0 + 1, '.') : NULL;
        if (!p0)
            return gmm_error(GMM_EINVAL, "latent parameter '%s' is not LEAF.KIND.PARAM", orig);
        size_t klen = (size_t)(p0 - k0 - 1);
        unsigned long leaf = strtoul(orig, NULL, 10);
        /* this leaf's rank among the leaves of its kind */
        size_t rank = 1;
        unsigned long last = leaf;
        for (size_t j = i0; j < i; j++) {
            const char *o2 = gmm_latent_param_name(m->lat, j) + skip, *k2 = strchr(o2, '.');
            unsigned long l2 = strtoul(o2, NULL, 10);
            if (l2 != leaf && l2 != last && !strncmp(k2 + 1, k0 + 1, klen) && k2[klen + 1] == '.') {
                rank++;
                last = l2;
            }
        }
        char suffix[24] = "";
        if (rank > 1)
            snprintf(suffix, sizeof suffix, ".%zu", rank);
        char name[64];
        int len = !t->quoted && !strcmp(t->model, "iid")
                      ? snprintf(name, sizeof name, "f.%s%s", t->name, p0)
                      : snprintf(name, sizeof name, "f.%s.%.*s%s%s", t->name, (int)klen, k0 + 1,
                                 suffix, p0);
        if (len < 0 || (size_t)len >= sizeof name)
            return gmm_error(GMM_EINVAL, "formula: the parameter name '%s' is too long (%zu "
                                         "bytes at most)",
                             name, sizeof name - 1);
        strcpy(m->obj->name[i], name);
    }
    return GMM_OK;
}

/* The formula's names for the latent's parameters (rename_leaves): the
 * one f() term's, or a stack's graph precisions' and kernels' (its other components are
 * named f.NAME.variance, f.NAME.phi by the latent).  The shorthand options
 * keep the latent's names. */
static gmm_status term_names(gmm_mdl *m)
{
    if (!m->fm)
        return GMM_OK;
    if (!m->stack)
        return m->fm->nlatent == 1
                   ? rename_leaves(m, &m->fm->latent[0], 0, gmm_latent_nparam(m->lat), 0)
                   : GMM_OK;
    /* a stack's components hold their parameters one after another */
    size_t i0 = 0;
    for (size_t k = 0; k < m->fm->nlatent; k++) {
        const gmm_formula_latent *t = &m->fm->latent[k];
        int mk = stack_model(t);
        size_t np = m->sgmrf[k]                                 ? m->sgmrf[k]->nparam
                    : m->skern[k]                                 ? gmm_kernel_nparam(m->skern[k])
                    : mk >= 0 && stack_kind(mk) == GMM_STACK_BYM2 ? 2
                                                                : 1;
        gmm_status s;
        if ((m->sgmrf[k] || m->skern[k]) &&
            (s = rename_leaves(m, t, i0, i0 + np, strlen(t->name) + 3)) != GMM_OK)
            return s;
        i0 += np;
    }
    return GMM_OK;
}

/* Likelihood defaults, the problem, the objective; starting values.
 * verbose: report the defaults chosen and the model's summary. */
static gmm_status build_problem(const build *b, gmm_mdl *m, double noise, double intercept,
                                int verbose)
{
    gmm_status s;
    if ((s = check_outcomes(m)) != GMM_OK)
        return s;
    if (!isnan(noise))
        m->lik.par[0] = noise; /* Gaussian only: checked by the caller */
    int defaulted[GMM_LIK_MAXPARAM];
    for (size_t k = 0; k < m->lik.type->nparam; k++)
        defaulted[k] = isnan(m->lik.par[k]);
    if ((s = gmm_lik_fill_defaults(&m->lik, m->y, m->nrow)) != GMM_OK)
        return s;
    for (size_t k = 0; verbose && k < m->lik.type->nparam; k++)
        if (defaulted[k]) {
            char name[64];
            report(b, GMM_MDL_REPORT_INFO, "default %s = %.6g",
                   gmm_lik_param_name(&m->lik, k, name), m->lik.par[k]);
        }
    int has_b = m->ncoef > 0 && !strcmp(m->coef_name[0], "intercept");
    double b0 = intercept;
    if (has_b && isnan(b0) &&
        (s = gmm_lik_default_intercept(&m->lik, m->y, m->e, m->nrow, &b0)) != GMM_OK)
        return s;
    if (has_b && verbose && isnan(intercept))
        report(b, GMM_MDL_REPORT_INFO, "default intercept = %.6g", b0);
    /* covariates and factor levels start at 0 */
    size_t nc = m->ncoef ? m->ncoef : 1;
    double *start = gmm_calloc(nc, sizeof *start);
    const char **names = gmm_calloc(nc, sizeof *names);
    if (!start || !names) {
        gmm_free(start);
        gmm_free((void *)names);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < m->ncoef; k++)
        names[k] = m->coef_name[k];
    if (has_b)
        start[0] = b0;
    gmm_problem_design d = {m->ncoef, m->X, names, start, 1};
    s = gmm_problem_alloc_design(m->lat, &m->lik, m->y, m->e, &d, &m->prob);
    gmm_free(start);
    gmm_free((void *)names);
    if (s != GMM_OK) {
        if (s == GMM_EINVAL && gmm_error_index() < m->nrow)
            return check_outcomes(m);
        return s;
    }
    m->obj = gmm_problem_objective(m->prob);
    if ((s = term_names(m)) != GMM_OK)
        return s;
    if (verbose)
        report(b, GMM_MDL_REPORT_SUMMARY,
               "%s latent model: %zu latent variables, bandwidth %zu; likelihood %s (%s); %zu "
               "coefficient(s)",
               gmm_latent_family(m->lat), gmm_latent_dim(m->lat), gmm_latent_bandwidth(m->lat),
               m->lik.type->name,
               m->lik.type->conjugate ? "exact marginal likelihood" : "Laplace approximation",
               m->ncoef);
    return GMM_OK;
}

/* ---- the description's consistency ----------------------------------------------- */

/* Fields that exclude each other, said before anything is read. */
static gmm_status check_spec(const build *b, const gmm_lik *lik)
{
    const gmm_mdl_spec *o = b->s;
    const char *mp = o->values_name ? o->values_name : "<stdin>";
    /* the per-row quantity's column, under the name the family reads */
    const char *qname = o->desc.data.exposure ? "exposure" : o->desc.data.trials ? "trials" : NULL;
    int q_ok = !qname || (lik->type->rowq && !strcmp(lik->type->rowq, qname));
    if (o->values) {
        if (!q_ok || (o->desc.data.exposure && o->desc.data.trials))
            return gmm_error(GMM_EPARSE,
                             "%s: \"data.%s\" given for the %s likelihood, which has none", mp,
                             o->desc.data.trials && !q_ok ? "trials" : "exposure", lik->type->name);
        if (o->desc.precision && (!o->desc.data.node || !o->desc.data.y))
            return gmm_error(GMM_EPARSE,
                             "%s: a graph model needs \"data\": {\"node\": ..., \"y\": ...}", mp);
        return GMM_OK;
    }
    int g = o->desc.graph != NULL || b->edgeless;
    if (g && o->desc.kernel)
        return usage_error(b, GMM_MDL_RULE_KERNEL_AND_GRAPH,
                           "a kernel and a graph exclude each other");
    if (!g && (o->desc.precision || o->desc.data.node || o->desc.edge_cols[0]))
        return usage_error(b, GMM_MDL_RULE_GRAPH_FIELDS,
                           "a precision, a node column and edge columns need a graph");
    if (g && (!o->desc.precision || !o->desc.data.node || !o->desc.data.y))
        /* --y has no default for graphs: node files often carry coordinate
         * columns named x and y, and modelling one by accident is silent. */
        return usage_error(b, GMM_MDL_RULE_GRAPH_NEEDS,
                           "a graph needs a precision, a node column and a y column");
    if (g && (o->desc.data.x || o->desc.merge_tol > 0))
        return usage_error(b, GMM_MDL_RULE_STATE_SPACE_FIELDS,
                           "an x column and merge_tol apply to state-space models, not to a "
                           "graph");
    if (o->desc.data.exposure && o->desc.data.trials)
        return usage_error(b, GMM_MDL_RULE_EXPOSURE_AND_TRIALS,
                           "an exposure and a trials column exclude each other");
    if (lik->type->conjugate && !o->desc.formula) {
        if (o->desc.data.exposure || o->no_intercept || !isnan(o->intercept))
            return usage_error(b, GMM_MDL_RULE_NON_GAUSSIAN_FIELDS,
                               "an exposure, an intercept and no_intercept apply to "
                               "non-Gaussian likelihoods (Gaussian data are centred instead)");
    }
    if (!q_ok) {
        b->fail->usage = 1;
        b->fail->rule = GMM_MDL_RULE_ROW_COLUMN;
        return gmm_error(GMM_EINVAL, "%s: the %s likelihood has no %s", qname,
                         lik->type->name, qname);
    }
    if (!lik->type->conjugate) {
        if (!isnan(o->noise) || o->no_center)
            return usage_error(b, GMM_MDL_RULE_GAUSSIAN_FIELDS,
                               "noise and no_center apply to the Gaussian likelihood (the "
                               "likelihood's own parameters are in its spec, e.g. "
                               "'negbinomial(dispersion=2)')");
        if (o->no_intercept && !isnan(o->intercept))
            return usage_error(b, GMM_MDL_RULE_INTERCEPT_AND_NONE,
                           "an intercept and no_intercept exclude each other");
    }
    return GMM_OK;
}

/* ---- a model file's values ----------------------------------------------------- */

/* The value of parameter `name` in a model file; format 1 files name the
 * Gaussian variance "noise.variance". */
static int model_value(const gmm_model *mf, const char *name, double *v)
{
    size_t k;
    if (gmm_model_param_index(mf, name, &k) == GMM_OK ||
        (!strcmp(name, "likelihood.variance") &&
         gmm_model_param_index(mf, "noise.variance", &k) == GMM_OK)) {
        *v = mf->param_value[k];
        return 1;
    }
    return 0;
}

/* Every parameter from the file, each in its domain, and no key the model
 * does not have (a typo or another model's file). */
static gmm_status take_values(const build *b, gmm_mdl *m, const gmm_model *mf, const char *mp)
{
    size_t nl = gmm_latent_nparam(m->lat);
    for (size_t i = 0; i < m->obj->nparam; i++) {
        /* a formula's latent parameter may be under the spec's own name
         * ("0.iid.variance"), as formula models were written before their
         * terms named them */
        if (!model_value(mf, m->obj->name[i], &m->obj->value[i]) &&
            !(i < nl && model_value(mf, gmm_latent_param_name(m->lat, i), &m->obj->value[i]))) {
            /* a Gaussian formula's intercept was its data's centre before
             * it was estimated: the same model at the same value */
            if (!(m->lik.type->conjugate && m->fm && mf->has_center &&
                  !strcmp(m->obj->name[i], "intercept")))
                return gmm_error(GMM_EPARSE, "%s: \"parameters\" has no value for '%s'", mp,
                                 m->obj->name[i]);
            m->obj->value[i] = mf->center;
        }
        size_t c0 = m->obj->nparam - gmm_problem_ncoef(m->prob);
        if (i >= c0 && isnan(m->obj->value[i])) {
            /* null: a column the fit's QR dropped, held at 0 */
            m->obj->value[i] = 0.0;
            m->obj->fixed[i] = 1;
            continue;
        }
        gmm_scale sc = m->obj->scale[i];
        if (!gmm_scale_inside(sc, m->obj->value[i]) &&
            !(m->obj->value[i] == 0.0 && i < gmm_latent_nparam(m->lat) &&
              gmm_latent_param_zero_ok(m->lat, i)))
            return gmm_error(GMM_EPARSE,
                             "%s: parameter '%s' = %g is out of its domain (it must be %s)", mp,
                             m->obj->name[i], m->obj->value[i],
                             sc == GMM_SCALE_LOGIT ? "in (0, 1)"
                             : sc == GMM_SCALE_LOG ? "positive"
                                                   : "finite");
    }
    for (size_t k = 0; k < mf->nparam; k++) {
        const char *key = mf->param_name[k];
        size_t i;
        for (i = 0; i < m->obj->nparam; i++)
            if (!strcmp(key, m->obj->name[i]) ||
                (i < nl && !strcmp(key, gmm_latent_param_name(m->lat, i))) ||
                (!strcmp(key, "noise.variance") && !strcmp(m->obj->name[i], "likelihood.variance")))
                break;
        if (i == m->obj->nparam) {
            list_params(b, m);
            return gmm_error(GMM_EPARSE,
                             "%s: unknown parameter '%s' in \"parameters\"; the model's are:", mp,
                             key);
        }
    }
    return GMM_OK;
}

/* The coefficients' scale for the optimisers (problem.h): the design's QR
 * over the free coefficients; a column in the span of those before it is
 * dropped -- held at 0, written as null -- and named, as R's lm and lme4
 * do ("fixed-effect model matrix is rank deficient so dropping 1 column /
 * coefficient"); a model file's null is such a column already. */
static gmm_status coef_basis(const build *b, gmm_mdl *m, int from_file)
{
    size_t nc = m->ncoef, c0 = m->obj->nparam - nc;
    gmm_free(m->aliased);
    gmm_free(m->desc_value);
    m->desc_value = gmm_malloc(m->obj->nparam, sizeof *m->desc_value);
    if (!(m->aliased = gmm_calloc(nc, sizeof *m->aliased)) || !m->desc_value)
        return gmm_error(GMM_ENOMEM, "out of memory");
    int *drop = gmm_calloc(nc, sizeof *drop);
    double *keep = gmm_malloc(nc ? nc : 1, sizeof *keep);
    if (!drop || !keep) {
        gmm_free(drop);
        gmm_free(keep);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    memcpy(keep, m->obj->value + c0, nc * sizeof *keep);
    gmm_status s = gmm_problem_coef_basis(m->prob, GMM_ALIAS_TOL, drop);
    size_t nd = 0;
    char names[768] = "";
    for (size_t k = 0; s == GMM_OK && k < nc; k++) {
        double v;
        if (from_file && model_value(b->s->values, m->obj->name[c0 + k], &v) && isnan(v))
            m->aliased[k] = 1;
        if (!drop[k])
            continue;
        if (from_file && !m->aliased[k]) {
            /* estimated by the model but aliased in these data: held at its value (the QR
             * left it out of the basis), never set to 0 */
            m->obj->value[c0 + k] = keep[k];
            report(b, GMM_MDL_REPORT_WARNING,
                   "warning: the column of %s is aliased in these data: held at the model's "
                   "value %.6g",
                   m->obj->name[c0 + k], keep[k]);
            continue;
        }
        m->aliased[k] = 1;
        size_t len = strlen(names);
        if (len < sizeof names - 80)
            snprintf(names + len, sizeof names - len, "%s%s", nd ? ", " : "",
                     m->obj->name[c0 + k]);
        nd++;
    }
    if (nd && !from_file)
        report(b, GMM_MDL_REPORT_WARNING,
               "warning: fixed-effect model matrix is rank deficient so dropping %zu column%s "
               "(not estimated): %s",
               nd, nd > 1 ? "s" : "", names);
    gmm_free(drop);
    gmm_free(keep);
    return s;
}

/* ---- entry point ----------------------------------------------------------------- */

static gmm_status build_model(const build *b, gmm_mdl *m)
{
    const gmm_mdl_spec *o = b->s;
    const gmm_model *mf = o->values;
    const char *mp = o->values_name ? o->values_name : "<stdin>";
    gmm_status s;
    gmm_table *data = NULL;
    /* specs first: a spec error is reported before any data is read */
    if ((s = parse_likelihood(b, m, o->desc.likelihood)) != GMM_OK ||
        (s = check_spec(b, &m->lik)) != GMM_OK)
        return s;
    m->graph = o->desc.graph != NULL || b->edgeless;
    if (!o->desc.data.file || (!m->stack && !(m->graph ? o->desc.precision : o->desc.kernel)))
        return gmm_error(GMM_EINVAL, "model: no data file, or no %s spec",
                         m->graph ? "precision" : "kernel");
    m->data_file = gmm_strdup(o->desc.data.file);
    m->data_rec = record_path(o->desc.data.file);
    m->graph_file = gmm_strdup(o->desc.graph);
    m->graph_rec = record_path(o->desc.graph);
    m->spec_text = gmm_strdup(m->stack ? "" : m->graph ? o->desc.precision : o->desc.kernel);
    const char *qcol = o->desc.data.exposure ? o->desc.data.exposure : o->desc.data.trials;
    m->ename = gmm_strdup(qcol);
    m->nodename = gmm_strdup(o->desc.data.node);
    if (o->model_path) {
        m->model_path = gmm_strdup(o->model_path);
        m->model_rec = record_path(o->model_path);
    }
    const char *defaults[3] = {"i", "j", "length"};
    m->len_optional = !o->desc.edge_cols[0] || mf;
    for (int k = 0; k < 3; k++) {
        const char *c = o->desc.edge_cols[0] ? o->desc.edge_cols[k] : defaults[k];
        if (m->graph && c && !(m->edge_cols[k] = gmm_strdup(c)))
            return gmm_error(GMM_ENOMEM, "out of memory");
    }
    if (!m->data_file || !m->data_rec || (o->desc.graph && (!m->graph_rec || !m->graph_file)) ||
        !m->spec_text || (qcol && !m->ename) || (o->desc.data.node && !m->nodename) ||
        (o->model_path && (!m->model_path || !m->model_rec)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    if (!mf && !m->stack) {
        gmm_spec_node *probe = NULL;
        const char *key = m->graph ? "precision" : "kernel";
        const char *text = m->graph ? o->desc.precision : o->desc.kernel;
        if ((s = parse_spec(b, key, text, &probe)) != GMM_OK)
            return s;
        if (!m->graph) {
            /* kernel names, keys and sizes too, before the data are read */
            gmm_kernel *kp = NULL;
            s = gmm_kernel_from_spec(probe, &kp);
            gmm_kernel_free(kp);
            if (s != GMM_OK) {
                gmm_spec_free(probe);
                return s == GMM_EPARSE ? spec_error(b, key, text, s) : s;
            }
        }
        gmm_spec_free(probe);
    }
    if ((s = gmm_table_read(o->desc.data.file, &data)) != GMM_OK)
        goto done;
    const char *xcol = m->graph || m->stack ? NULL : o->desc.data.x;
    if ((s = load_data(b, m, data, xcol, o->desc.data.y)) != GMM_OK)
        goto done;
    /* the coefficients: a formula's fixed terms and its intercept (for every
     * likelihood: the intercept a formula names is estimated), else the
     * intercept of a non-Gaussian likelihood (Gaussian data without a
     * formula are centred instead) */
    double b_file = NAN;
    int file_b = mf && model_value(mf, "intercept", &b_file);
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
    if ((s = gmm_mdl_impl_design(m, data, m->fm ? m->fm : &no_terms, want_b)) != GMM_OK)
        goto done;
    if (mf)
        center_y(m, !mf->has_center || m->fm, mf->has_center ? &mf->center : NULL);
    else
        center_y(m, o->no_center || m->ncoef > 0 || m->fm, NULL);
    if (m->stack) {
        if (!mf)
            report(b, GMM_MDL_REPORT_DATA, "read %zu rows: %zu observed, %zu missing", m->nrow,
                   m->nobs, m->nrow - m->nobs);
        if ((s = build_stack((build *)b, m, data)) != GMM_OK)
            goto done;
    } else if (m->graph) {
        /* the precision spec is checked against the graph first: its errors
         * come before the data report */
        if ((s = build_graph(b, m, data, o->strict_nodes)) != GMM_OK)
            goto done;
        if (!mf)
            report(b, GMM_MDL_REPORT_DATA, "read %zu rows: %zu observed, %zu missing", m->nrow,
                   m->nobs, m->nrow - m->nobs);
    } else {
        if (!mf)
            report(b, GMM_MDL_REPORT_DATA, "read %zu rows: %zu observed, %zu missing", m->nrow,
                   m->nobs, m->nrow - m->nobs);
        if ((s = build_ssm(b, m)) != GMM_OK)
            goto done;
    }
    if (mf) {
        /* a start for the problem only: the file's values replace it */
        for (size_t k = 0; k < m->lik.type->nparam; k++)
            m->lik.par[k] = 1.0;
        if ((s = build_problem(b, m, NAN, file_b ? b_file : 0.0, 0)) != GMM_OK ||
            (s = take_values(b, m, mf, mp)) != GMM_OK)
            goto done;
    } else if ((s = build_problem(b, m, o->noise, o->intercept, o->verbose)) != GMM_OK) {
        goto done;
    }
    if ((s = term_values(b, m, mf != NULL)) != GMM_OK)
        goto done;
    /* the default kernel's period is a unit (x in years), not estimated */
    if (b->default_kernel && !o->free_period &&
        (s = fix_param(b, m, GMM_MDL_DEFAULT_KERNEL_FIXED)) != GMM_OK)
        goto done;
    for (size_t f = 0; f < o->nfix; f++)
        if ((s = fix_param(b, m, o->fix[f])) != GMM_OK)
            goto done;
    if (m->ncoef && (s = coef_basis(b, m, mf != NULL)) != GMM_OK)
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
    build b = {s, fail, NULL, NULL, 0, 0, 0};
    gmm_mdl_spec d;
    gmm_status st = GMM_OK;
    if (s->desc.formula && (st = apply_formula(&b, m, &d)) == GMM_OK) {
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

gmm_status gmm_mdl_take_params(gmm_mdl *m, const gmm_model *src, const char *src_name)
{
    gmm_objective *obj = m->obj;
    for (size_t k = 0; k < obj->nparam; k++) {
        size_t j;
        if (gmm_model_param_index(src, obj->name[k], &j) != GMM_OK)
            return gmm_error(GMM_EINVAL, "%s: no value for '%s': not a result of this model",
                             src_name, obj->name[k]);
        double v = src->param_value[j];
        if (isnan(v)) { /* a coefficient not estimated: held at 0 (its column aliased) */
            if (k < obj->nparam - m->ncoef)
                return gmm_error(GMM_EINVAL, "%s: '%s' is null: not a result of this model",
                                 src_name, obj->name[k]);
            v = 0.0;
            obj->fixed[k] = 1;
        }
        obj->value[k] = v;
    }
    return GMM_OK;
}
