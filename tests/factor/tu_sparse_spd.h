/* tu_sparse_spd.h -- sparse SPD test matrices for the sparse factor's
 * suites (test_factor_sparse.c, test_factor_sparse_rev.c): a 2-D grid
 * Laplacian, a crossed bipartite pattern (students x lecturers: two
 * diagonal blocks joined by the pairs that met, as H^T H of a crossed
 * random-effects design), and a random pattern; each with a dense copy.
 * Values: off-diagonals -U(0.2, 1), the diagonal its row's absolute sum
 * plus U(0.5, 1.5), so Q is diagonally dominant (condition ~ 10-100) and
 * every tolerance below rests on a well-conditioned matrix.  Inputs from a
 * seeded generator; nothing random reaches an assertion. */
#ifndef TU_SPARSE_SPD_H
#define TU_SPARSE_SPD_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/sparse.h"
#include "support/testutil.h"

typedef struct {
    gmm_sparse *A; /* lower triangle by columns */
    double *D;     /* n x n dense, both triangles */
    size_t n;
    const char *what;
} tu_spd;

enum { TU_GRID, TU_CROSSED, TU_RANDOM };

/* Values on A's pattern as above, mirrored into D. */
static inline void tu_spd_values(tu_spd *m, tu_rng *r)
{
    gmm_sparse *A = m->A;
    size_t n = A->n;
    double *rowsum = calloc(n ? n : 1, sizeof *rowsum);
    memset(m->D, 0, n * n * sizeof *m->D);
    for (size_t j = 0; j < n; j++)
        for (size_t p = A->colptr[j] + 1; p < A->colptr[j + 1]; p++) {
            size_t i = A->rowind[p];
            double v = -(0.2 + 0.8 * tu_uniform(r));
            A->val[p] = v;
            m->D[i + n * j] = m->D[j + n * i] = v;
            rowsum[i] -= v;
            rowsum[j] -= v;
        }
    for (size_t j = 0; j < n; j++) {
        double v = rowsum[j] + 0.5 + tu_uniform(r);
        A->val[A->colptr[j]] = v;
        m->D[j + n * j] = v;
    }
    free(rowsum);
}

/* kind TU_GRID: a k x k grid (n = k^2); TU_CROSSED: k students, k/2
 * lecturers, each student meeting 4 lecturers; TU_RANDOM: n = k, 3k random
 * pairs. */
static inline tu_spd tu_spd_make(int kind, size_t k, tu_rng *r)
{
    tu_spd m = {0};
    size_t n = 0, cnt = 0, cap = 0;
    size_t *ei = NULL, *ej = NULL;
    if (kind == TU_GRID) {
        n = k * k;
        cap = 2 * n;
        m.what = "grid";
    } else if (kind == TU_CROSSED) {
        n = k + k / 2;
        cap = 4 * k;
        m.what = "crossed";
    } else {
        n = k;
        cap = 3 * k;
        m.what = "random";
    }
    ei = malloc(cap * sizeof *ei);
    ej = malloc(cap * sizeof *ej);
    if (kind == TU_GRID) {
        for (size_t a = 0; a < k; a++)
            for (size_t b = 0; b < k; b++) {
                if (a + 1 < k) {
                    ei[cnt] = a * k + b;
                    ej[cnt++] = (a + 1) * k + b;
                }
                if (b + 1 < k) {
                    ei[cnt] = a * k + b;
                    ej[cnt++] = a * k + b + 1;
                }
            }
    } else if (kind == TU_CROSSED) {
        size_t nl = k / 2;
        for (size_t s = 0; s < k; s++)
            for (size_t t = 0; t < 4; t++) {
                ei[cnt] = s;
                ej[cnt++] = k + (size_t)(tu_uniform(r) * (double)nl);
            }
    } else {
        for (size_t t = 0; t < cap; t++) {
            ei[cnt] = (size_t)(tu_uniform(r) * (double)n);
            ej[cnt++] = (size_t)(tu_uniform(r) * (double)n);
        }
    }
    ck_assert_int_eq(gmm_sparse_from_entries(n, cnt, ei, ej, &m.A), GMM_OK);
    m.n = n;
    m.D = malloc(n * n * sizeof *m.D);
    tu_spd_values(&m, r);
    free(ei);
    free(ej);
    return m;
}

static inline void tu_spd_free(tu_spd *m)
{
    gmm_sparse_free(m->A);
    free(m->D);
}

/* The lower bandwidth of A in its own order. */
static inline size_t tu_spd_bandwidth(const gmm_sparse *A)
{
    size_t kl = 0;
    for (size_t j = 0; j < A->n; j++) {
        size_t last = A->rowind[A->colptr[j + 1] - 1];
        kl = last - j > kl ? last - j : kl;
    }
    return kl;
}

#endif
