/* draws_origin.c -- the identity of the model that made a draws file, as
 * recorded in its sidecar and compared by the commands that read draws
 * with a model (draws.h).
 *
 * ORIGIN.  In the draws file's sidecar FILE.json:
 *
 *   "origin": {
 *     "model_file": "/abs/m.json" | null,   (null: built without a model file)
 *     "model_digest": "fnv1a64:<16 hex>" | null,   (of the file's bytes)
 *     "likelihood": "poisson", "latent": "state-space" | "graph",
 *     "latent_size": n, "rows": data rows,
 *     "sites_digest": "fnv1a64:...",   (the inputs' bits, or the node labels)
 *     "data_digest": "fnv1a64:...",    (outcomes, exposures, centre)
 *     "parameters": {"NAME": value when fixed, "sampled" when sampled}
 *   } */
#include "gmm/draws.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/alloc.h"

/* FNV-1a, 64 bits (offset basis and prime of the FNV reference). */
void gmm_digest_init(uint64_t *h) { *h = 14695981039346656037ULL; }

void gmm_digest_add(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t x = *h;
    for (size_t i = 0; i < n; i++) {
        x ^= b[i];
        x *= 1099511628211ULL;
    }
    *h = x;
}

void gmm_digest_format(uint64_t h, char *out)
{
    snprintf(out, 25, "fnv1a64:%016llx", (unsigned long long)h);
}

gmm_status gmm_digest_file(const char *path, char *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gmm_error(GMM_EIO, "%s: cannot open: %s", path, strerror(errno));
    uint64_t h;
    gmm_digest_init(&h);
    unsigned char buf[1 << 14];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        gmm_digest_add(&h, buf, k);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return gmm_error(GMM_EIO, "%s: read error", path);
    gmm_digest_format(h, out);
    return GMM_OK;
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

gmm_status gmm_draws_origin_json(const gmm_draws_origin *o, json_t **out)
{
    gmm_status s;
    *out = NULL;
    json_t *r = json_object(), *par = json_object();
    if (!r || !par) {
        json_decref(r);
        json_decref(par);
        return gmm_error(GMM_ENOMEM, "out of memory");
    }
    if ((s = gmm_json_set_new(r, "model_file", str_or_null(o->model_file))) ||
        (s = gmm_json_set_new(r, "model_digest", str_or_null(o->model_digest))) ||
        (s = gmm_json_set_string(r, "likelihood", o->likelihood)) ||
        (s = gmm_json_set_string(r, "latent", o->latent)) ||
        (s = gmm_json_set_new(r, "latent_size", json_integer((json_int_t)o->latent_size))) ||
        (s = gmm_json_set_new(r, "rows", json_integer((json_int_t)o->rows))) ||
        (s = gmm_json_set_string(r, "sites_digest", o->sites_digest)) ||
        (s = gmm_json_set_string(r, "data_digest", o->data_digest))) {
        json_decref(par);
        json_decref(r);
        return s;
    }
    for (size_t k = 0; k < o->nparam; k++) {
        s = o->sampled && o->sampled[k]
                ? gmm_json_set_string(par, o->param_name[k], "sampled")
                : gmm_json_set_number(par, o->param_name[k], o->param_value[k]);
        if (s) {
            json_decref(par);
            json_decref(r);
            return s;
        }
    }
    if ((s = gmm_json_set_new(r, "parameters", par))) {
        json_decref(r);
        return s;
    }
    *out = r;
    return GMM_OK;
}

/* Does `path` exist?  -1 (with the error set) when it cannot be told. */
static int exists(const char *path, gmm_status *s)
{
    FILE *f = fopen(path, "r");
    if (f) {
        fclose(f);
        return 1;
    }
    if (errno == ENOENT || errno == ENOTDIR)
        return 0;
    *s = gmm_error(GMM_EIO, "%s: cannot open: %s", path, strerror(errno));
    return -1;
}

/* Is the JSON file `path` the sidecar of a --format cmdstan set? */
static int is_cmdstan_sidecar(const char *path)
{
    json_t *root = NULL;
    if (gmm_json_read(path, &root) != GMM_OK)
        return 0;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    int yes = fmt && !strcmp(fmt, "cmdstan");
    json_decref(root);
    return yes;
}

gmm_status gmm_draws_sidecar(const char *path, char **side)
{
    *side = NULL;
    if (!path || !strcmp(path, "-"))
        return GMM_OK;
    size_t n = strlen(path);
    char *buf = gmm_malloc(n + 16, 1);
    if (!buf)
        return gmm_error(GMM_ENOMEM, "out of memory");
    gmm_status s = GMM_OK;
    snprintf(buf, n + 16, "%s.json", path);
    int e = exists(buf, &s);
    if (e) {
        if (e > 0)
            *side = buf;
        else
            gmm_free(buf);
        return s;
    }
    /* PREFIX_ID.csv[.partial]: the set's PREFIX.csv.json, PREFIX.json (or
     * .partial.json), as hmc --format cmdstan -o PREFIX.csv or -o PREFIX
     * names them */
    static const char partial[] = ".partial";
    size_t len = n, pl = sizeof partial - 1;
    int cut = len > pl && !strcmp(path + len - pl, partial);
    if (cut)
        len -= pl;
    size_t us = len;
    if (len > 4 && !strncmp(path + len - 4, ".csv", 4)) {
        us = len - 4;
        while (us > 0 && path[us - 1] >= '0' && path[us - 1] <= '9')
            us--;
    }
    if (us == len || us == len - 4 || us == 0 || path[us - 1] != '_') {
        gmm_free(buf);
        return GMM_OK;
    }
    for (int k = 0; k < 2; k++) {
        snprintf(buf, n + 16, "%.*s%s%s.json", (int)(us - 1), path, k ? "" : ".csv",
                 cut ? partial : "");
        if ((e = exists(buf, &s)) < 0)
            break;
        if (e && is_cmdstan_sidecar(buf)) {
            *side = buf;
            return GMM_OK;
        }
    }
    gmm_free(buf);
    return s;
}

gmm_status gmm_draws_origin_read(const char *path, json_t **out)
{
    *out = NULL;
    char *side = NULL;
    gmm_status s = gmm_draws_sidecar(path, &side);
    if (s != GMM_OK || !side)
        return s;
    json_t *root = NULL;
    if ((s = gmm_json_read(side, &root)) != GMM_OK)
        goto done;
    json_t *o = json_object_get(root, "origin");
    if (o && !json_is_object(o)) {
        s = gmm_error(GMM_EPARSE, "%s: \"origin\" is not an object", side);
        goto done;
    }
    if (o)
        *out = json_incref(o);
done:
    json_decref(root);
    gmm_free(side);
    return s;
}

/* "made from m.json (poisson, state-space, 112 latents, 112 rows)" */
static void describe(char *buf, size_t size, const char *file, const char *lik,
                     const char *lat, long long size_, long long rows)
{
    snprintf(buf, size, "%s (%s, %s, %lld latents, %lld rows)",
             file ? file : "model options", lik ? lik : "?", lat ? lat : "?", size_, rows);
}

gmm_status gmm_draws_origin_check(const json_t *rec, const gmm_draws_origin *cur,
                                  int *same_file)
{
    *same_file = 1;
    const char *where = "draws origin";
    const char *lik, *lat, *sites, *data;
    double dsize, drows;
    json_t *par;
    gmm_status s;
    if ((s = gmm_json_get_string(rec, "likelihood", where, &lik)) ||
        (s = gmm_json_get_string(rec, "latent", where, &lat)) ||
        (s = gmm_json_get_number(rec, "latent_size", where, &dsize)) ||
        (s = gmm_json_get_number(rec, "rows", where, &drows)) ||
        (s = gmm_json_get_string(rec, "sites_digest", where, &sites)) ||
        (s = gmm_json_get_string(rec, "data_digest", where, &data)) ||
        (s = gmm_json_get_object(rec, "parameters", where, &par)))
        return s;
    const char *file = json_string_value(json_object_get(rec, "model_file"));
    const char *digest = json_string_value(json_object_get(rec, "model_digest"));
    char was[512], now[512];
    describe(was, sizeof was, file, lik, lat, (long long)dsize, (long long)drows);
    describe(now, sizeof now, cur->model_file, cur->likelihood, cur->latent,
             (long long)cur->latent_size, (long long)cur->rows);
    const char *why = NULL;
    char pbuf[256];
    if (strcmp(lik, cur->likelihood))
        why = "another likelihood";
    else if (strcmp(lat, cur->latent))
        why = "another latent family";
    else if (dsize != (double)cur->latent_size)
        why = "another number of latents";
    else if (drows != (double)cur->rows)
        why = "another number of data rows";
    else if (strcmp(sites, cur->sites_digest))
        why = "other inputs or nodes";
    else if (strcmp(data, cur->data_digest))
        why = "other data";
    else if (json_object_size(par) != cur->nparam)
        why = "other parameters";
    for (size_t k = 0; !why && k < cur->nparam; k++) {
        json_t *v = json_object_get(par, cur->param_name[k]);
        if (!v) {
            snprintf(pbuf, sizeof pbuf, "no parameter '%s'", cur->param_name[k]);
            why = pbuf;
        } else if (json_is_number(v) && json_number_value(v) != cur->param_value[k]) {
            snprintf(pbuf, sizeof pbuf, "%s = %.17g, not %.17g", cur->param_name[k],
                     json_number_value(v), cur->param_value[k]);
            why = pbuf;
        } else if (!json_is_number(v) && !(json_is_string(v) &&
                                           !strcmp(json_string_value(v), "sampled"))) {
            return gmm_error(GMM_EPARSE, "%s: parameter '%s' is neither a number nor "
                                         "\"sampled\"", where, cur->param_name[k]);
        }
    }
    if (why)
        return gmm_error(GMM_EINVAL, "draws of another model (%s): made from %s; this one is %s",
                         why, was, now);
    *same_file = !digest || !cur->model_digest || !strcmp(digest, cur->model_digest);
    return GMM_OK;
}
