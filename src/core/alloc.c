/* alloc.c -- allocation wrappers with a count-down failure injector. */
#include "gmm/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static long fail_countdown = -1;

void gmm_alloc_fail_after(long k) { fail_countdown = k; }

/* True when this allocation must fail (injection armed and exhausted). */
static int injected_failure(void)
{
    if (fail_countdown < 0)
        return 0;
    if (fail_countdown == 0)
        return 1;
    fail_countdown--;
    return 0;
}

void *gmm_malloc(size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    size_t bytes = nmemb * size;
    return malloc(bytes ? bytes : 1);
}

void *gmm_calloc(size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    return calloc(nmemb ? nmemb : 1, size ? size : 1);
}

void *gmm_realloc(void *p, size_t nmemb, size_t size)
{
    if (size && nmemb > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    size_t bytes = nmemb * size;
    return realloc(p, bytes ? bytes : 1);
}

void gmm_free(void *p) { free(p); }

char *gmm_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = gmm_malloc(n, 1);
    if (d)
        memcpy(d, s, n);
    return d;
}
