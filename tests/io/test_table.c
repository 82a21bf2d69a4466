/* test_table.c -- CSV reading: line numbers through CRLF, quoted newlines
 * and blank lines; every error message with its file and line; NUL bytes;
 * numeric columns (decimal only); distinct decimals that read as one
 * double; reading from a stream; out-of-memory paths. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "support/tmpfiles.h"

static char *dir;

static void setup(void) { dir = tu_mkdtemp(); }

static void teardown(void)
{
    tu_rmdir_all(dir);
    free(dir);
}

/* Read text (len bytes) as dir/t.csv; returns the status, table in *t. */
static gmm_status read_text(const char *text, size_t len, gmm_table **t, char **path)
{
    *path = tu_write_file(dir, "t.csv", text, len);
    return gmm_table_read(*path, t);
}

static gmm_table *read_good(const char *text)
{
    gmm_table *t = NULL;
    char *path;
    gmm_status st = read_text(text, strlen(text), &t, &path);
    ck_assert_msg(st == GMM_OK, "read failed: %s", gmm_error_message());
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->file, path);
    free(path);
    return t;
}

/* The read must fail with status want and message "<path><suffix>". */
static void read_bad(const char *text, size_t len, gmm_status want, const char *suffix)
{
    gmm_table *t = (gmm_table *)&t; /* must be reset to NULL */
    char *path;
    gmm_status st = read_text(text, len, &t, &path);
    ck_assert_int_eq(st, want);
    ck_assert_ptr_null(t);
    char expect[1024];
    snprintf(expect, sizeof expect, "%s%s", path, suffix);
    ck_assert_str_eq(gmm_error_message(), expect);
    free(path);
}

static void check_lines(const gmm_table *t, const size_t *lines, size_t n)
{
    ck_assert_uint_eq(t->nrow, n);
    for (size_t r = 0; r < n; r++)
        ck_assert_msg(t->line[r] == lines[r], "row %zu: line %zu, expected %zu", r, t->line[r],
                      lines[r]);
}

START_TEST(test_basic)
{
    gmm_table *t = read_good("x,y\n1,2\n3,4\n");
    ck_assert_uint_eq(t->ncol, 2);
    ck_assert_str_eq(t->header[0], "x");
    ck_assert_str_eq(t->header[1], "y");
    ck_assert_str_eq(t->cell[0][0], "1");
    ck_assert_str_eq(t->cell[1][1], "4");
    check_lines(t, (size_t[]){2, 3}, 2);
    gmm_table_free(t);
    gmm_table_free(NULL);
}
END_TEST

START_TEST(test_crlf_and_blank_lines)
{
    gmm_table *t = read_good("x,y\r\n1,2\r\n\r\n3,4\r\n");
    check_lines(t, (size_t[]){2, 4}, 2);
    ck_assert_str_eq(t->cell[0][1], "2");  /* no stray CR */
    ck_assert_str_eq(t->cell[1][1], "4");
    gmm_table_free(t);

    /* Leading blank lines, a blank-only line, trailing blank lines. */
    t = read_good("\n\nx,y\n\n1,2\n   \n\t\n3,4\n\n\n");
    check_lines(t, (size_t[]){5, 8}, 2);
    gmm_table_free(t);

    /* Old Mac line ends: a lone CR ends a line too. */
    t = read_good("x\r1\r\r2\r");
    check_lines(t, (size_t[]){2, 4}, 2);
    gmm_table_free(t);
}
END_TEST

START_TEST(test_quoted_fields)
{
    gmm_table *t = read_good("name,y\n"
                             "\"a,b\",1\n"
                             "\"multi\nline\",2\n"
                             "\"q\"\"uote\",3\n"
                             "\"\",4\n"
                             "\" padded \",5\n");
    ck_assert_str_eq(t->cell[0][0], "a,b");
    ck_assert_str_eq(t->cell[1][0], "multi\nline");
    ck_assert_str_eq(t->cell[2][0], "q\"uote");
    ck_assert_str_eq(t->cell[3][0], "");
    ck_assert_str_eq(t->cell[4][0], " padded ");
    check_lines(t, (size_t[]){2, 3, 5, 6, 7}, 5);
    gmm_table_free(t);

    /* A CRLF inside a quoted field is one line break. */
    t = read_good("x\r\n\"a\r\nb\"\r\nc\r\n");
    ck_assert_str_eq(t->cell[0][0], "a\r\nb");
    check_lines(t, (size_t[]){2, 4}, 2);
    gmm_table_free(t);

    /* Unquoted fields lose surrounding blanks. */
    t = read_good("x , y\n 1 ,\t2\n");
    ck_assert_str_eq(t->header[0], "x");
    ck_assert_str_eq(t->header[1], "y");
    ck_assert_str_eq(t->cell[0][0], "1");
    ck_assert_str_eq(t->cell[0][1], "2");
    gmm_table_free(t);
}
END_TEST

START_TEST(test_no_trailing_newline_bom_header_only)
{
    gmm_table *t = read_good("x,y\n1,2\n3,4");
    check_lines(t, (size_t[]){2, 3}, 2);
    ck_assert_str_eq(t->cell[1][1], "4");
    gmm_table_free(t);

    t = read_good("\xEF\xBB\xBFx,y\n1,2\n");
    ck_assert_str_eq(t->header[0], "x");
    check_lines(t, (size_t[]){2}, 1);
    gmm_table_free(t);

    t = read_good("x,y\n");
    ck_assert_uint_eq(t->ncol, 2);
    ck_assert_uint_eq(t->nrow, 0);
    gmm_table_free(t);

    t = read_good("x");
    ck_assert_uint_eq(t->ncol, 1);
    ck_assert_uint_eq(t->nrow, 0);
    gmm_table_free(t);
}
END_TEST

START_TEST(test_ragged_rows)
{
    const char *a = "x,y\n1,2\n3\n";
    read_bad(a, strlen(a), GMM_EPARSE, ":3: expected 2 fields, found 1");
    ck_assert_uint_eq(gmm_error_index(), 1);
    const char *b = "x,y\n1,2,3\n";
    read_bad(b, strlen(b), GMM_EPARSE, ":2: expected 2 fields, found 3");
    /* The line is where the row starts, before its quoted newline. */
    const char *c = "x,y\n\n\"a\nb\",1,2\n";
    read_bad(c, strlen(c), GMM_EPARSE, ":3: expected 2 fields, found 3");
    const char *d = "x,y\r\n1,2\r\n\r\n4,5,6";
    read_bad(d, strlen(d), GMM_EPARSE, ":4: expected 2 fields, found 3");
}
END_TEST

START_TEST(test_empty_and_bad_headers)
{
    read_bad("", 0, GMM_EPARSE, ": empty file (expected a header row)");
    read_bad("\n \r\n\n", 5, GMM_EPARSE, ": empty file (expected a header row)");
    read_bad("\xEF\xBB\xBF", 3, GMM_EPARSE, ": empty file (expected a header row)");
    const char *a = "x,y,x\n1,2,3\n";
    read_bad(a, strlen(a), GMM_EPARSE, ":1: duplicated column name 'x' (columns 1 and 3)");
    const char *b = "\n\nx,,y\n";
    read_bad(b, strlen(b), GMM_EPARSE, ":3: column 2 has an empty name");
    const char *c = "x,\"\"\n";
    read_bad(c, strlen(c), GMM_EPARSE, ":1: column 2 has an empty name");
}
END_TEST

START_TEST(test_malformed_quoting)
{
    const char *msg = ": malformed quoting (a '\"' must open a field or be doubled inside a "
                      "quoted field)";
    char want[256];
    const char *a = "x,y\n1,a\"b\n";
    snprintf(want, sizeof want, ":2:4%s", msg);
    read_bad(a, strlen(a), GMM_EPARSE, want);
    const char *b = "x\r\n\r\n\"ab\"c\r\n";
    snprintf(want, sizeof want, ":3:5%s", msg);
    read_bad(b, strlen(b), GMM_EPARSE, want);
    /* After a quoted newline the column counts from that line's start. */
    const char *c = "x,y\n\"a\nbc\",\"d\"e\n";
    snprintf(want, sizeof want, ":3:8%s", msg);
    read_bad(c, strlen(c), GMM_EPARSE, want);
    const char *d = "x,y\n1,\"abc\n2,3\n";
    read_bad(d, strlen(d), GMM_EPARSE,
             ":2: a quoted field in this row is not closed before the end of the file");
}
END_TEST

START_TEST(test_unreadable)
{
    char *path = malloc(strlen(dir) + 32);
    sprintf(path, "%s/missing.csv", dir);
    gmm_table *t = NULL;
    ck_assert_int_eq(gmm_table_read(path, &t), GMM_EIO);
    char want[1024];
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    ck_assert_str_eq(gmm_error_message(), want);
    ck_assert_ptr_null(t);
    /* A directory opens but cannot be read. */
    ck_assert_int_eq(gmm_table_read(dir, &t), GMM_EIO);
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), "Is a directory"));
    ck_assert_ptr_nonnull(strstr(gmm_error_message(), dir));
    ck_assert_int_eq(gmm_table_read(NULL, &t), GMM_EINVAL);
    free(path);
}
END_TEST

START_TEST(test_stdin)
{
    char *path = tu_write_str(dir, "in.csv", "a\n1\n\n2\n");
    fflush(stdin);
    int saved = dup(0);
    ck_assert(freopen(path, "r", stdin) != NULL);
    gmm_table *t = NULL;
    ck_assert_int_eq(gmm_table_read("-", &t), GMM_OK);
    ck_assert_str_eq(t->file, "<stdin>");
    check_lines(t, (size_t[]){2, 4}, 2);
    size_t col;
    ck_assert_int_eq(gmm_table_column(t, "b", &col), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "<stdin>: no column 'b' (columns: a)");
    gmm_table_free(t);
    dup2(saved, 0);
    close(saved);
    clearerr(stdin);
    free(path);
}
END_TEST

/* Append rows "k,rowk" (CRLF, a blank line now and then) until n >= stop. */
static void fill_rows(char *buf, size_t *n, size_t stop, size_t *lines, size_t *nrow,
                      size_t *line)
{
    while (*n < stop) {
        *n += (size_t)sprintf(buf + *n, "%zu,row%zu\r\n", *nrow, *nrow);
        lines[(*nrow)++] = (*line)++;
        if (*nrow % 7 == 0) {
            *n += (size_t)sprintf(buf + *n, "\r\n");
            (*line)++;
        }
    }
}

/* Rows across several 64 KiB read chunks (the reader's fread size), with a
 * CRLF pair and a quoted CRLF each split by a chunk boundary: the line
 * numbers stay exact.  File offsets count the BOM, as fread does. */
START_TEST(test_chunk_boundaries)
{
    const size_t chunk = 65536;
    char *buf = malloc(4 * chunk);
    size_t *lines = malloc(sizeof(size_t) * 40000);
    size_t n = 0, nrow = 0, line = 1;
    n += (size_t)sprintf(buf + n, "\xEF\xBB\xBFi,s\r\n");
    line++;

    fill_rows(buf, &n, chunk - 64, lines, &nrow, &line);
    size_t m = chunk - 1 - n - 2;  /* "7," + m z's, then CR at chunk - 1 */
    buf[n++] = '7';
    buf[n++] = ',';
    memset(buf + n, 'z', m);
    n += m;
    buf[n++] = '\r';
    ck_assert_uint_eq(n, chunk);
    buf[n++] = '\n';
    lines[nrow++] = line++;

    fill_rows(buf, &n, 2 * chunk - 64, lines, &nrow, &line);
    size_t q = nrow;
    m = 2 * chunk - 1 - n - 3;     /* "9,\"" + m a's, then CR at 2 chunk - 1 */
    n += (size_t)sprintf(buf + n, "9,\"");
    memset(buf + n, 'a', m);
    n += m;
    buf[n++] = '\r';
    ck_assert_uint_eq(n, 2 * chunk);
    n += (size_t)sprintf(buf + n, "\nb\"\r\n");
    lines[nrow++] = line;
    line += 2;

    fill_rows(buf, &n, 3 * chunk + 100, lines, &nrow, &line);

    gmm_table *t = NULL;
    char *path;
    ck_assert_int_eq(read_text(buf, n, &t, &path), GMM_OK);
    ck_assert_str_eq(t->header[0], "i");
    check_lines(t, lines, nrow);
    ck_assert_str_eq(t->cell[q][0], "9");
    ck_assert_uint_eq(strlen(t->cell[q][1]), m + 3);
    ck_assert_str_eq(t->cell[q][1] + m - 1, "a\r\nb");
    char want[32];
    snprintf(want, sizeof want, "row%zu", q + 1);
    ck_assert_str_eq(t->cell[q + 1][1], want);
    gmm_table_free(t);
    free(path);
    free(buf);
    free(lines);
}
END_TEST

typedef struct {
    char text[4][GMM_TABLE_COMMENT_MAX];
    size_t line[4], n;
} comments;

static void note_comment(void *user, const char *text, size_t line)
{
    comments *c = user;
    if (c->n < 4) {
        snprintf(c->text[c->n], sizeof c->text[c->n], "%s", text);
        c->line[c->n] = line;
    }
    c->n++;
}

/* Comment lines: '#' in column 1 at a row start, before the header, between
 * rows (CRLF too) and at the end; their line numbers count.  A '#' that
 * starts a line inside a quoted field, or after blanks, is data; one longer
 * than a read chunk is skipped whole and handed on cut. */
START_TEST(test_comment_lines)
{
    const char *text = "# a = 1\n#b\r\nx,y\r\n1,\"p\n#q\"\n# mid\n 2,#3\n\n# end";
    char *path = tu_write_file(dir, "t.csv", text, strlen(text));
    comments c = {0};
    gmm_table_opts o = {1, note_comment, &c};
    gmm_table *t = NULL;
    ck_assert_int_eq(gmm_table_read_opts(path, &o, &t), GMM_OK);
    size_t lines[] = {4, 7};
    check_lines(t, lines, 2);
    ck_assert_str_eq(t->cell[0][1], "p\n#q");
    ck_assert_str_eq(t->cell[1][1], "#3");
    ck_assert_uint_eq(c.n, 4);
    ck_assert_str_eq(c.text[0], "# a = 1");
    ck_assert_str_eq(c.text[1], "#b");
    ck_assert_str_eq(c.text[2], "# mid");
    ck_assert_str_eq(c.text[3], "# end");
    ck_assert_uint_eq(c.line[0], 1);
    ck_assert_uint_eq(c.line[1], 2);
    ck_assert_uint_eq(c.line[2], 6);
    ck_assert_uint_eq(c.line[3], 9);
    gmm_table_free(t);
    /* without the option a '#' line is a row */
    ck_assert_int_eq(gmm_table_read(path, &t), GMM_EPARSE);
    ck_assert_ptr_null(t);
    free(path);

    /* a comment across the 64 KiB read chunks, then a malformed row */
    size_t big = 3 * 65536, n = 0;
    char *buf = malloc(big + 64);
    buf[n++] = '#';
    memset(buf + n, 'c', big);
    n += big;
    n += (size_t)sprintf(buf + n, "\nx,y\n1,2\n3\n");
    path = tu_write_file(dir, "t.csv", buf, n);
    c.n = 0;
    ck_assert_int_eq(gmm_table_read_opts(path, &o, &t), GMM_EPARSE);
    char want[1024];
    snprintf(want, sizeof want, "%s:4: expected 2 fields, found 1", path);
    ck_assert_str_eq(gmm_error_message(), want);
    ck_assert_uint_eq(c.n, 1);
    ck_assert_uint_eq(strlen(c.text[0]), GMM_TABLE_COMMENT_MAX - 1);
    free(path);
    free(buf);
}
END_TEST

START_TEST(test_column_lookup)
{
    gmm_table *t = read_good("time,y,group\n1,2,a\n");
    size_t col = 99;
    ck_assert_int_eq(gmm_table_column(t, "y", &col), GMM_OK);
    ck_assert_uint_eq(col, 1);
    ck_assert_int_eq(gmm_table_column(t, "Y", &col), GMM_EPARSE);
    char want[1024];
    snprintf(want, sizeof want, "%s: no column 'Y' (columns: time, y, group)", t->file);
    ck_assert_str_eq(gmm_error_message(), want);
    gmm_table_free(t);
}
END_TEST

START_TEST(test_column_double)
{
    gmm_table *t = read_good("x,y\n"
                             "1.5,\" 2.5 \"\n"
                             "-0,1e-320\n"
                             "1e300,NA\n"
                             ",NaN\n"
                             "3,nan\n"
                             "+4,\"\"\n");
    double x[6], y[6];
    ck_assert_int_eq(gmm_table_column_double(t, 0, 1, x), GMM_OK);
    ck_assert(x[0] == 1.5);
    ck_assert(x[1] == 0.0 && signbit(x[1]));
    ck_assert(x[2] == 1e300);
    ck_assert(isnan(x[3]));
    ck_assert(x[5] == 4.0);
    ck_assert_int_eq(gmm_table_column_double(t, 1, 1, y), GMM_OK);
    ck_assert(y[0] == 2.5);
    ck_assert(y[1] == 1e-320 && y[1] > 0); /* subnormal: underflow is not an error */
    for (int r = 2; r < 6; r++)
        ck_assert(isnan(y[r]));

    char want[1024];
    ck_assert_int_eq(gmm_table_column_double(t, 0, 0, x), GMM_EPARSE);
    snprintf(want, sizeof want, "%s:5: column 'x': empty cell", t->file);
    ck_assert_str_eq(gmm_error_message(), want);
    ck_assert_uint_eq(gmm_error_index(), 3);
    ck_assert_int_eq(gmm_table_column_double(t, 1, 0, y), GMM_EPARSE);
    snprintf(want, sizeof want, "%s:4: column 'y': missing value 'NA'", t->file);
    ck_assert_str_eq(gmm_error_message(), want);
    ck_assert_int_eq(gmm_table_column_double(t, 2, 1, y), GMM_EDIM);
    gmm_table_free(t);
}
END_TEST

START_TEST(test_column_double_errors)
{
    static const struct {
        const char *cell, *what;
    } bad[] = {
        {"abc", "'abc' is not a number"},     {"1.5x", "'1.5x' is not a number"},
        {"1 2", "'1 2' is not a number"},     {"NAN", "'NAN' is not a number"},
        {"-nan", "'-nan' is not a number"},   {"inf", "'inf' is not finite"},
        {"-Infinity", "'-Infinity' is not finite"},
        {"1e999", "'1e999' is not finite"},   {"-1e400", "'-1e400' is not finite"},
        {"0123456789012345678901234567890123456789xyz",
         "'0123456789012345678901234567890123456789...' is not a number"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[256];
        snprintf(text, sizeof text, "id,value\n1,2\n\n2,\"%s\"\n", bad[k].cell);
        gmm_table *t = read_good(text);
        double v[2];
        ck_assert_int_eq(gmm_table_column_double(t, 1, 1, v), GMM_EPARSE);
        char want[1024];
        snprintf(want, sizeof want, "%s:4: column 'value': %s", t->file, bad[k].what);
        ck_assert_str_eq(gmm_error_message(), want);
        ck_assert_uint_eq(gmm_error_index(), 1);
        gmm_table_free(t);
    }
}
END_TEST

/* A NUL byte is an error at its line and column, wherever it is: a cell is
 * a C string, and "4\0junk" must not read as "4". */
START_TEST(test_nul_byte)
{
    const char msg[] = ": NUL byte (not a text file? UTF-16 must be converted to UTF-8)";
    char want[256];
    const char a[] = "x,y\n1,2\n3,4\0junk\n";
    snprintf(want, sizeof want, ":3:4%s", msg);
    read_bad(a, sizeof a - 1, GMM_EPARSE, want);
    const char b[] = "x\0,y\n1,2\n";
    snprintf(want, sizeof want, ":1:2%s", msg);
    read_bad(b, sizeof b - 1, GMM_EPARSE, want);
    /* Inside a quoted field that spans lines: the line of the NUL. */
    const char c[] = "x,y\r\n\"a\r\nbc\0\",1\r\n";
    snprintf(want, sizeof want, ":3:3%s", msg);
    read_bad(c, sizeof c - 1, GMM_EPARSE, want);
    /* UTF-16 text: the first NUL, on line 1. */
    const char d[] = "x\0\n\0" "1\0\n\0";
    snprintf(want, sizeof want, ":1:2%s", msg);
    read_bad(d, sizeof d - 1, GMM_EPARSE, want);
}
END_TEST

/* gmm_table_read_stream: the same reader on an open stream, named in
 * messages as asked. */
START_TEST(test_read_stream)
{
    static char text[] = "a,b\n1,2\n\n3,4\n";
    FILE *f = fmemopen(text, strlen(text), "r");
    ck_assert_ptr_nonnull(f);
    gmm_table *t = NULL;
    ck_assert_int_eq(gmm_table_read_stream(f, "mem.csv", &t), GMM_OK);
    ck_assert_str_eq(t->file, "mem.csv");
    check_lines(t, (size_t[]){2, 4}, 2);
    gmm_table_free(t);
    fclose(f);

    static char bad[] = "a,b\n1\n";
    f = fmemopen(bad, strlen(bad), "r");
    ck_assert_int_eq(gmm_table_read_stream(f, NULL, &t), GMM_EPARSE);
    ck_assert_str_eq(gmm_error_message(), "<input>:2: expected 2 fields, found 1");
    fclose(f);
    ck_assert_int_eq(gmm_table_read_stream(NULL, "x", &t), GMM_EINVAL);
}
END_TEST

/* Numbers are decimal: strtod's hexadecimal, infinities and NaN spellings
 * other than the missing-value tokens are refused. */
START_TEST(test_column_decimal_only)
{
    static const struct {
        const char *cell, *what;
    } bad[] = {
        {"0x10", "'0x10' is not a decimal number"},
        {"-0X1p3", "'-0X1p3' is not a decimal number"},
        {"+0x0", "'+0x0' is not a decimal number"},
        {"0x", "'0x' is not a decimal number"},
        {"Inf", "'Inf' is not finite"},
        {"+INFINITY", "'+INFINITY' is not finite"},
        {"nan(123)", "'nan(123)' is not a number"},
        {"1e", "'1e' is not a number"},
        {"1e+", "'1e+' is not a number"},
        {"e5", "'e5' is not a number"},
        {".", "'.' is not a number"},
        {"-", "'-' is not a number"},
        {"+.e1", "'+.e1' is not a number"},
        {"1.2.3", "'1.2.3' is not a number"},
        {"1d5", "'1d5' is not a number"},
        {"1,5", "'1,5' is not a number"},
        {"--1", "'--1' is not a number"},
        {"1e5.5", "'1e5.5' is not a number"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char text[256];
        snprintf(text, sizeof text, "id,value\n1,2\n2,\"%s\"\n", bad[k].cell);
        gmm_table *t = read_good(text);
        double v[2];
        ck_assert_int_eq(gmm_table_column_double(t, 1, 1, v), GMM_EPARSE);
        char want[1024];
        snprintf(want, sizeof want, "%s:3: column 'value': %s", t->file, bad[k].what);
        ck_assert_str_eq(gmm_error_message(), want);
        gmm_table_free(t);
    }
    gmm_table *t = read_good("v\n1.\n.5\n-.5e-3\n+1E+05\n007\n 2e0 \n0e999999\n1e-99999\n");
    double v[8];
    ck_assert_int_eq(gmm_table_column_double(t, 0, 0, v), GMM_OK);
    const double want[8] = {1.0, 0.5, -0.5e-3, 1e5, 7.0, 2.0, 0.0, 0.0};
    for (int k = 0; k < 8; k++)
        ck_assert_msg(v[k] == want[k], "row %d: %g, expected %g", k, v[k], want[k]);
    gmm_table_free(t);
}
END_TEST

/* Read one numeric column and count its collisions. */
static size_t collisions(const char *text, size_t *a, size_t *b)
{
    gmm_table *t = read_good(text);
    double *x = malloc((t->nrow ? t->nrow : 1) * sizeof *x);
    ck_assert_int_eq(gmm_table_column_double(t, 0, 1, x), GMM_OK);
    size_t n = 99;
    ck_assert_int_eq(gmm_table_column_collisions(t, 0, x, &n, a, b), GMM_OK);
    free(x);
    gmm_table_free(t);
    return n;
}

START_TEST(test_column_collisions)
{
    size_t a, b;
    /* No repeated double at all; repeated numbers however written. */
    ck_assert_uint_eq(collisions("x\n1\n2\n3\n", &a, &b), 0);
    ck_assert_uint_eq(a, GMM_NO_INDEX);
    ck_assert_uint_eq(b, GMM_NO_INDEX);
    ck_assert_uint_eq(collisions("x\n1\n1.0\n10e-1\n0.1e1\n+1.000\n1\n2\n", &a, &b), 0);
    ck_assert_uint_eq(collisions("x\n0\n-0\n0.000e5\n.0\n", &a, &b), 0);
    ck_assert_uint_eq(collisions("x\n12.5\n0012.50\n1250e-2\n", &a, &b), 0);
    ck_assert_uint_eq(collisions("x\n\n", &a, &b), 0);
    ck_assert_uint_eq(collisions("x\nNaN\nNA\n5\n", &a, &b), 0);

    /* 1e16 + 1 reads as 1e16: rows 1 and 3 (lines 3 and 5). */
    ck_assert_uint_eq(collisions("x\n5\n10000000000000001\n7\n1e16\nNaN\n", &a, &b), 1);
    ck_assert_uint_eq(a, 1);
    ck_assert_uint_eq(b, 3);
    /* Underflow: 1e-400 and 0 are different numbers, one double. */
    ck_assert_uint_eq(collisions("x\n0\n1e-400\n", &a, &b), 1);
    /* Negative numbers group by their own digits. */
    ck_assert_uint_eq(collisions("x\n-10000000000000001\n-1e16\n-10000000000000000.0\n",
                                 &a, &b), 1);
    ck_assert_uint_eq(a, 0);
    ck_assert_uint_eq(b, 1);

    /* x = 1e16 + year, 1901..2000: 100 years on 51 doubles, 49 lost; the
     * first merge in the file is 1904 (row 3) with 1903 (row 2).  Rows
     * repeated verbatim add nothing. */
    char *text = malloc(4096);
    size_t n = (size_t)sprintf(text, "x\n");
    for (int rep = 0; rep < 2; rep++)
        for (int y = 1901; y <= 2000; y++)
            n += (size_t)sprintf(text + n, "1000000000000%d\n", y);
    ck_assert_uint_eq(collisions(text, &a, &b), 49);
    ck_assert_uint_eq(a, 2);
    ck_assert_uint_eq(b, 3);
    free(text);

    /* Arguments. */
    gmm_table *t = read_good("x\n1\n");
    double x[1] = {1};
    size_t c;
    ck_assert_int_eq(gmm_table_column_collisions(t, 1, x, &c, &a, &b), GMM_EDIM);
    ck_assert_int_eq(gmm_table_column_collisions(t, 0, NULL, &c, &a, &b), GMM_EINVAL);
    gmm_table_free(t);
}
END_TEST

START_TEST(test_column_collisions_out_of_memory)
{
    gmm_table *t = read_good("x\n10000000000000001\n1e16\n3\n");
    double x[3];
    ck_assert_int_eq(gmm_table_column_double(t, 0, 0, x), GMM_OK);
    int succeeded = 0;
    for (long k = 0; k < 10 && !succeeded; k++) {
        size_t c = 99, a = 99, b = 99;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_table_column_collisions(t, 0, x, &c, &a, &b);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            ck_assert_uint_eq(c, 1);
            succeeded = 1;
        } else {
            ck_assert_int_eq(st, GMM_ENOMEM);
        }
    }
    ck_assert(succeeded);
    gmm_table_free(t);
}
END_TEST

/* Every allocation of a read, failed in turn: ENOMEM or success, no leak
 * (ASan/valgrind check the leaks). */
START_TEST(test_out_of_memory)
{
    const char *text = "a,b,c\n1,\"x\ny\",3\n\n4,5,6\n7,8,9\n";
    char *path = tu_write_str(dir, "oom.csv", text);
    int succeeded = 0;
    for (long k = 0; k < 200 && !succeeded; k++) {
        gmm_table *t = NULL;
        gmm_alloc_fail_after(k);
        gmm_status st = gmm_table_read(path, &t);
        gmm_alloc_fail_after(-1);
        if (st == GMM_OK) {
            ck_assert_uint_eq(t->nrow, 3);
            ck_assert_uint_eq(t->line[1], 5);
            gmm_table_free(t);
            succeeded = 1;
        } else {
            ck_assert_int_eq(st, GMM_ENOMEM);
            ck_assert_ptr_null(t);
        }
    }
    ck_assert(succeeded);
    free(path);
}
END_TEST

extern Suite *io_table_suite(void);
Suite *io_table_suite(void)
{
    Suite *s = suite_create("io_table");
    TCase *tc = tcase_create("table");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_basic);
    tcase_add_test(tc, test_crlf_and_blank_lines);
    tcase_add_test(tc, test_quoted_fields);
    tcase_add_test(tc, test_no_trailing_newline_bom_header_only);
    tcase_add_test(tc, test_ragged_rows);
    tcase_add_test(tc, test_empty_and_bad_headers);
    tcase_add_test(tc, test_malformed_quoting);
    tcase_add_test(tc, test_unreadable);
    tcase_add_test(tc, test_stdin);
    tcase_add_test(tc, test_chunk_boundaries);
    tcase_add_test(tc, test_comment_lines);
    tcase_add_test(tc, test_column_lookup);
    tcase_add_test(tc, test_column_double);
    tcase_add_test(tc, test_column_double_errors);
    tcase_add_test(tc, test_nul_byte);
    tcase_add_test(tc, test_read_stream);
    tcase_add_test(tc, test_column_decimal_only);
    tcase_add_test(tc, test_column_collisions);
    tcase_add_test(tc, test_column_collisions_out_of_memory);
    tcase_add_test(tc, test_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}
