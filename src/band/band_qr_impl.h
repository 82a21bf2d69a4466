/* band_qr_impl.h -- private to the square-root fold (band.h section 6) and
 * its reverse: the vectors and buffers the files share, and the tape's format
 * (TAPE), written by the fold (band_qr_fold.c) and read back by the unfold
 * (band_qr_unfold.c) and the row moments (band_qr_moments.c).  Private to
 * src/band/. */
#ifndef GMM_BAND_QR_IMPL_H
#define GMM_BAND_QR_IMPL_H

#include <stdint.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/band.h"
#include "band_simd.h"

/* Whether v[0 .. k) are all finite, branch-free (vectorised by the
 * compiler): an exponent of all ones (infinite or NaN) carries into bit 63
 * when one more unit of the exponent is added. */
static inline int all_finite(const double *v, size_t k)
{
    uint64_t bad = 0;
    for (size_t s = 0; s < k; s++) {
        uint64_t b;
        memcpy(&b, v + s, sizeof b);
        bad |= (b & 0x7ff0000000000000u) + 0x0010000000000000u;
    }
    return !(bad >> 63);
}

/* Work buffers of rows of whole vectors start on a cache line (64 bytes),
 * so that with row strides of whole vectors no vector load splits two
 * lines: one that does costs more than one that does not, and
 * malloc's large blocks start 16 bytes into a page, so the time of the CO2
 * loglik + gradient would otherwise depend on the heap's layout.  Buffers
 * carry ALIGN_SLACK doubles for it. */
#define ALIGN_SLACK 8
static inline double *align_lines(double *p)
{
    uintptr_t a = (uintptr_t)p;
    return (double *)(void *)(p + ((64 - (a & 63)) & 63) / sizeof *p);
}

/* Four lanes of the window at once (GNU C vectors: SSE2 pairs in the
 * baseline copy, AVX2 in the other -- the same operations either way). */
typedef double v4d __attribute__((vector_size(32)));
BAND_INLINE void ld4(v4d *v, const double *p) { memcpy(v, p, sizeof *v); }
BAND_INLINE void st4(double *p, const v4d *v) { memcpy(p, v, sizeof *v); }

/* TAPE (gmm_band_chol_add_rows_tape).  The call appends one block: a header
 * [c0, m, cend, body length, nj, fill, span, prev] (integers as doubles;
 * prev: the position of the block before, -1 for the first; tape->last is
 * this block's), c0 = first[0] and
 * R's rows c0 .. cend - 1 the ones its reflections touched; F_J (nj x nj,
 * row-major, upper triangular): R's rows c0 .. c0 + nj - 1 as the call
 * found them -- J (for ROW MOMENTS), the longest run of rows from c0 that
 * earlier calls had filled with entries inside those columns only; (in the
 * header) fill: R's rows c0 .. c0 + fill - 1 span those that earlier calls
 * had filled within span = 2 (kl + 1) columns (some may be empty);
 * for each of its m rows the R row it was deposited as (-1: reduced to
 * zero); then one record per column j where anything happened:
 *   [j, w, (u0, t, x_i0 .. x_na-1 when reflected), length]
 * j, w and length are 64-bit integers stored in the doubles' bits; w =
 * code | 2^8 lo | 2^24 na | 2^40 (1 + the block row swapped into the pivot,
 * 0 for none), code: TAPE_DEPKIND (the pivot was block row lo -- R's row j
 * empty -- and the rows reflected against it lo + 1 .. na - 1; else R's row
 * j against lo .. na - 1), TAPE_NEG (the pivot negated after the swap),
 * TAPE_REFL, TAPE_DEP (block row lo became R's row j, times -1 with
 * TAPE_DEPNEG).  x are the rows' entries of u (scaled as reflected).  Each
 * record ends with its length, so the replay walks backwards. */
#define TAPE_DEPKIND 1u
#define TAPE_NEG 2u
#define TAPE_REFL 4u
#define TAPE_DEP 8u
#define TAPE_DEPNEG 16u
#define TAPE_MAXROWS 65535u
#define TAPE_HDR 8

static inline void put_u64(double *p, uint64_t v) { memcpy(p, &v, sizeof v); }
static inline uint64_t get_u64(const double *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A record's fields (TAPE). */
typedef struct {
    size_t j, lo, na, i0, imax1, len;
    unsigned code;
} tape_rec;

static inline tape_rec tape_read(const double *rec)
{
    tape_rec t;
    uint64_t w = get_u64(rec + 1);
    t.j = (size_t)get_u64(rec);
    t.code = (unsigned)(w & 0xffu);
    t.lo = (size_t)((w >> 8) & 0xffffu);
    t.na = (size_t)((w >> 24) & 0xffffu);
    t.imax1 = (size_t)((w >> 40) & 0xffffu);
    t.i0 = (t.code & TAPE_DEPKIND) ? t.lo + 1 : t.lo;
    t.len = 3 + ((t.code & TAPE_REFL) ? 2 + t.na - t.i0 : 0);
    return t;
}

/* A growable buffer (the tape's type) with room for need doubles: 0, or 1
 * when it cannot grow (its contents kept either way). */
static inline int grow_buf(gmm_band_tape *b, size_t need)
{
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? 2 * b->cap : 1024;
    while (cap < need)
        cap *= 2;
    double *d = gmm_realloc(b->data, cap, sizeof *d);
    if (!d)
        return 1;
    b->data = d;
    b->cap = cap;
    return 0;
}

/* The block at pos (TAPE): fields, body and trailer positions. */
typedef struct {
    size_t c0, m, cend, nj, fill, span, prev, body, blen, dest, next;
    const double *F;
} tape_block;

/* The block at pos: its fields, or GMM_EINVAL when there is none or it is
 * cut short (band_qr_unfold.c). */
gmm_status gmm_band_tape_block_at(const gmm_band_tape *tape, size_t pos, tape_block *tb);

/* Undo a block's records (body, blen doubles: UNFOLD) on w lanes (a
 * multiple of 4) of the rows of S: R's row j at S + (j - c0) lds, block row
 * i at S + (nR + i) lds.  No validation (band_qr_unfold.c). */
void gmm_band_tape_unfold(const double *body, size_t blen, size_t c0, size_t nR, double *S,
                          size_t lds, size_t w);

#endif
