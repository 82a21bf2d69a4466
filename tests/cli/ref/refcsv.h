/* refcsv.h -- the reference programs' reader of small numeric CSV files
 * (header row, comma-separated numbers, "" or NA missing).  Deliberately
 * not the tool's table reader: the references share no code with it. */
#ifndef REFCSV_H
#define REFCSV_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t nrow, ncol;
    char *name[1024];
    double *x; /* nrow x ncol, row-major; NAN missing */
} ref_csv;

static void ref_die(const char *what, const char *arg)
{
    fprintf(stderr, "ref: %s %s\n", what, arg ? arg : "");
    exit(1);
}

static void ref_csv_read(const char *path, ref_csv *t)
{
    FILE *f = fopen(path, "r");
    static char line[1 << 20];
    if (!f || !fgets(line, sizeof line, f))
        ref_die("cannot read", path);
    memset(t, 0, sizeof *t);
    line[strcspn(line, "\r\n")] = '\0';
    for (char *p = line, *q; p; p = q) {
        q = strchr(p, ',');
        if (q)
            *q++ = '\0';
        if (t->ncol == 1024)
            ref_die("too many columns in", path);
        t->name[t->ncol++] = strdup(p);
    }
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!*line)
            continue;
        if (t->nrow == cap) {
            cap = cap ? 2 * cap : 64;
            t->x = realloc(t->x, cap * t->ncol * sizeof *t->x);
            if (!t->x)
                ref_die("out of memory", NULL);
        }
        char *p = line;
        for (size_t j = 0; j < t->ncol; j++) {
            char *q = p ? strchr(p, ',') : NULL;
            if (q)
                *q++ = '\0';
            char *end;
            double v = p ? strtod(p, &end) : NAN;
            t->x[t->nrow * t->ncol + j] = p && end != p && !*end ? v : NAN;
            p = q;
        }
        t->nrow++;
    }
    fclose(f);
}

static void ref_csv_free(ref_csv *t)
{
    for (size_t j = 0; j < t->ncol; j++)
        free(t->name[j]);
    free(t->x);
}

static size_t ref_csv_col(const ref_csv *t, const char *name)
{
    for (size_t j = 0; j < t->ncol; j++)
        if (!strcmp(t->name[j], name))
            return j;
    ref_die("no column", name);
    return 0;
}

#endif
