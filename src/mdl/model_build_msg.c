/* model_build_msg.c -- what a build tells its caller: reports through the
 * spec's callback, and failures with what the caller needs to word them
 * (model.h: gmm_mdl_failure). */

#include "model_build.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmm/alloc.h"
#include "gmm/io.h"
#include "gmm/problem.h"
#include "gmm/ssm.h"
#include "gmm/stack.h"

void gmm_mdl_impl_report(const mdl_build *b, gmm_mdl_report kind, const char *fmt, ...)
{
    if (!b->s->report)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    b->s->report(b->s->report_user, kind, buf);
}

/* A contradictory description, rule r broken: GMM_EINVAL with usage set. */
gmm_status gmm_mdl_impl_usage_error(const mdl_build *b, gmm_mdl_rule r, const char *msg)
{
    b->fail->usage = 1;
    b->fail->rule = r;
    return gmm_error(GMM_EINVAL, "%s", msg);
}

/* A spec error under KEY, at the library's error index: status s. */
gmm_status gmm_mdl_impl_spec_error(const mdl_build *b, const char *key, const char *text,
                                   gmm_status s)
{
    size_t pos = gmm_error_index();
    if (b->ftext && text == b->fspec) {
        key = "formula";
        text = b->ftext;
        pos += b->fbase;
    }
    b->fail->spec_key = key;
    b->fail->spec_text = text;
    b->fail->spec_pos = pos;
    return s;
}

/* A formula error at offset pos of the formula: GMM_EPARSE. */
gmm_status gmm_mdl_impl_formula_error(const mdl_build *b, size_t pos, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    gmm_error_at(GMM_EPARSE, pos, "%s", buf);
    b->fail->spec_key = "formula";
    b->fail->spec_text = b->s->desc.formula;
    b->fail->spec_pos = pos;
    return GMM_EPARSE;
}

gmm_status gmm_mdl_impl_parse_spec(const mdl_build *b, const char *key, const char *text,
                                   gmm_spec_node **out)
{
    gmm_status s = gmm_spec_parse(text, out);
    return s != GMM_OK ? gmm_mdl_impl_spec_error(b, key, text, s) : GMM_OK;
}
