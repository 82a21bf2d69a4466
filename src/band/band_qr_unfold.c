/* band_qr_unfold.c -- reading the fold's tape (band_qr_impl.h, TAPE) and
 * undoing its blocks (UNFOLD): gmm_band_tape_block, gmm_band_chol_rows_unfold,
 * and the unfold the row moments run (band_qr_moments.c). */
#include "gmm/band.h"

#include <stdint.h>

#include "band_qr_impl.h"

gmm_status gmm_band_tape_block_at(const gmm_band_tape *tape, size_t pos, tape_block *tb)
{
    if (!tape || !tape->data || pos + TAPE_HDR > tape->len)
        return gmm_error(GMM_EINVAL, "band_tape: no block at %zu", pos);
    const double *h = tape->data + pos;
    tb->c0 = (size_t)h[0];
    tb->m = (size_t)h[1];
    tb->cend = (size_t)h[2];
    tb->blen = (size_t)h[3];
    tb->nj = (size_t)h[4];
    tb->fill = (size_t)h[5];
    tb->span = (size_t)h[6];
    tb->prev = h[7] < 0.0 ? SIZE_MAX : (size_t)h[7];
    tb->F = h + TAPE_HDR;
    tb->dest = pos + TAPE_HDR + tb->nj * tb->nj;
    tb->body = tb->dest + tb->m;
    tb->next = tb->body + tb->blen;
    if (tb->next > tape->len)
        return gmm_error(GMM_EINVAL, "band_tape: block at %zu is cut short", pos);
    return GMM_OK;
}

gmm_status gmm_band_tape_block(const gmm_band_tape *tape, size_t pos, size_t *c0, size_t *m,
                               size_t *cend, size_t *next, size_t *dest)
{
    tape_block tb = {0};
    gmm_status st = gmm_band_tape_block_at(tape, pos, &tb);
    if (st)
        return st;
    *c0 = tb.c0;
    *m = tb.m;
    *cend = tb.cend;
    *next = tb.next;
    if (dest) {
        const double *d = tape->data + tb.dest;
        for (size_t i = 0; i < tb.m; i++)
            dest[i] = d[i] < 0.0 ? SIZE_MAX : (size_t)d[i];
    }
    return GMM_OK;
}

/* UNFOLD: the block's records from the last to the first, each undone in
 * reverse order (the deposit, the reflection -- H = I - t u u' is its own
 * inverse --, the negation, the swap) on w lanes of the rows of S: R's row j
 * at S + (j - c0) lds, block row i at S + (nR + i) lds. */
/* Lanes 4 NV (NV a constant, unrolled; 0: any w, by groups of 4). */
BAND_INLINE void unfold_nv(const size_t NV, const double *restrict body, size_t blen, size_t c0,
                           size_t nR, double *restrict S, size_t lds, size_t w)
{
    const size_t nv = NV ? NV : w / 4;
    size_t q = blen;
    while (q > 0) {
        const double *rec = body + q - get_u64(body + q - 1);
        tape_rec tr = tape_read(rec);
        q -= tr.len;
        unsigned code = tr.code;
        size_t i0 = tr.i0, i1 = tr.na;
        double *Rj = S + (tr.j - c0) * lds, *Y = S + nR * lds;
        double *p = (code & TAPE_DEPKIND) ? Y + tr.lo * lds : Rj;
        v4d a;
        if (code & TAPE_DEP) { /* block row lo was deposited as R's row j */
            double sg = (code & TAPE_DEPNEG) ? -1.0 : 1.0;
            v4d z = {0.0, 0.0, 0.0, 0.0};
            for (size_t v = 0; v < nv; v++) {
                ld4(&a, Rj + 4 * v);
                a *= sg;
                st4(p + 4 * v, &a);
                st4(Rj + 4 * v, &z);
            }
        }
        if (code & TAPE_REFL) {
            double u0 = rec[2], t = rec[3];
            const double *x = rec + 4 - i0;
            for (size_t v0 = 0; v0 < nv; v0 += 4) {
                size_t nb = NV ? NV : (nv - v0 < 4 ? nv - v0 : 4);
                v4d d[4] = {{0.0}};
                for (size_t i = i0; i < i1; i++)
                    for (size_t v = 0; v < nb; v++) {
                        ld4(&a, Y + i * lds + 4 * (v0 + v));
                        d[v] += x[i] * a;
                    }
                for (size_t v = 0; v < nb; v++) {
                    ld4(&a, p + 4 * (v0 + v));
                    d[v] = (u0 * a + d[v]) * t;
                    a -= d[v] * u0;
                    st4(p + 4 * (v0 + v), &a);
                }
                for (size_t i = i0; i < i1; i++)
                    for (size_t v = 0; v < nb; v++) {
                        double *y = Y + i * lds + 4 * (v0 + v);
                        ld4(&a, y);
                        a -= d[v] * x[i];
                        st4(y, &a);
                    }
                if (NV)
                    break;
            }
        }
        /* the sign and the swap without branches (data-dependent: they
         * would be mispredicted); a swap of p with itself does nothing */
        double sg = (code & TAPE_NEG) ? -1.0 : 1.0;
        double *ys = tr.imax1 ? Y + (tr.imax1 - 1) * lds : p;
        for (size_t v = 0; v < nv; v++) {
            v4d b;
            ld4(&a, p + 4 * v);
            ld4(&b, ys + 4 * v);
            a *= sg;
            st4(p + 4 * v, &b);
            st4(ys + 4 * v, &a);
        }
    }
}

BAND_INLINE void unfold(const double *restrict body, size_t blen, size_t c0, size_t nR,
                        double *restrict S, size_t lds, size_t w)
{
    switch (w) {
    case 4:
        unfold_nv(1, body, blen, c0, nR, S, lds, w);
        break;
    case 8:
        unfold_nv(2, body, blen, c0, nR, S, lds, w);
        break;
    case 12:
        unfold_nv(3, body, blen, c0, nR, S, lds, w);
        break;
    case 16:
        unfold_nv(4, body, blen, c0, nR, S, lds, w);
        break;
    default:
        unfold_nv(0, body, blen, c0, nR, S, lds, w);
    }
}

static void unfold_plain(const double *body, size_t blen, size_t c0, size_t nR, double *S,
                         size_t lds, size_t w)
{
    unfold(body, blen, c0, nR, S, lds, w);
}

#if BAND_AVX2
BAND_TARGET_AVX2 static void unfold_avx2(const double *body, size_t blen, size_t c0, size_t nR,
                                         double *S, size_t lds, size_t w)
{
    unfold(body, blen, c0, nR, S, lds, w);
}
#endif

void gmm_band_tape_unfold(const double *body, size_t blen, size_t c0, size_t nR, double *S,
                          size_t lds, size_t w)
{
#if BAND_AVX2
    if (band_cpu_has_avx2())
        unfold_avx2(body, blen, c0, nR, S, lds, w);
    else
#endif
        unfold_plain(body, blen, c0, nR, S, lds, w);
}

gmm_status gmm_band_chol_rows_unfold(const gmm_band_tape *tape, size_t pos, size_t nR,
                                     double *S, size_t lds, size_t w)
{
    tape_block tb = {0};
    gmm_status st = gmm_band_tape_block_at(tape, pos, &tb);
    if (st)
        return st;
    if (!S || w % 4 != 0 || lds < w || nR < tb.cend - tb.c0)
        return gmm_error(GMM_EDIM, "band_chol_rows_unfold: %zu R rows for columns %zu..%zu, "
                                   "%zu lanes (a multiple of 4) with stride %zu",
                         nR, tb.c0, tb.cend, w, lds);
    gmm_band_tape_unfold(tape->data + tb.body, tb.blen, tb.c0, nR, S, lds, w);
    return GMM_OK;
}
