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
#include <strings.h>

#include "gmm/alloc.h"

#define READ_CHUNK 65536

/* What gmm_table_free releases: the public table plus the storage its
 * pointers lead into. */
typedef struct {
    gmm_table pub;
    char *arena;
    char **cellptr;  /* nrow*ncol pointers; pub.cell[r] = cellptr + r*ncol */
    char **added;    /* nadded: columns gmm_table_join_column made (name, then
                      * the cells, one block each) */
    size_t nadded;
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

    const gmm_table_opts *opts; /* NULL: no comment lines */
    int in_comment;      /* inside a '#' line being skipped */
    char ctext[GMM_TABLE_COMMENT_MAX]; /* its first bytes, for opts->on_comment */
    size_t clen, cline;
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

enum { FEED_OK, FEED_CSV_ERROR, FEED_NUL };

/* Feed buf[0..len) in pieces ending at each CR/LF, keeping r->line and
 * r->col0 right.  Returns FEED_CSV_ERROR on a libcsv error and FEED_NUL at
 * a NUL byte (cells are NUL-terminated strings: "1\0junk" would silently
 * read as "1"), with *bad the 1-based column of the offending byte on line
 * r->line. */
static int feed(reader *r, struct csv_parser *p, const unsigned char *buf, size_t len,
                size_t *bad)
{
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && buf[j] != '\n' && buf[j] != '\r')
            j++;
        size_t end = j < len ? j + 1 : len;  /* the piece includes its CR/LF */
        const unsigned char *nul = memchr(buf + i, '\0', end - i);
        if (nul) {
            *bad = r->col0 + (size_t)(nul - (buf + i)) + 1;
            return FEED_NUL;
        }
        /* A '#' in column 1 where a row may start opens a comment line:
         * libcsv never sees it (a row that has started, or a quoted field
         * spanning lines, is not at a row start). */
        if (r->opts && r->opts->comments && r->row_pending && r->col0 == 0 && !r->in_comment &&
            buf[i] == '#') {
            r->in_comment = 1;
            r->clen = 0;
            r->cline = r->line;
        }
        unsigned char last = buf[end - 1];
        if (r->in_comment) {
            size_t body = end - i - (last == '\r' || last == '\n');
            size_t room = sizeof r->ctext - 1 - r->clen;
            size_t take = body < room ? body : room;
            memcpy(r->ctext + r->clen, buf + i, take);
            r->clen += take;
            if (last == '\r' || last == '\n') {
                r->in_comment = 0;
                r->ctext[r->clen] = '\0';
                if (r->opts->on_comment)
                    r->opts->on_comment(r->opts->user, r->ctext, r->cline);
            }
        } else {
            scan_row_start(r, buf + i, end - i);
            size_t got = csv_parse(p, buf + i, end - i, on_field, on_row, r);
            if (got != end - i) {
                *bad = r->col0 + got + 1;
                return FEED_CSV_ERROR;
            }
            if (r->status != GMM_OK)
                return FEED_OK;
        }
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
    return FEED_OK;
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

static gmm_status read_stream(FILE *f, const char *name, const gmm_table_opts *opts,
                              gmm_table **out)
{
    if (!f || !out)
        return gmm_error(GMM_EINVAL, "gmm_table_read_stream: NULL argument");
    *out = NULL;
    if (!name)
        name = "<input>";
    gmm_status st = GMM_OK;
    unsigned char *buf = NULL;
    int parser_ready = 0;
    struct csv_parser p;
    reader r;
    memset(&r, 0, sizeof r);
    r.file = name;
    r.line = 1;
    r.row_pending = 1;
    r.opts = opts;

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
        int fed = feed(&r, &p, buf + skip, n - skip, &bad);
        if (fed == FEED_NUL) {
            st = gmm_error(GMM_EPARSE, "%s:%zu:%zu: NUL byte (not a text file? UTF-16 "
                           "must be converted to UTF-8)", name, r.line, bad);
            goto done;
        }
        if (fed == FEED_CSV_ERROR) {
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
    if (r.in_comment && opts->on_comment) {  /* the last line, without a line end */
        r.ctext[r.clen] = '\0';
        opts->on_comment(opts->user, r.ctext, r.cline);
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
    return st;
}

gmm_status gmm_table_read_stream(FILE *f, const char *name, gmm_table **out)
{
    return read_stream(f, name, NULL, out);
}

gmm_status gmm_table_read_opts(const char *path, const gmm_table_opts *opts, gmm_table **out)
{
    if (!path || !out)
        return gmm_error(GMM_EINVAL, "gmm_table_read_opts: NULL argument");
    *out = NULL;
    int use_stdin = !strcmp(path, "-");
    const char *name = use_stdin ? "<stdin>" : path;
    FILE *f = use_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return gmm_error(GMM_EIO, "%s: cannot open: %s", name, strerror(errno));
    gmm_status st = read_stream(f, name, opts, out);
    if (!use_stdin)
        fclose(f);
    return st;
}

gmm_status gmm_table_read(const char *path, gmm_table **out)
{
    return gmm_table_read_opts(path, NULL, out);
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
    for (size_t k = 0; k < ti->nadded; k++)
        gmm_free(ti->added[k]);
    gmm_free(ti->added);
    gmm_free(ti);
}

gmm_status gmm_table_join_column(gmm_table *t, const char *name, const size_t *col, size_t nc,
                                 size_t *out)
{
    table_impl *ti = (table_impl *)t;
    if (!t || !name || !col || !nc || !out)
        return gmm_error(GMM_EINVAL, "gmm_table_join_column: NULL argument");
    for (size_t k = 0; k < nc; k++)
        if (col[k] >= t->ncol)
            return gmm_error(GMM_EINVAL, "gmm_table_join_column: column %zu out of range",
                             col[k]);
    size_t len = strlen(name) + 1, nn = t->ncol + 1;
    for (size_t r = 0; r < t->nrow; r++)
        for (size_t k = 0; k < nc; k++)
            len += strlen(t->cell[r][col[k]]) + 1;
    char *block = gmm_malloc(len, 1);
    char **cp = gmm_malloc(t->nrow * nn + 1, sizeof *cp);
    char **hd = gmm_malloc(nn, sizeof *hd);
    char **ad = gmm_realloc(ti->added, ti->nadded + 1, sizeof *ad);
    if (ad)
        ti->added = ad;
    if (!block || !cp || !hd || !ad) {
        gmm_free(block);
        gmm_free(cp);
        gmm_free(hd);
        return gmm_error(GMM_ENOMEM, "%s: out of memory for column '%s'", t->file, name);
    }
    ti->added[ti->nadded++] = block;
    strcpy(block, name);
    char *at = block + strlen(name) + 1;
    memcpy(hd, t->header, t->ncol * sizeof *hd);
    hd[t->ncol] = block;
    for (size_t r = 0; r < t->nrow; r++) {
        memcpy(cp + r * nn, t->cell[r], t->ncol * sizeof *cp);
        cp[r * nn + t->ncol] = at;
        for (size_t k = 0; k < nc; k++) {
            size_t l = strlen(t->cell[r][col[k]]);
            memcpy(at, t->cell[r][col[k]], l);
            at += l;
            *at++ = k + 1 < nc ? ':' : '\0';
        }
        t->cell[r] = cp + r * nn;
    }
    gmm_free(t->header);
    gmm_free(ti->cellptr);
    t->header = hd;
    ti->cellptr = cp;
    *out = t->ncol++;
    return GMM_OK;
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

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Is s[0..len) a decimal number: [+-] (D+ [. D*] | . D+) [(e|E) [+-] D+]?
 * (strtod also reads hexadecimal, "inf", "infinity" and "nan(...)".) */
static int is_decimal(const char *s, size_t len)
{
    size_t i = 0, nd = 0;
    if (i < len && (s[i] == '+' || s[i] == '-'))
        i++;
    for (; i < len && is_digit(s[i]); i++)
        nd++;
    if (i < len && s[i] == '.')
        for (i++; i < len && is_digit(s[i]); i++)
            nd++;
    if (!nd)
        return 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i == len || !is_digit(s[i]))
            return 0;
        while (i < len && is_digit(s[i]))
            i++;
    }
    return i == len;
}

/* Does s[0..len) spell an infinity ("inf", "-Infinity", ...)? */
static int is_infinity(const char *s, size_t len)
{
    if (len && (s[0] == '+' || s[0] == '-')) {
        s++;
        len--;
    }
    return (len == 3 && !strncasecmp(s, "inf", 3)) ||
           (len == 8 && !strncasecmp(s, "infinity", 8));
}

int gmm_table_cell_missing(const gmm_table *t, size_t r, size_t col)
{
    if (!t || r >= t->nrow || col >= t->ncol)
        return 0;
    const char *b = t->cell[r][col];
    while (is_blank(*b))
        b++;
    size_t len = strlen(b);
    while (len && is_blank(b[len - 1]))
        len--;
    return is_missing(b, len);
}

void gmm_table_keep_rows(gmm_table *t, const unsigned char *keep)
{
    size_t k = 0;
    for (size_t r = 0; r < t->nrow; r++)
        if (keep[r]) {
            t->cell[k] = t->cell[r];
            t->line[k++] = t->line[r];
        }
    t->nrow = k;
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
        const char *more = strlen(cell) > 40 ? "..." : "";
        if (is_missing(b, len)) {
            if (!allow_missing)
                return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': %s%s%s", t->file,
                                    t->line[r], cname, len ? "missing value '" : "empty cell",
                                    len ? cell : "", len ? "'" : "");
            x[r] = NAN;
            continue;
        }
        if (is_infinity(b, len))
            return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': '%.40s%s' is not finite",
                                t->file, t->line[r], cname, cell, more);
        if (!is_decimal(b, len)) {
            const char *u = b + (*b == '+' || *b == '-');
            int hex = u[0] == '0' && (u[1] == 'x' || u[1] == 'X');
            return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': '%.40s%s' is not a %snumber",
                                t->file, t->line[r], cname, cell, more, hex ? "decimal " : "");
        }
        errno = 0;
        double v = strtod(b, NULL);
        /* ERANGE also flags underflow to a subnormal or zero: that value is
         * fine; only overflow is not. */
        if (isinf(v) || (errno == ERANGE && fabs(v) > DBL_MIN))
            return gmm_error_at(GMM_EPARSE, r, "%s:%zu: column '%s': '%.40s%s' is not finite",
                                t->file, t->line[r], cname, cell, more);
        x[r] = v;
    }
    return GMM_OK;
}

/* ---- distinct decimals that read as one double --------------------------- */

/* A decimal number as sign, the power of ten of its first significant digit
 * and its significant digits (trailing zeros dropped): the same for "1",
 * "1.0", "+10e-1" and "0.1e1", different for 1e16 + 1 and 1e16 + 2. */
typedef struct {
    int sign;          /* -1, 0 (any zero) or 1 */
    long exp;          /* saturated at +-LONG_LIMIT */
    const char *dig;   /* first significant digit (a '.' may follow inside) */
    size_t ndig;
} decimal;

#define LONG_LIMIT 1000000000L

static void decimal_parse(const char *s, decimal *d)
{
    memset(d, 0, sizeof *d);
    while (is_blank(*s))
        s++;
    int neg = *s == '-';
    if (*s == '+' || *s == '-')
        s++;
    long nint = 0, j = 0, j0 = -1, j1 = -1;  /* digits before '.', digit index */
    int point = 0;
    for (; is_digit(*s) || (*s == '.' && !point); s++) {
        if (*s == '.') {
            point = 1;
            continue;
        }
        if (!point && nint < LONG_LIMIT)
            nint++;
        if (*s != '0') {
            if (j0 < 0) {
                j0 = j;
                d->dig = s;
            }
            j1 = j;
        }
        if (j < LONG_LIMIT)
            j++;
    }
    if (j0 < 0)
        return;  /* zero, whatever its sign */
    long e = 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        int eneg = *s == '-';
        if (*s == '+' || *s == '-')
            s++;
        for (; is_digit(*s); s++)
            if (e < LONG_LIMIT)
                e = 10 * e + (*s - '0');
        if (eneg)
            e = -e;
    }
    d->sign = neg ? -1 : 1;
    d->exp = nint - 1 - j0 + e;
    d->ndig = (size_t)(j1 - j0 + 1);
}

/* A total order of decimals in which equal numbers compare equal (not the
 * numeric order: only grouping matters). */
static int decimal_cmp(const decimal *a, const decimal *b)
{
    if (a->sign != b->sign)
        return a->sign < b->sign ? -1 : 1;
    if (!a->sign)
        return 0;
    if (a->exp != b->exp)
        return a->exp < b->exp ? -1 : 1;
    const char *p = a->dig, *q = b->dig;
    size_t n = a->ndig < b->ndig ? a->ndig : b->ndig;
    for (size_t k = 0; k < n; k++, p++, q++) {
        if (*p == '.')
            p++;
        if (*q == '.')
            q++;
        if (*p != *q)
            return *p < *q ? -1 : 1;
    }
    return a->ndig == b->ndig ? 0 : (a->ndig < b->ndig ? -1 : 1);
}

typedef struct {
    double v;
    const char *text;
    size_t row;
} collide_entry;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_entry(const void *pa, const void *pb)
{
    const collide_entry *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v < b->v ? -1 : 1;
    decimal da, db;
    decimal_parse(a->text, &da);
    decimal_parse(b->text, &db);
    int c = decimal_cmp(&da, &db);
    if (c)
        return c;
    return a->row < b->row ? -1 : a->row > b->row;
}

/* Does the sorted v[0..m) hold x at least twice? */
static int held_twice(const double *v, size_t m, double x)
{
    size_t lo = 0, hi = m;  /* first index with v >= x */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo + 1 < m && v[lo] == x && v[lo + 1] == x;
}

gmm_status gmm_table_column_collisions(const gmm_table *t, size_t col, const double *x,
                                       size_t *count, size_t *row_a, size_t *row_b)
{
    if (!t || !x || !count || !row_a || !row_b)
        return gmm_error(GMM_EINVAL, "gmm_table_column_collisions: NULL argument");
    if (col >= t->ncol)
        return gmm_error(GMM_EDIM, "gmm_table_column_collisions: column %zu of %zu", col,
                         t->ncol);
    *count = 0;
    *row_a = *row_b = GMM_NO_INDEX;
    gmm_status st = GMM_OK;
    collide_entry *e = NULL;
    size_t m = 0, ne = 0;
    double *v = gmm_malloc(t->nrow ? t->nrow : 1, sizeof *v);
    if (!v)
        return gmm_error(GMM_ENOMEM, "%s: out of memory comparing column '%s'", t->file,
                         t->header[col]);
    /* Most columns hold no double twice: sort the values alone first. */
    for (size_t r = 0; r < t->nrow; r++)
        if (isfinite(x[r]))
            v[m++] = x[r];
    qsort(v, m, sizeof *v, cmp_double);
    for (size_t k = 1; k < m; k++)
        if (v[k] == v[k - 1])
            ne++;
    if (!ne)
        goto done;
    /* Only rows whose double is repeated need their texts compared. */
    ne = 0;
    for (size_t r = 0; r < t->nrow; r++)
        if (isfinite(x[r]) && held_twice(v, m, x[r]))
            ne++;
    e = gmm_malloc(ne, sizeof *e);
    if (!e) {
        st = gmm_error(GMM_ENOMEM, "%s: out of memory comparing column '%s'", t->file,
                       t->header[col]);
        goto done;
    }
    ne = 0;
    for (size_t r = 0; r < t->nrow; r++)
        if (isfinite(x[r]) && held_twice(v, m, x[r]))
            e[ne++] = (collide_entry){x[r], t->cell[r][col], r};
    qsort(e, ne, sizeof *e, cmp_entry);
    /* A run of one double holds groups of equal decimals, each group's rows
     * ascending.  Each group after the first is a decimal lost; the pair
     * reported is where a reader of the file first meets one: the two
     * smallest group-first rows of the run whose second is smallest. */
    for (size_t i = 0; i < ne;) {
        size_t end = i + 1;
        while (end < ne && e[end].v == e[i].v)
            end++;
        size_t first = e[i].row, second = GMM_NO_INDEX;
        decimal prev, cur;
        decimal_parse(e[i].text, &prev);
        for (size_t k = i + 1; k < end; k++) {
            decimal_parse(e[k].text, &cur);
            if (!decimal_cmp(&prev, &cur))
                continue;
            prev = cur;
            (*count)++;
            size_t r = e[k].row;  /* the group's first row */
            if (r < first) {
                second = first;
                first = r;
            } else if (second == GMM_NO_INDEX || r < second) {
                second = r;
            }
        }
        if (second != GMM_NO_INDEX && (*row_b == GMM_NO_INDEX || second < *row_b)) {
            *row_a = first;
            *row_b = second;
        }
        i = end;
    }
done:
    gmm_free(v);
    gmm_free(e);
    return st;
}
