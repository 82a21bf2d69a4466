/* json.h -- the little JSON layer model files and summaries need, over
 * jansson: exact round trips of doubles and getters whose errors name the
 * key and the place.
 */
#ifndef GMM_JSON_H
#define GMM_JSON_H

#include <jansson.h>
#include <stdio.h>

#include "gmm/status.h"

/* Doubles round-trip exactly: written with 17 significant digits (enough
 * for every binary64 value, so strtod gives back the same bits, -0.0 and
 * subnormals included) and read with jansson's strtod.  jansson swaps the
 * locale's decimal point itself, so output is "C"-locale JSON whatever
 * LC_NUMERIC is.  Object keys are written in insertion order (jansson >= 2.8
 * always preserves it; JSON_PRESERVE_ORDER is a no-op kept for old
 * versions).
 *
 * Getters return borrowed references and GMM_EPARSE naming the key and the
 * place ("model.json: key 'parameters' missing"); `where` is that place, a
 * file name or a path inside it such as "model.json: kernel". */

/* Write `root` to f, indented by 2, with a final newline.  GMM_EIO when the
 * stream fails ("NAME: write error: <strerror>", `name` being the file's
 * name for messages) or jansson cannot encode root.  Does not
 * close or flush-to-disk f: use a gmm_outfile for that.  O(size). */
gmm_status gmm_json_write(FILE *f, const json_t *root, const char *name);

/* Read a whole JSON file ("-" = stdin) into *out (a new reference: the
 * caller json_decref()s it).  GMM_EIO when the file cannot be opened
 * ("FILE: cannot open: No such file or directory"), GMM_EPARSE for bad JSON
 * ("FILE:LINE:COLUMN: <jansson's reason>"), duplicated keys included. */
gmm_status gmm_json_read(const char *path, json_t **out);

/* Member `key` of object `obj`.  Missing key or wrong type -> GMM_EPARSE
 * ("WHERE: key 'k' missing", "WHERE: key 'k' is a string, expected a
 * number"); obj not an object -> GMM_EPARSE too.  Numbers accept JSON
 * integers and reals.  Returned pointers are borrowed from obj. */
gmm_status gmm_json_get_number(const json_t *obj, const char *key, const char *where,
                               double *x);
gmm_status gmm_json_get_string(const json_t *obj, const char *key, const char *where,
                               const char **s);
gmm_status gmm_json_get_bool(const json_t *obj, const char *key, const char *where, int *b);
gmm_status gmm_json_get_object(const json_t *obj, const char *key, const char *where,
                               json_t **member);
gmm_status gmm_json_get_array(const json_t *obj, const char *key, const char *where,
                              json_t **member);
/* Array `arr` of exactly n numbers into x[0..n).  GMM_EPARSE naming the
 * element ("WHERE[3] is a string, expected a number") or the length. */
gmm_status gmm_json_get_numbers(const json_t *arr, size_t n, const char *where, double *x);

/* Set member `key` of obj (replacing any old value; a new key goes last).
 * A non-finite number is GMM_EDOM (JSON has no NaN/Inf); allocation failure
 * GMM_ENOMEM.  gmm_json_set_new steals `value` (even on failure). */
gmm_status gmm_json_set_number(json_t *obj, const char *key, double x);
gmm_status gmm_json_set_string(json_t *obj, const char *key, const char *s);
gmm_status gmm_json_set_bool(json_t *obj, const char *key, int b);
gmm_status gmm_json_set_new(json_t *obj, const char *key, json_t *value);
/* A new array of the n numbers x (caller owns it), or NULL with GMM_EDOM /
 * GMM_ENOMEM recorded. */
json_t *gmm_json_numbers(const double *x, size_t n);

#endif
