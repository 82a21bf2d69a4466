/* modelfile.c -- the model JSON through jansson (modelfile.h).
 *
 * THE FORMAT (format_version 1):
 *   {
 *     "format_version": 1,              GMM_FORMAT_VERSION (version.h)
 *     "tool_version": "0.1.0",          GMM_VERSION of the writer
 *     "formula": "y ~ x + f(t, 'matern32')",   optional: the model as a
 *                                       formula (model.h), whose fixed
 *                                       terms and latent kind it gives
 *     "kernel": "matern32(variance=2.5, lengthscale=0.7) + ...",
 *         -- or, for graph models, "precision": "edge-ou(...)"; exactly one
 *         (neither for a formula of several f() terms: the formula says it)
 *     "parameters": {"0.matern32.variance": 2.5, ..., "noise.variance": 0.1},
 *                                       a coefficient not estimated (its
 *                                       design column aliased) is null
 *     "likelihood": "gaussian",
 *     "center": 315.2,                  the mean subtracted from y, or null
 *     "loglik": -1234.5,
 *     "iterations": 42,
 *     "converged": true,
 *     "stop": "newton",                 fit's test at the returned point
 *                                       (gmm_fit_result); optional, not
 *                                       read back
 *     "decrement": 3e-12,               that test's Newton decrement; optional
 *     "boundary": ["f.g.variance"],     parameters whose maximum is at 0;
 *                                       optional, not read back
 *     "varcorr": [{"group": "Subject", "name": "Days", "sd": 5.7,
 *                  "corr": [0.08]}, ...]  lme4's VarCorr of the
 *                                       random-effect terms; optional,
 *                                       not read back
 *     "std_errors": {"intercept": 0.13, "coef.x1": 0.04},  fit's standard
 *                                       errors of the coefficients, from
 *                                       the observed information
 *                                       (gmm_fit_std_errors); optional,
 *                                       not read back
 *     "data": {"file": "data/co2.csv", "x": "decimal_year", "y": "co2_ppm",
 *              "node": null, "exposure": null},
 *         -- and "trials": "n" for a binomial likelihood with trials (absent
 *            otherwise)
 *     "graph": "edges.csv",             graph models only (required with
 *                                       "precision" unless a formula's
 *                                       f(NAME, iid) makes the graph)
 *     "merge_tol": 1e-3,                state-space and kernel terms, > 0
 *     "factor": "sparse",               "band" or "sparse" when the model
 *                                       asked for one (absent: auto)
 *     "edge_cols": ["i", "j", "length"] optional; the last may be null
 *     "elbo": -123.4, "variational": {"file": "m.q.csv", "bandwidth": 3}
 *                                       VI results only
 *   }
 *
 * Reading is tolerant of what it does not know (unknown keys are ignored, so
 * later versions can add keys without breaking older readers of format 1)
 * and strict about what it needs: a missing required key or a key of the
 * wrong type is GMM_EPARSE naming the key and the file; a format_version
 * newer than GMM_FORMAT_VERSION is refused.  Doubles are written with 17
 * significant digits (JSON_REAL_PRECISION(17)), so every value read back is
 * the double that was written.  Parameter order is kept.  JSON goes through
 * jansson via json.h; nothing here prints. */
#include "gmm/modelfile.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/json.h"
#include "gmm/version.h"

void gmm_model_init(gmm_model *m)
{
    memset(m, 0, sizeof *m);
    m->decrement = NAN;
}

const char *gmm_model_factor_name(gmm_model_factor f)
{
    return f == GMM_MODEL_FACTOR_BAND ? "band" : f == GMM_MODEL_FACTOR_SPARSE ? "sparse" : "auto";
}

int gmm_model_factor_parse(const char *name, gmm_model_factor *f)
{
    static const gmm_model_factor all[] = {GMM_MODEL_FACTOR_AUTO, GMM_MODEL_FACTOR_BAND,
                                           GMM_MODEL_FACTOR_SPARSE};
    for (size_t k = 0; name && k < sizeof all / sizeof *all; k++)
        if (!strcmp(name, gmm_model_factor_name(all[k]))) {
            *f = all[k];
            return 0;
        }
    return -1;
}

static const char *shown(const char *name, int out)
{
    if (!name || strcmp(name, "-") == 0)
        return out ? "<stdout>" : "<stdin>";
    return name;
}

/* ---- writing ------------------------------------------------------------ */

/* Adds key: value to obj, taking the reference to value; 0 on failure. */
static int put(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0;
}

static json_t *string_or_null(const char *s) { return s ? json_string(s) : json_null(); }

gmm_status gmm_model_write(const gmm_model *m, FILE *f, const char *name)
{
    const char *file = shown(name, 1);
    json_t *root = NULL, *params = NULL, *data = NULL;
    gmm_status st = GMM_OK;

    if (!m || !f)
        return gmm_error(GMM_EINVAL, "%s: model write: NULL argument", file);
    /* a formula of several f() terms carries its latent itself */
    const gmm_model_desc *d = &m->desc;
    if ((d->kernel && d->precision) || (!d->kernel && !d->precision && !d->formula))
        return gmm_error(GMM_EINVAL, "%s: a model has exactly one of 'kernel' and 'precision'",
                         file);
    if (!m->desc.likelihood)
        return gmm_error(GMM_EINVAL, "%s: model without 'likelihood'", file);
    if (!m->desc.data.file)
        return gmm_error(GMM_EINVAL, "%s: model without 'data.file'", file);
    if (m->desc.precision && !m->desc.graph && !m->desc.formula)
        return gmm_error(GMM_EINVAL, "%s: a graph model needs 'graph'", file);
    if (!isfinite(m->loglik))
        return gmm_error(GMM_EINVAL, "%s: loglik is not finite (%g)", file, m->loglik);
    if (m->has_center && !isfinite(m->center))
        return gmm_error(GMM_EINVAL, "%s: center is not finite (%g)", file, m->center);
    if (m->nparam && (!m->param_name || !m->param_value))
        return gmm_error(GMM_EINVAL, "%s: model parameters missing", file);
    for (size_t i = 0; i < m->nparam; i++) {
        if (!m->param_name[i])
            return gmm_error(GMM_EINVAL, "%s: parameter %zu has no name", file, i);
        if (isinf(m->param_value[i]))
            return gmm_error(GMM_EINVAL, "%s: parameter '%s' is not finite (%g)", file,
                             m->param_name[i], m->param_value[i]);
    }
    if ((m->desc.edge_cols[0] == NULL) != (m->desc.edge_cols[1] == NULL) ||
        (m->desc.edge_cols[2] && !m->desc.edge_cols[0]))
        return gmm_error(GMM_EINVAL, "%s: edge_cols needs both 'i' and 'j'", file);

    root = json_object();
    params = json_object();
    data = json_object();
    int ok = root && params && data;
    ok = ok && put(root, "format_version", json_integer(GMM_FORMAT_VERSION));
    ok = ok && put(root, "tool_version", json_string(GMM_VERSION));
    if (m->desc.formula)
        ok = ok && put(root, "formula", json_string(m->desc.formula));
    if (m->desc.kernel)
        ok = ok && put(root, "kernel", json_string(m->desc.kernel));
    else if (m->desc.precision)
        ok = ok && put(root, "precision", json_string(m->desc.precision));
    for (size_t i = 0; ok && i < m->nparam; i++)
        ok = put(params, m->param_name[i],
                 isnan(m->param_value[i]) ? json_null() : json_real(m->param_value[i]));
    ok = ok && json_object_set(root, "parameters", params) == 0;
    ok = ok && put(root, "likelihood", json_string(m->desc.likelihood));
    ok = ok && put(root, "center", m->has_center ? json_real(m->center) : json_null());
    ok = ok && put(root, "loglik", json_real(m->loglik));
    ok = ok && put(root, "iterations", json_integer((json_int_t)m->iterations));
    ok = ok && put(root, "converged", json_boolean(m->converged));
    if (m->stop)
        ok = ok && put(root, "stop", json_string(m->stop));
    if (!isnan(m->decrement))
        ok = ok && put(root, "decrement", json_real(m->decrement));
    if (m->boundary) {
        json_t *bl = json_array();
        ok = ok && bl;
        for (size_t i = 0; ok && i < m->nparam; i++)
            if (m->boundary[i])
                ok = json_array_append_new(bl, json_string(m->param_name[i])) == 0;
        if (ok)
            ok = put(root, "boundary", bl);
        else
            json_decref(bl);
    }
    if (m->std_error) {
        json_t *se = json_object();
        ok = ok && se;
        for (size_t i = 0; ok && i < m->nparam; i++)
            if (isfinite(m->std_error[i]))
                ok = put(se, m->param_name[i], json_real(m->std_error[i]));
        if (ok)
            ok = put(root, "std_errors", se);
        else
            json_decref(se);
    }
    if (m->nvarcorr) {
        json_t *vc = json_array();
        ok = ok && vc;
        for (size_t i = 0; ok && i < m->nvarcorr; i++) {
            const gmm_model_varcorr *r = &m->varcorr[i];
            json_t *c = json_array(), *row = c ? json_object() : NULL;
            ok = row != NULL;
            for (size_t j = 0; ok && j < r->ncorr; j++)
                ok = json_array_append_new(c, json_real(r->corr[j])) == 0;
            ok = ok && put(row, "group", json_string(r->group)) &&
                 put(row, "name", json_string(r->name)) && put(row, "sd", json_real(r->sd)) &&
                 json_object_set(row, "corr", c) == 0;
            json_decref(c);
            ok = ok && json_array_append_new(vc, row) == 0;
            if (!ok)
                json_decref(row);
        }
        if (ok)
            ok = put(root, "varcorr", vc);
        else
            json_decref(vc);
    }
    ok = ok && put(data, "file", json_string(m->desc.data.file));
    ok = ok && put(data, "x", string_or_null(m->desc.data.x));
    ok = ok && put(data, "y", string_or_null(m->desc.data.y));
    ok = ok && put(data, "node", string_or_null(m->desc.data.node));
    ok = ok && put(data, "exposure", string_or_null(m->desc.data.exposure));
    if (m->desc.data.trials)
        ok = ok && put(data, "trials", json_string(m->desc.data.trials));
    if (m->desc.data.weights)
        ok = ok && put(data, "weights", json_string(m->desc.data.weights));
    ok = ok && json_object_set(root, "data", data) == 0;
    if (m->desc.merge_tol > 0.0)
        ok = ok && put(root, "merge_tol", json_real(m->desc.merge_tol));
    if (m->desc.factor != GMM_MODEL_FACTOR_AUTO)
        ok = ok && put(root, "factor", json_string(gmm_model_factor_name(m->desc.factor)));
    if (m->desc.graph)
        ok = ok && put(root, "graph", json_string(m->desc.graph));
    if (m->has_vi) {
        ok = ok && put(root, "elbo", json_real(m->elbo));
        ok = ok && put(root, "variational",
                       json_pack("{s:s,s:I}", "file", m->vi_file ? m->vi_file : "",
                                 "bandwidth", (json_int_t)m->vi_bandwidth));
    }
    if (m->desc.edge_cols[0])
        ok = ok && put(root, "edge_cols",
                       json_pack("[sso]", m->desc.edge_cols[0], m->desc.edge_cols[1],
                                 m->desc.edge_cols[2] ? json_string(m->desc.edge_cols[2])
                                                      : json_null()));
    if (!ok) {
        /* json_string also fails on invalid UTF-8: say so rather than OOM. */
        st = gmm_error(GMM_EINVAL, "%s: cannot build the model JSON (out of memory, or a "
                                   "name that is not valid UTF-8)",
                       file);
        goto done;
    }
    st = gmm_json_write(f, root, file);
done:
    json_decref(root);
    json_decref(params);
    json_decref(data);
    return st;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct {
    const char *file;
    gmm_status st;
} reader;

/* The first failure sticks; returns 0 so callers can `return fail(...)`. */
static int fail_missing(reader *r, const char *label)
{
    if (r->st == GMM_OK)
        r->st = gmm_error(GMM_EPARSE, "%s: missing key '%s'", r->file, label);
    return 0;
}

static int fail_type(reader *r, const char *label, const char *what)
{
    if (r->st == GMM_OK)
        r->st = gmm_error(GMM_EPARSE, "%s: key '%s' must be %s", r->file, label, what);
    return 0;
}

static int fail_nomem(reader *r)
{
    if (r->st == GMM_OK)
        r->st = gmm_error(GMM_ENOMEM, "%s: out of memory", r->file);
    return 0;
}

/* Required (or optional) string at obj[key] into *out (NULL for null when
 * nullable).  `label` names the key in messages. */
static int get_string(reader *r, json_t *obj, const char *key, const char *label, int required,
                      int nullable, char **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v)
        return required ? fail_missing(r, label) : 1;
    if (json_is_null(v) && nullable)
        return 1;
    if (!json_is_string(v))
        return fail_type(r, label, nullable ? "a string or null" : "a string");
    if (!(*out = gmm_strdup(json_string_value(v))))
        return fail_nomem(r);
    return 1;
}

/* get_string into a description's field. */
static int get_desc_string(reader *r, json_t *obj, const char *key, const char *label,
                           int required, int nullable, const char **out)
{
    char *c;
    int ok = get_string(r, obj, key, label, required, nullable, &c);
    *out = c;
    return ok;
}

static int get_number(reader *r, json_t *obj, const char *key, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return fail_missing(r, key);
    if (!json_is_number(v))
        return fail_type(r, key, "a number");
    *out = json_number_value(v);
    return 1;
}

static gmm_status parse(reader *r, json_t *root, gmm_model *m)
{
    json_t *v;
    if (!json_is_object(root))
        return gmm_error(GMM_EPARSE, "%s: a model file holds a JSON object", r->file);

    v = json_object_get(root, "format_version");
    if (!v)
        return gmm_error(GMM_EPARSE, "%s: missing key 'format_version'", r->file);
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return gmm_error(GMM_EPARSE, "%s: key 'format_version' must be a positive integer",
                         r->file);
    if (json_integer_value(v) > GMM_FORMAT_VERSION)
        return gmm_error(GMM_EPARSE,
                         "%s: format_version %lld is newer than this gmm-infer (%s) reads (%d)",
                         r->file, (long long)json_integer_value(v), GMM_VERSION,
                         GMM_FORMAT_VERSION);
    m->format_version = (int)json_integer_value(v);

    if (!get_string(r, root, "tool_version", "tool_version", 1, 0, &m->tool_version))
        return r->st;
    int has_k = json_object_get(root, "kernel") != NULL;
    int has_p = json_object_get(root, "precision") != NULL;
    if (!has_k && !has_p && !json_object_get(root, "formula"))
        return gmm_error(GMM_EPARSE, "%s: missing key 'kernel' (or 'precision' for a graph "
                                     "model)",
                         r->file);
    if (has_k && has_p)
        return gmm_error(GMM_EPARSE, "%s: a model has 'kernel' or 'precision', not both",
                         r->file);
    if (has_k && !get_desc_string(r, root, "kernel", "kernel", 1, 0, &m->desc.kernel))
        return r->st;
    if (has_p && !get_desc_string(r, root, "precision", "precision", 1, 0, &m->desc.precision))
        return r->st;
    if (!get_desc_string(r, root, "formula", "formula", 0, 0, &m->desc.formula))
        return r->st;

    json_t *params = json_object_get(root, "parameters");
    if (!params)
        return gmm_error(GMM_EPARSE, "%s: missing key 'parameters'", r->file);
    if (!json_is_object(params))
        return gmm_error(GMM_EPARSE, "%s: key 'parameters' must be an object", r->file);
    size_t np = json_object_size(params);
    m->param_name = gmm_calloc(np, sizeof *m->param_name);
    m->param_value = gmm_calloc(np, sizeof *m->param_value);
    if (!m->param_name || !m->param_value)
        return gmm_error(GMM_ENOMEM, "%s: out of memory", r->file);
    const char *key;
    json_object_foreach(params, key, v)
    {
        if (!json_is_number(v) && !json_is_null(v))
            return gmm_error(GMM_EPARSE, "%s: parameter '%s' must be a number or null", r->file,
                             key);
        m->param_value[m->nparam] = json_is_null(v) ? NAN : json_number_value(v);
        if (!(m->param_name[m->nparam] = gmm_strdup(key)))
            return gmm_error(GMM_ENOMEM, "%s: out of memory", r->file);
        m->nparam++;
    }

    if (!get_desc_string(r, root, "likelihood", "likelihood", 1, 0, &m->desc.likelihood))
        return r->st;
    v = json_object_get(root, "center");
    if (!v)
        return gmm_error(GMM_EPARSE, "%s: missing key 'center'", r->file);
    if (json_is_number(v)) {
        m->has_center = 1;
        m->center = json_number_value(v);
    } else if (!json_is_null(v)) {
        return gmm_error(GMM_EPARSE, "%s: key 'center' must be a number or null", r->file);
    }
    if (!get_number(r, root, "loglik", &m->loglik))
        return r->st;
    v = json_object_get(root, "iterations");
    if (!v)
        return gmm_error(GMM_EPARSE, "%s: missing key 'iterations'", r->file);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return gmm_error(GMM_EPARSE, "%s: key 'iterations' must be a non-negative integer",
                         r->file);
    m->iterations = (size_t)json_integer_value(v);
    v = json_object_get(root, "converged");
    if (!v)
        return gmm_error(GMM_EPARSE, "%s: missing key 'converged'", r->file);
    if (!json_is_boolean(v))
        return gmm_error(GMM_EPARSE, "%s: key 'converged' must be true or false", r->file);
    m->converged = json_is_true(v);

    json_t *data = json_object_get(root, "data");
    if (!data)
        return gmm_error(GMM_EPARSE, "%s: missing key 'data'", r->file);
    if (!json_is_object(data))
        return gmm_error(GMM_EPARSE, "%s: key 'data' must be an object", r->file);
    if (!get_desc_string(r, data, "file", "data.file", 1, 0, &m->desc.data.file) ||
        !get_desc_string(r, data, "x", "data.x", 0, 1, &m->desc.data.x) ||
        !get_desc_string(r, data, "y", "data.y", 0, 1, &m->desc.data.y) ||
        !get_desc_string(r, data, "node", "data.node", 0, 1, &m->desc.data.node) ||
        !get_desc_string(r, data, "exposure", "data.exposure", 0, 1, &m->desc.data.exposure) ||
        !get_desc_string(r, data, "trials", "data.trials", 0, 1, &m->desc.data.trials) ||
        !get_desc_string(r, data, "weights", "data.weights", 0, 1, &m->desc.data.weights))
        return r->st;

    v = json_object_get(root, "merge_tol");
    if (v && (!json_is_number(v) || !(json_number_value(v) >= 0.0) ||
              !isfinite(json_number_value(v))))
        return gmm_error(GMM_EPARSE, "%s: key 'merge_tol' must be a non-negative number",
                         r->file);
    m->desc.merge_tol = v ? json_number_value(v) : 0.0;
    v = json_object_get(root, "factor");
    if (v && (!json_is_string(v) || gmm_model_factor_parse(json_string_value(v),
                                                           &m->desc.factor) != 0))
        return gmm_error(GMM_EPARSE, "%s: key 'factor' must be \"auto\", \"band\" or "
                                     "\"sparse\"",
                         r->file);
    if (!get_desc_string(r, root, "graph", "graph",
                         m->desc.precision != NULL && !m->desc.formula, 0,
                    &m->desc.graph))
        return r->st;
    v = json_object_get(root, "variational");
    if (v) {
        json_t *vf = json_object_get(v, "file"), *vb = json_object_get(v, "bandwidth");
        json_t *ve = json_object_get(root, "elbo");
        if (!json_is_object(v) || !json_is_string(vf) || !json_is_integer(vb) ||
            json_integer_value(vb) < 0 || !json_is_number(ve) ||
            !isfinite(json_number_value(ve)))
            return gmm_error(GMM_EPARSE, "%s: key 'variational' must be {\"file\": name, "
                                         "\"bandwidth\": integer} with a finite 'elbo'",
                             r->file);
        m->has_vi = 1;
        m->elbo = json_number_value(ve);
        m->vi_bandwidth = (size_t)json_integer_value(vb);
        if (!(m->vi_file = gmm_strdup(json_string_value(vf))))
            return gmm_error(GMM_ENOMEM, "%s: out of memory", r->file);
    }
    v = json_object_get(root, "edge_cols");
    if (v) {
        if (!json_is_array(v) || json_array_size(v) < 2 || json_array_size(v) > 3)
            return gmm_error(GMM_EPARSE, "%s: key 'edge_cols' must be an array of 2 or 3 "
                                         "column names",
                             r->file);
        for (size_t k = 0; k < json_array_size(v); k++) {
            json_t *e = json_array_get(v, k);
            if (k == 2 && json_is_null(e))
                continue;
            if (!json_is_string(e))
                return gmm_error(GMM_EPARSE, "%s: 'edge_cols' entry %zu must be a string",
                                 r->file, k);
            if (!(m->desc.edge_cols[k] = gmm_strdup(json_string_value(e))))
                return gmm_error(GMM_ENOMEM, "%s: out of memory", r->file);
        }
    }
    return GMM_OK;
}

gmm_status gmm_model_read(const char *path, gmm_model *m)
{
    reader r = {shown(path, 0), GMM_OK};
    json_t *root = NULL;
    gmm_status st;

    if (!m)
        return gmm_error(GMM_EINVAL, "model read: NULL model");
    gmm_model_init(m);
    if (!path)
        return gmm_error(GMM_EINVAL, "model read: NULL path");
    if ((st = gmm_json_read(path, &root)) != GMM_OK)
        return st;
    st = parse(&r, root, m);
    json_decref(root);
    if (st != GMM_OK)
        gmm_model_free(m);
    return st;
}

void gmm_model_free(gmm_model *m)
{
    if (!m)
        return;
    gmm_free(m->tool_version);
    gmm_free((void *)m->desc.formula);
    gmm_free((void *)m->desc.kernel);
    gmm_free((void *)m->desc.precision);
    for (size_t i = 0; i < m->nparam; i++)
        gmm_free(m->param_name[i]);
    gmm_free(m->param_name);
    gmm_free(m->param_value);
    gmm_free((void *)m->desc.likelihood);
    gmm_free((void *)m->desc.data.file);
    gmm_free((void *)m->desc.data.x);
    gmm_free((void *)m->desc.data.y);
    gmm_free((void *)m->desc.data.node);
    gmm_free((void *)m->desc.data.exposure);
    gmm_free((void *)m->desc.data.trials);
    gmm_free((void *)m->desc.data.weights);
    gmm_free((void *)m->desc.graph);
    gmm_free(m->vi_file);
    for (int k = 0; k < 3; k++)
        gmm_free((void *)m->desc.edge_cols[k]);
    gmm_model_init(m);
}

gmm_status gmm_model_save(const gmm_model *m, const char *path)
{
    gmm_outfile *o = NULL;
    gmm_status st = gmm_outfile_open(path, &o);
    if (st != GMM_OK)
        return st;
    if ((st = gmm_model_write(m, gmm_outfile_stream(o), path)) != GMM_OK) {
        gmm_outfile_abort(o);
        return st;
    }
    return gmm_outfile_commit(o);
}

gmm_status gmm_model_param_index(const gmm_model *m, const char *name, size_t *index)
{
    for (size_t i = 0; i < m->nparam; i++)
        if (strcmp(m->param_name[i], name) == 0) {
            *index = i;
            return GMM_OK;
        }
    return gmm_error(GMM_EPARSE, "model: no parameter '%s'", name);
}
