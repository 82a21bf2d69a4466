/* table.c -- CSV files into a named-column table of strings (libcsv).
 *
 * Line numbers.  libcsv reports fields and rows but not where they were, so
 * the reader feeds it the input in pieces that end at every CR or LF and
 * counts line breaks itself ("\n", "\r\n" and a lone "\r" each end a line).
 * A row can only end on a CR or LF outside quotes, i.e. at the end of a
 * piece, so after each piece we know whether a row has just ended; the first
 * byte after that which libcsv does not skip (it skips blanks, tabs, CR and
 * LF between rows) is where the next row starts, and its line is the row's
 * line even if a quoted field later spans several lines.
 *
 * Storage.  All cell and header text lives in one growing arena; while
 * reading, cells are remembered as offsets into it (the arena moves when it
 * grows) and turned into pointers once at the end.  So a table costs a
 * handful of allocations whatever its size, and every cell is
 * NUL-terminated.
 */
#include "gmm/io.h"

#include <csv.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"

#define READ_CHUNK 65536

/* What gmm_table_free releases: the public table plus the storage its
 * pointers lead into. */
typedef struct {
    gmm_table pub;
    char *arena;
    char **cellptr;  /* nrow*ncol pointers; pub.cell[r] = cellptr + r*ncol */
} table_impl;

/* Reader state shared with the libcsv callbacks. */
typedef struct {
    const char *file;
    gmm_status status;   /* first failure inside a callback */
    size_t line;         /* line of the byte being fed (1-based) */
    size_t row_line;     /* line where the current row started */
    int row_pending;     /* a row has ended; the next one has not started */
    int prev_cr;         /* last byte fed was CR (so a following LF is not a new line) */
    size_t col0;         /* bytes of the current line fed before this piece */

    char *arena;
    size_t arena_len, arena_cap;
    size_t *off;         /* cell offsets into arena, row-major, header first */
    size_t noff, off_cap;
    size_t *lines;       /* line of each data row */
    size_t lines_cap;

    size_t ncol;         /* 0 until the header row is complete */
    size_t nfield;       /* fields in the current row so far */
    size_t nrow;         /* data rows complete */
} reader;

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = gmm_realloc(p, c, size);
    if (q)
        *cap = c;
    return q;
}

static void on_field(void *data, size_t len, void *vr)
{
    reader *r = vr;
    if (r->status != GMM_OK)
        return;
    if (r->ncol && r->nfield >= r->ncol) {
        r->nfield++;  /* counted for the ragged-row message; not stored */
        return;
    }
    char *a = grow(r->arena, &r->arena_cap, r->arena_len + len + 1, 1);
    size_t *o = a ? grow(r->off, &r->off_cap, r->noff + 1, sizeof *o) : NULL;
    if (a)
        r->arena = a;
    if (o)
        r->off = o;
    if (!a || !o) {
        r->status = gmm_error(GMM_ENOMEM, "%s: out of memory reading the table", r->file);
        return;
    }
    if (len)
        memcpy(r->arena + r->arena_len, data, len);
    r->arena[r->arena_len + len] = '\0';
    r->off[r->noff++] = r->arena_len;
    r->arena_len += len + 1;
    r->nfield++;
}

static gmm_status check_header(reader *r)
{
    const char *h0 = r->arena;
    for (size_t c = 0; c < r->ncol; c++) {
        const char *hc = h0 + r->off[c];
        if (!*hc)
            return gmm_error(GMM_EPARSE, "%s:%zu: column %zu has an empty name", r->file,
                             r->row_line, c + 1);
        for (size_t k = 0; k < c; k++)
            if (!strcmp(hc, h0 + r->off[k]))
                return gmm_error(GMM_EPARSE,
                                 "%s:%zu: duplicated column name '%s' (columns %zu and %zu)",
                                 r->file, r->row_line, hc, k + 1, c + 1);
    }
    return GMM_OK;
}

static void on_row(int term, void *vr)
{
    (void)term;
    reader *r = vr;
    if (r->status != GMM_OK)
        return;
    r->row_pending = 1;
    if (!r->ncol) {
        r->ncol = r->nfield;
        r->nfield = 0;
        r->status = check_header(r);
        return;
    }
    if (r->nfield != r->ncol) {
        r->status = gmm_error_at(GMM_EPARSE, r->nrow, "%s:%zu: expected %zu fields, found %zu",
                                 r->file, r->row_line, r->ncol, r->nfield);
        return;
    }
    size_t *l = grow(r->lines, &r->lines_cap, r->nrow + 1, sizeof *l);
    if (!l) {
        r->status = gmm_error(GMM_ENOMEM, "%s: out of memory reading the table", r->file);
        return;
    }
    r->lines = l;
    r->lines[r->nrow++] = r->row_line;
    r->nfield = 0;
}

/* Before libcsv sees piece s[0..len): note where a pending row starts. */
static void scan_row_start(reader *r, const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len && r->row_pending; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') {
            r->row_pending = 0;
            r->row_line = r->line;
        }
}

/* Feed buf[0..len) in pieces ending at each CR/LF, keeping r->line and
 * r->col0 right.  Returns nonzero on a libcsv error, with *bad the 1-based
 * column of the offending byte on line r->line. */
static int feed(reader *r, struct csv_parser *p, const unsigned char *buf, size_t len,
                size_t *bad)
{
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && buf[j] != '\n' && buf[j] != '\r')
            j++;
        size_t end = j < len ? j + 1 : len;  /* the piece includes its CR/LF */
        scan_row_start(r, buf + i, end - i);
        size_t got = csv_parse(p, buf + i, end - i, on_field, on_row, r);
        if (got != end - i) {
            *bad = r->col0 + got + 1;
            return 1;
        }
        if (r->status != GMM_OK)
            return 0;
        unsigned char last = buf[end - 1];
        if (last == '\r' || last == '\n') {
            /* The LF of a CRLF pair ends no further line. */
            if (!(last == '\n' && r->prev_cr && end - i == 1))
                r->line++;
            r->col0 = 0;
        } else {
            r->col0 += end - i;
        }
        r->prev_cr = last == '\r';
        i = end;
    }
    return 0;
}

static void reader_free(reader *r)
{
    gmm_free(r->arena);
    gmm_free(r->off);
    gmm_free(r->lines);
}

static void *csv_realloc_fn(void *p, size_t n) { return gmm_realloc(p, n, 1); }

/* Turn the reader's offsets into the public table (takes over r's arena). */
static gmm_status build_table(reader *r, const char *name, gmm_table **out)
{
    gmm_status st = GMM_OK;
    table_impl *t = gmm_calloc(1, sizeof *t);
    if (!t)
        return gmm_error(GMM_ENOMEM, "%s: out of memory reading the table", name);
    t->pub.file = gmm_malloc(strlen(name) + 1, 1);
    t->pub.header = gmm_malloc(r->ncol, sizeof(char *));
    t->pub.cell = gmm_malloc(r->nrow, sizeof(char **));
    t->pub.line = gmm_malloc(r->nrow, sizeof(size_t));
    t->cellptr = gmm_malloc(r->nrow * r->ncol, sizeof(char *));
    if (!t->pub.file || !t->pub.header || !t->pub.cell || !t->pub.line || !t->cellptr) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory reading the table", name);
        goto done;
    }
    strcpy(t->pub.file, name);
    t->pub.ncol = r->ncol;
    t->pub.nrow = r->nrow;
    t->arena = r->arena;
    r->arena = NULL;
    for (size_t c = 0; c < r->ncol; c++)
        t->pub.header[c] = t->arena + r->off[c];
    for (size_t k = 0; k < r->nrow * r->ncol; k++)
        t->cellptr[k] = t->arena + r->off[r->ncol + k];
    for (size_t i = 0; i < r->nrow; i++) {
        t->pub.cell[i] = t->cellptr + i * r->ncol;
        t->pub.line[i] = r->lines[i];
    }
done:
    if (st != GMM_OK) {
        gmm_table_free(&t->pub);
        return st;
    }
    *out = &t->pub;
    return GMM_OK;
}

gmm_status gmm_table_read(const char *path, gmm_table **out)
{
    if (!path || !out)
        return gmm_error(GMM_EINVAL, "gmm_table_read: NULL argument");
    *out = NULL;
    int use_stdin = !strcmp(path, "-");
    const char *name = use_stdin ? "<stdin>" : path;
    gmm_status st = GMM_OK;
    unsigned char *buf = NULL;
    int parser_ready = 0;
    struct csv_parser p;
    reader r;
    memset(&r, 0, sizeof r);
    r.file = name;
    r.line = 1;
    r.row_pending = 1;

    FILE *f = use_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return gmm_error(GMM_EIO, "%s: cannot open: %s", name, strerror(errno));
    buf = gmm_malloc(READ_CHUNK, 1);
    if (!buf) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory reading the table", name);
        goto done;
    }
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory reading the table", name);
        goto done;
    }
    parser_ready = 1;
    csv_set_realloc_func(&p, csv_realloc_fn);
    csv_set_free_func(&p, gmm_free);

    int first = 1;
    for (;;) {
        size_t n = fread(buf, 1, READ_CHUNK, f);
        if (n == 0 && ferror(f)) {
            st = gmm_error(GMM_EIO, "%s:%zu: read error: %s", name, r.line, strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        size_t skip = 0;
        /* A UTF-8 byte-order mark (spreadsheet exports) is not part of the
         * first header name. */
        if (first && n >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF)
            skip = 3;
        first = 0;
        size_t bad = 0;
        if (feed(&r, &p, buf + skip, n - skip, &bad)) {
            if (csv_error(&p) == CSV_EPARSE)
                st = gmm_error(GMM_EPARSE, "%s:%zu:%zu: malformed quoting (a '\"' must open "
                               "a field or be doubled inside a quoted field)",
                               name, r.line, bad);
            else
                st = gmm_error(GMM_ENOMEM, "%s: out of memory reading the table", name);
            goto done;
        }
        if (r.status != GMM_OK) {
            st = r.status;
            goto done;
        }
    }
    if (csv_fini(&p, on_field, on_row, &r) != 0) {
        if (csv_error(&p) == CSV_EPARSE)
            st = gmm_error(GMM_EPARSE, "%s:%zu: a quoted field in this row is not closed "
                           "before the end of the file", name, r.row_line);
        else
            st = gmm_error(GMM_ENOMEM, "%s: out of memory reading the table", name);
        goto done;
    }
    if (r.status != GMM_OK) {
        st = r.status;
        goto done;
    }
    if (!r.ncol) {
        st = gmm_error(GMM_EPARSE, "%s: empty file (expected a header row)", name);
        goto done;
    }
    st = build_table(&r, name, out);
done:
    if (parser_ready)
        csv_free(&p);
    gmm_free(buf);
    reader_free(&r);
    if (f && !use_stdin)
        fclose(f);
    return st;
}

void gmm_table_free(gmm_table *t)
{
    if (!t)
        return;
    table_impl *ti = (table_impl *)t;
    gmm_free(t->file);
    gmm_free(t->header);
    gmm_free(t->cell);
    gmm_free(t->line);
    gmm_free(ti->cellptr);
    gmm_free(ti->arena);
    gmm_free(ti);
}

gmm_status gmm_table_column(const gmm_table *t, const char *name, size_t *col)
{
    if (!t || !name || !col)
        return gmm_error(GMM_EINVAL, "gmm_table_column: NULL argument");
    for (size_t c = 0; c < t->ncol; c++)
        if (!strcmp(t->header[c], name)) {
            *col = c;
            return GMM_OK;
        }
    /* List what there is, so a typo is obvious from the message alone. */
    char list[GMM_ERROR_MAX];
    size_t used = 0;
    list[0] = '\0';
    for (size_t c = 0; c < t->ncol && used < sizeof list; c++) {
        int k = snprintf(list + used, sizeof list - used, "%s%s", c ? ", " : "", t->header[c]);
        if (k < 0)
            break;
        used += (size_t)k;
    }
    return gmm_error(GMM_EPARSE, "%s: no column '%s' (columns: %s)", t->file, name, list);
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Does s[0..len) spell one of the missing-value tokens? */
static int is_missing(const char *s, size_t len)
{
    static const char *const tok[] = {"", "NA", "NaN", "nan"};
    for (size_t k = 0; k < sizeof tok / sizeof tok[0]; k++)
        if (strlen(tok[k]) == len && !strncmp(s, tok[k], len))
            return 1;
    return 0;
}

gmm_status gmm_table_column_double(const gmm_table *t, size_t col, int allow_missing, double *x)
{
    if (!t || !x)
        return gmm_error(GMM_EINVAL, "gmm_table_column_double: NULL argument");
    if (col >= t->ncol)
        return gmm_error(GMM_EDIM, "gmm_table_column_double: column %zu of %zu", col, t->ncol);
    const char *cname = t->header[col];
    for (size_t r = 0; r < t->nrow; r++) {
        const char *cell = t->cell[r][col];
        /* Quoted cells keep their blanks; numbers may be padded. */
        const char *b = cell;
        while (is_blank(*b))
            b++;
        size_t len = strlen(b);
        while (len && is_blank(b[len - 1]))
            len--;
        if (is_missing(b, len)) {
            if (!allow_missing)
                return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': %s%s%s", t->file,
                                    t->line[r], cname, len ? "missing value '" : "empty cell",
                                    len ? cell : "", len ? "'" : "");
            x[r] = NAN;
            continue;
        }
        char *end;
        errno = 0;
        double v = len ? strtod(b, &end) : 0.0;
        if (!len || end != b + len || isnan(v))
            return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': '%.40s%s' is not a number",
                                t->file, t->line[r], cname, cell,
                                strlen(cell) > 40 ? "..." : "");
        /* ERANGE also flags underflow to a subnormal or zero: that value is
         * fine; only overflow (and an explicit infinity) is not. */
        if (isinf(v) || (errno == ERANGE && fabs(v) > DBL_MIN))
            return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': '%.40s%s' is not finite",
                                t->file, t->line[r], cname, cell,
                                strlen(cell) > 40 ? "..." : "");
        x[r] = v;
    }
    return GMM_OK;
}
