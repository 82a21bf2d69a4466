/* json.c -- JSON files through jansson: exact doubles, located errors. */
#include "gmm/json.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* 17 significant digits round-trip every double (IEEE 754-2008, 5.12.2). */
#define DUMP_FLAGS (JSON_INDENT(2) | JSON_REAL_PRECISION(17) | JSON_PRESERVE_ORDER)

gmm_status gmm_json_write(FILE *f, const json_t *root, const char *name)
{
    if (!f || !root)
        return gmm_error(GMM_EINVAL, "gmm_json_write: NULL argument");
    if (!name)
        name = "<output>";
    errno = 0;
    if (json_dumpf(root, f, DUMP_FLAGS) != 0 || fputc('\n', f) == EOF || ferror(f)) {
        if (ferror(f) || errno)
            return gmm_error(GMM_EIO, "%s: write error: %s", name,
                             strerror(errno ? errno : EIO));
        return gmm_error(GMM_EIO, "%s: JSON encoding failed", name);
    }
    return GMM_OK;
}

gmm_status gmm_json_read(const char *path, json_t **out)
{
    if (!path || !out)
        return gmm_error(GMM_EINVAL, "gmm_json_read: NULL argument");
    *out = NULL;
    int use_stdin = !strcmp(path, "-");
    const char *name = use_stdin ? "<stdin>" : path;
    /* Opened here rather than by json_load_file so that "cannot open" is
     * GMM_EIO with errno's text, distinct from malformed content. */
    FILE *f = use_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return gmm_error(GMM_EIO, "%s: cannot open: %s", name, strerror(errno));
    json_error_t err;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    int read_failed = ferror(f);
    if (!use_stdin)
        fclose(f);
    if (!root) {
        if (read_failed)
            return gmm_error(GMM_EIO, "%s: read error", name);
        if (json_error_code(&err) == json_error_out_of_memory)
            return gmm_error(GMM_ENOMEM, "%s: out of memory reading JSON", name);
        if (err.line >= 1)
            return gmm_error(GMM_EPARSE, "%s:%d:%d: %s", name, err.line, err.column, err.text);
        return gmm_error(GMM_EPARSE, "%s: %s", name, err.text);
    }
    *out = root;
    return GMM_OK;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a JSON value";
}

/* Member key of obj, or GMM_EPARSE naming what is missing. */
static gmm_status member(const json_t *obj, const char *key, const char *where, json_t **v)
{
    if (!where)
        where = "JSON";
    if (!obj || !key)
        return gmm_error(GMM_EINVAL, "%s: NULL argument looking up a key", where);
    if (!json_is_object(obj))
        return gmm_error(GMM_EPARSE, "%s: is %s, expected an object (looking for key '%s')",
                         where, type_name(obj), key);
    *v = json_object_get(obj, key);
    if (!*v)
        return gmm_error(GMM_EPARSE, "%s: key '%s' missing", where, key);
    return GMM_OK;
}

static gmm_status mistyped(const char *where, const char *key, const json_t *v,
                           const char *want)
{
    return gmm_error(GMM_EPARSE, "%s: key '%s' is %s, expected %s", where ? where : "JSON", key,
                     type_name(v), want);
}

gmm_status gmm_json_get_number(const json_t *obj, const char *key, const char *where,
                               double *x)
{
    json_t *v = NULL;
    gmm_status st = member(obj, key, where, &v);
    if (st != GMM_OK)
        return st;
    if (!json_is_number(v))
        return mistyped(where, key, v, "a number");
    *x = json_number_value(v);
    return GMM_OK;
}

gmm_status gmm_json_get_string(const json_t *obj, const char *key, const char *where,
                               const char **s)
{
    json_t *v = NULL;
    gmm_status st = member(obj, key, where, &v);
    if (st != GMM_OK)
        return st;
    if (!json_is_string(v))
        return mistyped(where, key, v, "a string");
    *s = json_string_value(v);
    return GMM_OK;
}

gmm_status gmm_json_get_bool(const json_t *obj, const char *key, const char *where, int *b)
{
    json_t *v = NULL;
    gmm_status st = member(obj, key, where, &v);
    if (st != GMM_OK)
        return st;
    if (!json_is_boolean(v))
        return mistyped(where, key, v, "a boolean");
    *b = json_is_true(v);
    return GMM_OK;
}

gmm_status gmm_json_get_object(const json_t *obj, const char *key, const char *where,
                               json_t **m)
{
    json_t *v = NULL;
    gmm_status st = member(obj, key, where, &v);
    if (st != GMM_OK)
        return st;
    if (!json_is_object(v))
        return mistyped(where, key, v, "an object");
    *m = v;
    return GMM_OK;
}

gmm_status gmm_json_get_array(const json_t *obj, const char *key, const char *where,
                              json_t **m)
{
    json_t *v = NULL;
    gmm_status st = member(obj, key, where, &v);
    if (st != GMM_OK)
        return st;
    if (!json_is_array(v))
        return mistyped(where, key, v, "an array");
    *m = v;
    return GMM_OK;
}

gmm_status gmm_json_get_numbers(const json_t *arr, size_t n, const char *where, double *x)
{
    if (!where)
        where = "JSON";
    if (!arr || (n && !x))
        return gmm_error(GMM_EINVAL, "%s: NULL argument reading numbers", where);
    if (!json_is_array(arr))
        return gmm_error(GMM_EPARSE, "%s: is %s, expected an array of %zu numbers", where,
                         type_name(arr), n);
    if (json_array_size(arr) != n)
        return gmm_error(GMM_EPARSE, "%s: has %zu elements, expected %zu", where,
                         json_array_size(arr), n);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_number(v))
            return gmm_error_at(GMM_EPARSE, i, "%s[%zu] is %s, expected a number", where, i,
                                type_name(v));
        x[i] = json_number_value(v);
    }
    return GMM_OK;
}

gmm_status gmm_json_set_new(json_t *obj, const char *key, json_t *value)
{
    if (!obj || !key || !json_is_object(obj)) {
        json_decref(value);
        return gmm_error(GMM_EINVAL, "gmm_json_set: not an object or NULL key");
    }
    if (!value)
        return gmm_error(GMM_ENOMEM, "out of memory setting JSON key '%s'", key);
    /* json_object_set_new steals value even when it fails. */
    if (json_object_set_new(obj, key, value) != 0)
        return gmm_error(GMM_ENOMEM, "cannot set JSON key '%s' (out of memory or bad UTF-8)",
                         key);
    return GMM_OK;
}

gmm_status gmm_json_set_number(json_t *obj, const char *key, double x)
{
    if (!isfinite(x))
        return gmm_error(GMM_EDOM, "JSON key '%s': %g is not finite (JSON has no NaN/Inf)",
                         key ? key : "?", x);
    return gmm_json_set_new(obj, key, json_real(x));
}

gmm_status gmm_json_set_string(json_t *obj, const char *key, const char *s)
{
    if (!s)
        return gmm_error(GMM_EINVAL, "JSON key '%s': NULL string", key ? key : "?");
    json_t *v = json_string(s);
    if (!v)
        return gmm_error(GMM_EINVAL, "JSON key '%s': string is not valid UTF-8 (or out of "
                         "memory)", key ? key : "?");
    return gmm_json_set_new(obj, key, v);
}

gmm_status gmm_json_set_bool(json_t *obj, const char *key, int b)
{
    return gmm_json_set_new(obj, key, json_boolean(b));
}

json_t *gmm_json_numbers(const double *x, size_t n)
{
    if (n && !x) {
        gmm_error(GMM_EINVAL, "gmm_json_numbers: NULL array");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            gmm_error_at(GMM_EDOM, i, "element %zu is %g: JSON has no NaN/Inf", i, x[i]);
            return NULL;
        }
    json_t *a = json_array();
    if (!a)
        goto oom;
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(a, json_real(x[i])) != 0)
            goto oom;
    return a;
oom:
    json_decref(a);
    gmm_error(GMM_ENOMEM, "out of memory building a JSON array");
    return NULL;
}
