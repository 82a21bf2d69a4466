/* fuzz_spec.c -- the kernel/precision spec parser (gmm_spec_parse) and the
 * kernel layer on its tree: any text is a tree or a GMM_EPARSE whose index
 * lies within the text, never a crash.  A parsed tree formats (%.17g) to
 * text that parses back to the same tree shape and formats identically;
 * the caret line is drawn for every error.  Trees the kernel table accepts
 * are built and formatted too. */
#include <string.h>

#include "fuzz.h"
#include "gmm/alloc.h"
#include "gmm/kernel.h"
#include "gmm/spec.h"

/* gmm_spec_format into a new buffer (NULL when out of memory). */
static char *format(const gmm_spec_node *n)
{
    size_t need = gmm_spec_format(n, 0, NULL, NULL, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf)
        return NULL;
    size_t again = gmm_spec_format(n, 0, NULL, NULL, buf, need + 1);
    fuzz_require(again == need && strlen(buf) == need);
    return buf;
}

static void check_kernel(const gmm_spec_node *n)
{
    gmm_kernel *k = NULL;
    gmm_status st = gmm_kernel_from_spec(n, &k);
    fuzz_require(st == GMM_OK || st == GMM_EPARSE || st == GMM_ENOMEM);
    if (st != GMM_OK) {
        fuzz_require(!k);
        return;
    }
    fuzz_require(gmm_kernel_nleaves(k) == gmm_spec_nleaves(n));
    fuzz_require(gmm_kernel_dim(k) >= 1);
    for (size_t i = 0; i < gmm_kernel_nparam(k); i++) {
        size_t j = (size_t)-1;
        const char *name = gmm_kernel_param_name(k, i);
        fuzz_require(name && gmm_kernel_param_find(k, name, &j) == GMM_OK && j == i);
    }
    size_t need = gmm_kernel_format(k, NULL, NULL, 0);
    char *buf = malloc(need + 1);
    if (buf) {
        fuzz_require(gmm_kernel_format(k, NULL, buf, need + 1) == need);
        free(buf);
    }
    gmm_kernel_free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t len = strlen(text);  /* a NUL in the input ends the spec */

    gmm_spec_node *n = NULL;
    gmm_status st = gmm_spec_parse(text, &n);
    fuzz_require(st == GMM_OK || st == GMM_EPARSE || st == GMM_ENOMEM);
    size_t caret_size = 2 * len + 8;
    char *caret = malloc(caret_size);
    if (st != GMM_OK) {
        fuzz_require(!n);
        if (st == GMM_EPARSE)
            fuzz_require(gmm_error_index() <= len);
        if (caret)
            gmm_spec_caret(text, gmm_error_index(), caret, caret_size);
    } else {
        fuzz_require(n && gmm_spec_nleaves(n) >= 1);
        if (caret)
            gmm_spec_caret(text, len, caret, caret_size);
        char *once = format(n);
        if (once) {
            gmm_spec_node *m = NULL;
            st = gmm_spec_parse(once, &m);
            fuzz_require(st == GMM_OK || st == GMM_ENOMEM);
            if (st == GMM_OK) {
                fuzz_require(gmm_spec_nleaves(m) == gmm_spec_nleaves(n));
                char *twice = format(m);
                fuzz_require(!twice || !strcmp(once, twice));
                free(twice);
                gmm_spec_free(m);
            }
            free(once);
        }
        check_kernel(n);
    }
    free(caret);
    gmm_spec_free(n);
    free(text);
    return 0;
}
