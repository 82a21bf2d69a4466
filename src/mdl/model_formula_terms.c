/* model_formula_terms.c -- the formula's meaning: which latent each f()
 * term names, its keys and their values checked, the description a formula
 * of one term stands for, and the formula as a model file records it.
 *
 * WITHOUT VALUES (no model file), a formula replaces the description's
 * kernel, precision, graph and the data's x, y and node (which must be
 * NULL: a usage error).  f(NAME, 'SPEC') is a kernel on input column NAME,
 * f(NAME, 'SPEC', graph=EDGES.csv) a graph precision on node column NAME,
 * f(NAME, iid) one N(0, variance) effect per level of NAME (the precision
 * iid on a graph of the levels, no edges).  WITH VALUES (a model file)
 * those fields come from the file and the formula gives the fixed effects
 * and the kind of latent.
 *
 * Covariates and factor levels become coefficients (problem.h); a Gaussian
 * model with any of them is not centred but has an intercept coefficient.
 * A keyword term's variance=V and (bym2) phi=P are the objective's start
 * values f.NAME.variance and f.NAME.phi (not over a model file's values),
 * and 'KEY=VALUE fixed' holds that parameter as spec.fix does, with or
 * without values; a value out of its domain or a key the model lacks is
 * GMM_EPARSE with the caret on it (gmm_mdl_failure). */

#include "model_build.h"

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

static char *record_formula(const char *text, const gmm_formula *fm);

int gmm_mdl_impl_stack_kind(const gmm_formula_latent *t)
{
    int k = gmm_mdl_impl_term_model(t);
    return k < 0 ? -1 : (int)gmm_mdl_impl_term_kind(k);
}

/* A MODEL that is a name but no model's: the error lists them all. */
static gmm_status check_model_name(const mdl_build *b, const gmm_formula_latent *t)
{
    char msg[GMM_ERROR_MAX];
    if (!gmm_mdl_impl_model_unknown(t, msg, sizeof msg))
        return GMM_OK;
    return gmm_mdl_impl_formula_error(b, t->model_pos, "%s", msg);
}

/* Several f() terms, or one intrinsic one: a stacked latent (one iid term
 * alone stays the edgeless graph precision, as before). */
static int is_stack(const gmm_formula *fm)
{
    if (fm->nlatent != 1) /* none: an empty stack, a linear model */
        return 1;
    int k = gmm_mdl_impl_term_model(&fm->latent[0]);
    return k > 0 || (k == 0 && (gmm_formula_arg_find(&fm->latent[0], "group", NULL) ||
                                gmm_formula_arg_find(&fm->latent[0], "replicate", NULL)));
}

/* Key g of term t is a parameter of its keyword model (model_names.c):
 * nonzero, *unit set for one in (0, 1). */
static int term_param(const gmm_formula_latent *t, const gmm_formula_arg *g, int *unit)
{
    int mk = gmm_mdl_impl_term_model(t);
    const char *p, *ctl = gmm_formula_arg_find(t, "control", NULL);
    for (size_t i = 0; mk >= 0 && (p = gmm_mdl_impl_term_param(mk, i, unit)); i++)
        if (!strcmp(p, g->key))
            return 1;
    /* an ar1 group structure's own rho */
    *unit = 2;
    return mk >= 0 && ctl && !strcmp(ctl, "ar1") && !strcmp(g->key, "group.rho");
}

/* A parameter's start value KEY=VALUE of term t: a number in its domain
 * (variance > 0, phi in (0, 1)), into *v. */
static gmm_status term_start(const mdl_build *b, const gmm_formula_latent *t,
                             const gmm_formula_arg *g, int unit, double *v)
{
    char *end;
    *v = strtod(g->value, &end);
    if (end == g->value || *end || !isfinite(*v))
        return gmm_mdl_impl_formula_error(b, g->vpos,
                                          "formula: f(%s, %s): %s must be a number, not '%s'",
                                          t->name, t->model, g->key, g->value);
    if (unit == 2 ? !(*v > -1.0 && *v < 1.0) : unit ? !(*v > 0.0 && *v < 1.0) : !(*v > 0.0))
        return gmm_mdl_impl_formula_error(b, g->vpos, "formula: f(%s, %s): %s = %s is not %s",
                                          t->name, t->model, g->key, g->value,
                                          unit == 2 ? "in (-1, 1)" : unit ? "in (0, 1)" : "> 0");
    return GMM_OK;
}

/* f()'s keys: graph=EDGES.csv; a keyword model's parameters, variance=V
 * and on bym2 phi=P, their start values (each may be followed by 'fixed');
 * cyclic (a flag, or =true/false) and period=P (needs cyclic) on rw1 and
 * rw2 only. */
static gmm_status check_keys(const mdl_build *b, const gmm_formula_latent *t)
{
    int mk = gmm_mdl_impl_term_model(t), unit;
    int walk = mk >= 0 && (gmm_mdl_impl_term_kind(mk) == GMM_STACK_RW1 ||
                           gmm_mdl_impl_term_kind(mk) == GMM_STACK_RW2);
    int seas = mk >= 0 && gmm_mdl_impl_term_kind(mk) == GMM_STACK_SEASONAL;
    for (size_t a = 0; a < t->narg; a++) {
        const gmm_formula_arg *g = &t->arg[a];
        int cyc = !strcmp(g->key, "cyclic"), per = !strcmp(g->key, "period");
        int par = term_param(t, g, &unit);
        int grp = !strcmp(g->key, "group") || !strcmp(g->key, "control") ||
                  !strcmp(g->key, "replicate");
        if (grp && mk < 0)
            return gmm_mdl_impl_formula_error(b, g->pos,
                                              "formula: f(%s, '%s'): '%s' applies to the "
                                              "keyword models",
                                              t->name, t->model, g->key);
        if (grp || (per && seas)) {
            if (g->flag || g->fixed)
                return gmm_mdl_impl_formula_error(
                    b, g->pos, "formula: key '%s' needs a value (%s=...)", g->key, g->key);
            continue;
        }
        int other = !cyc && !per && !par && strcmp(g->key, "graph");
        if (other && mk < 0)
            return gmm_mdl_impl_formula_error(
                b, g->pos,
                "formula: f(%s, '%s'): a spec's parameters take their start "
                "values in the spec (KIND(%s=...)) and are held fixed by "
                "name, f.%s.KIND.%s",
                t->name, t->model, g->key, t->name, g->key);
        if (other && (!strcmp(g->key, "variance") || !strcmp(g->key, "phi")))
            return gmm_mdl_impl_formula_error(b, g->pos,
                                              "formula: f(%s, %s) has no parameter '%s' (phi is "
                                              "bym2's mixing weight)",
                                              t->name, t->model, g->key);
        if (other)
            return gmm_mdl_impl_formula_error(
                b, g->pos,
                "formula: f() has no key '%s' (keys: graph; variance, phi on "
                "bym2, rho on ar1; on rw1 and rw2: cyclic, period; period on "
                "seasonal; group, control, group.rho, replicate)",
                g->key);
        if ((cyc || per) && !walk)
            return gmm_mdl_impl_formula_error(
                b, g->pos,
                "formula: f(%s, %s): '%s' applies to rw1 and rw2 only (a "
                "seasonal kernel: 'periodic(period=P)')",
                t->name, t->model, g->key);
        if (!cyc && g->flag)
            return gmm_mdl_impl_formula_error(
                b, g->pos, "formula: key '%s' needs a value (%s=...)", g->key, g->key);
        if (g->fixed && !par)
            return gmm_mdl_impl_formula_error(b, g->fixed_pos,
                                              "formula: f(%s, %s): 'fixed' holds a "
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
gmm_status gmm_mdl_impl_term_values(const mdl_build *b, gmm_mdl *m, int from_file)
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
gmm_status gmm_mdl_impl_term_cyclic(const mdl_build *b, const gmm_formula_latent *t, int *cyclic,
                                    double *period)
{
    size_t pos = 0;
    const char *c = gmm_formula_arg_find(t, "cyclic", &pos);
    *cyclic = 0;
    *period = 0.0;
    if (gmm_mdl_impl_stack_kind(t) == GMM_STACK_SEASONAL)
        return GMM_OK; /* its period is the season (gmm_mdl_impl_term_group) */
    if (c) {
        if (!*c || !strcmp(c, "true") || !strcmp(c, "TRUE") || !strcmp(c, "1"))
            *cyclic = 1;
        else if (strcmp(c, "false") && strcmp(c, "FALSE") && strcmp(c, "0"))
            return gmm_mdl_impl_formula_error(b, pos,
                                              "formula: cyclic is a flag: cyclic, cyclic=true or "
                                              "cyclic=false");
    }
    const char *p = gmm_formula_arg_find(t, "period", &pos);
    if (!p)
        return GMM_OK;
    char *end;
    double v = strtod(p, &end);
    if (end == p || *end || !(v > 0.0) || !isfinite(v))
        return gmm_mdl_impl_formula_error(
            b, pos, "formula: period must be a positive number, not '%s'", p);
    if (!*cyclic)
        return gmm_mdl_impl_formula_error(b, pos,
                                          "formula: period applies to a cyclic walk (f(%s, %s, "
                                          "cyclic, period=%s))",
                                          t->name, t->model, p);
    *period = v;
    return GMM_OK;
}

/* A keyword term's interaction keys into its stack term: group=COLUMN with
 * control=iid|rw1|rw2|ar1 (both or neither), replicate=COLUMN (the
 * columns' names into *group, *replicate, NULL when absent), and on
 * seasonal the season period=M (an integer >= 2, required). */
gmm_status gmm_mdl_impl_term_group(const mdl_build *b, const gmm_formula_latent *t,
                                   gmm_stack_term *st, const char **group,
                                   const char **replicate)
{
    size_t gpos = 0, cpos = 0, ppos = 0;
    *group = gmm_formula_arg_find(t, "group", &gpos);
    *replicate = gmm_formula_arg_find(t, "replicate", NULL);
    const char *ctl = gmm_formula_arg_find(t, "control", &cpos);
    static const char *names[] = {"iid", "rw1", "rw2", "ar1"};
    static const gmm_stack_model kinds[] = {GMM_STACK_IID, GMM_STACK_RW1, GMM_STACK_RW2,
                                            GMM_STACK_AR1};
    if (*group && !ctl)
        return gmm_mdl_impl_formula_error(b, gpos,
                                          "formula: f(%s, %s, group=%s) needs the groups' "
                                          "structure: control=ar1, rw1, rw2 or iid",
                                          t->name, t->model, *group);
    if (ctl && !*group)
        return gmm_mdl_impl_formula_error(b, cpos,
                                          "formula: control=%s is the structure of group=COLUMN",
                                          ctl);
    if (ctl) {
        size_t i = 0;
        while (i < 4 && strcmp(ctl, names[i]))
            i++;
        if (i == 4)
            return gmm_mdl_impl_formula_error(b, cpos,
                                              "formula: control must be ar1, rw1, rw2 or iid, "
                                              "not '%s'",
                                              ctl);
        st->control = kinds[i];
    }
    if (gmm_mdl_impl_stack_kind(t) != GMM_STACK_SEASONAL)
        return GMM_OK;
    const char *p = gmm_formula_arg_find(t, "period", &ppos);
    char *end = NULL;
    long m = p ? strtol(p, &end, 10) : 0;
    if (!p)
        return gmm_mdl_impl_formula_error(b, t->model_pos,
                                          "formula: f(%s, seasonal) needs the season length, "
                                          "period=M",
                                          t->name);
    if (end == p || *end || m < 2)
        return gmm_mdl_impl_formula_error(
            b, ppos, "formula: period must be an integer of 2 or more, not '%s'", p);
    st->season = (size_t)m;
    return GMM_OK;
}

/* The terms of a stacked formula, before any data is read: known keys, a
 * graph where the model needs one, one term per column (a quoted model
 * without a graph is a kernel spec, read with the data). */
static gmm_status check_stack_terms(const mdl_build *b, const gmm_formula *fm)
{
    size_t nkern = 0;
    for (size_t k = 0; k < fm->nlatent; k++) {
        const gmm_formula_latent *t = &fm->latent[k];
        const char *lk = t->label ? t->label : t->name;
        for (size_t j = 0; j < k; j++)
            if (!strcmp(fm->latent[j].label ? fm->latent[j].label : fm->latent[j].name, lk))
                return gmm_mdl_impl_formula_error(
                    b, t->pos,
                    "formula: two f() terms on column '%s' would share their "
                    "parameter names (f.%s.variance)",
                    t->name, t->name);
        gmm_status s = check_model_name(b, t);
        if (s != GMM_OK || (s = check_keys(b, t)) != GMM_OK)
            return s;
        size_t gpos = 0;
        const char *graph = gmm_formula_arg_find(t, "graph", &gpos);
        int mk = gmm_mdl_impl_term_model(t);
        int needs_graph = mk >= 0 && (gmm_mdl_impl_term_kind(mk) == GMM_STACK_BESAG ||
                                      gmm_mdl_impl_term_kind(mk) == GMM_STACK_BYM2);
        if (needs_graph && !graph)
            return gmm_mdl_impl_formula_error(
                b, t->model_pos, "formula: f(%s, %s) needs graph=EDGES.csv", t->name, t->model);
        if (!needs_graph && graph && mk >= 0)
            return gmm_mdl_impl_formula_error(b, gpos, "formula: f(%s, %s) takes no graph",
                                              t->name, t->model);
        int cyclic;
        double period;
        gmm_stack_term st = {0};
        const char *gc, *rc;
        if ((s = gmm_mdl_impl_term_cyclic(b, t, &cyclic, &period)) != GMM_OK ||
            (s = gmm_mdl_impl_term_group(b, t, &st, &gc, &rc)) != GMM_OK)
            return s;
        nkern += mk < 0 && !graph;
    }
    if (b->s->desc.merge_tol > 0 && nkern == 0)
        return gmm_mdl_impl_usage_error(
            b, GMM_MDL_RULE_MERGE_TOL_NO_KERNEL,
            "merge_tol applies to state-space models: a kernel, or kernel "
            "terms f(NAME, 'KERNEL') of a formula");
    return GMM_OK;
}

/* Parse s->desc.formula into m->fm and fill *d: s with the latent, its column
 * and the response from the formula (fields a model file gave are kept). */
gmm_status gmm_mdl_impl_apply_formula(mdl_build *b, gmm_mdl *m, gmm_mdl_spec *d)
{
    const gmm_mdl_spec *o = b->s;
    gmm_status s;
    *d = *o;
    if (!(m->formula = gmm_strdup(o->desc.formula)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    if ((s = gmm_formula_parse(o->desc.formula, &m->fm)) != GMM_OK)
        return s == GMM_EPARSE ? gmm_mdl_impl_spec_error(b, "formula", o->desc.formula, s) : s;
    if (!(m->formula_rec = record_formula(o->desc.formula, m->fm)))
        return gmm_error(GMM_ENOMEM, "out of memory");
    const gmm_model_desc *od = &o->desc;
    if (!o->values &&
        (od->kernel || od->precision || od->graph || od->data.x || od->data.y || od->data.node))
        return gmm_mdl_impl_usage_error(
            b, GMM_MDL_RULE_FORMULA_REPLACES,
            "a formula replaces the kernel, graph, precision, x, y and node");
    const gmm_formula *fm = m->fm;
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
        return gmm_mdl_impl_formula_error(
            b, gpos, "formula: iid takes no graph (its levels are its nodes)");
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
            char *rec = gmm_mdl_impl_record_path(r->value);
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
