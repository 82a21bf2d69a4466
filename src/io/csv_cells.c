/* csv_cells.c -- fields and numbers of the CSV tables gmm-infer writes
 * (io.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gmm/io.h"

void gmm_csv_put_field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")] && s[0] != ' ' && (!*s || s[strlen(s) - 1] != ' ')) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void gmm_csv_put_number(FILE *f, double x)
{
    if (isnan(x))
        fputs("NA", f);
    else if (isinf(x))
        fputs(x > 0 ? "Inf" : "-Inf", f);
    else
        fprintf(f, "%.17g", x);
}
