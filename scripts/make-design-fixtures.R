#!/usr/bin/env Rscript
# make-design-fixtures.R -- R's model.matrix for the fixed part of
# gmm-infer's formulas (interactions, I(), log(), exp(), sqrt(), poly(),
# offset(), a transformed response, a chosen reference level), and lme4's
# fit of an interaction model with a random intercept (made with R 4.2.2,
# lme4 1.1-31, Debian 12).
#
#   Rscript scripts/make-design-fixtures.R [OUTDIR]   (OUTDIR: tests/fixtures/design)
#
# OUTDIR receives
#
#   data.csv        24 rows: y, e > 0, x > 0, z (both signs), text columns f
#                   (A B C) and g (hi lo), numbers h (1 2 3 10: as
#                   factor(h) numeric levels, sorted as numbers) and a
#                   grouping column grp (6 levels) and counts n;
#   formulas.tsv    one case a line, tab-separated: name, gmm-infer's formula,
#                   R's formula;
#   NAME.csv        R's model.matrix of the case, its column names as the
#                   header (quoted), then "(response)" (model.response) and
#                   "(offset)" (model.offset, 0 when none), 17 digits;
#   cake.csv, cake_fit.csv   lme4's cake data (recipe, replicate, temp,
#                   angle) and lmer(angle ~ recipe * temp + (1 | replicate),
#                   REML = FALSE) at tight tolerances: name,value rows with
#                   "loglik", every coefficient under gmm-infer's name
#                   (coef.recipe[B]:temp) and f.replicate.variance,
#                   likelihood.variance;
#   offset_fit.csv  glmer(n ~ x + offset(log(e)) + (1 | grp), poisson) on
#                   data.csv's counts n (Laplace, tight tolerances): loglik,
#                   intercept, coef.x, f.grp.variance.
#
# gmm-infer writes factor(f, ref = "B") for R's relevel(factor(f), ref = "B");
# the case's column names are R's with that text replaced.  The tests read
# the committed files and never need R.
suppressPackageStartupMessages(library(lme4))

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/design"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)

set.seed(30)
n <- 24
d <- data.frame(
    y = round(exp(rnorm(n, 3, 0.5)), 3),
    e = round(runif(n, 0.5, 4), 3),
    x = round(runif(n, 0.2, 5), 3),
    z = round(rnorm(n), 3),
    f = rep(c("A", "B", "C"), length.out = n),
    g = rep(c("lo", "lo", "hi", "hi"), length.out = n),
    h = rep(c(1, 2, 3, 10), times = 6)[sample(n)],
    grp = rep(paste0("G", 1:6), each = 4),
    stringsAsFactors = FALSE
)
# counts for offset(log(e)): a Poisson GLMM with exposure e
d$n <- rpois(n, d$e * exp(0.5 + 0.3 * d$x + rep(rnorm(6, 0, 0.4), each = 4)))
write.csv(d, file.path(outdir, "data.csv"), row.names = FALSE, quote = FALSE)

cases <- list(
    c("main", "y ~ x + factor(f)", "y ~ x + factor(f)"),
    c("fx_cross", "y ~ factor(f) * x", "y ~ factor(f) * x"),
    c("xf_cross", "y ~ x * factor(f)", "y ~ x * factor(f)"),
    c("xf_only", "y ~ x:factor(f)", "y ~ x:factor(f)"),
    c("no_int", "y ~ 0 + factor(f) + factor(g)", "y ~ 0 + factor(f) + factor(g)"),
    c("no_int_m1", "y ~ x + factor(g):x + factor(f) - 1", "y ~ x + factor(g):x + factor(f) - 1"),
    c("ff_only", "y ~ factor(f):factor(g)", "y ~ factor(f):factor(g)"),
    c("ff_cross", "y ~ factor(f) * factor(g)", "y ~ factor(f) * factor(g)"),
    c("three_way", "y ~ factor(f) * factor(g) * z", "y ~ factor(f) * factor(g) * z"),
    c("funs", "y ~ I(x^2) + log(x) + exp(z/10) + sqrt(x)", "y ~ I(x^2) + log(x) + exp(z/10) + sqrt(x)"),
    c("arith", "y ~ I((x + 1) * z/2 - 3^2) + I(-x^2) + I(x/1000)",
      "y ~ I((x + 1) * z/2 - 3^2) + I(-x^2) + I(x/1000)"),
    c("poly", "y ~ poly(x, 3) + poly(z, 2):factor(g)", "y ~ poly(x, 3) + poly(z, 2):factor(g)"),
    c("log_offset", "log(y) ~ x + factor(h) + offset(log(e))", "log(y) ~ x + factor(h) + offset(log(e))"),
    c("ref", "sqrt(y) ~ factor(f, ref = \"B\") * x", "sqrt(y) ~ relevel(factor(f), ref = \"B\") * x"),
    c("minus", "I(y/1000) ~ factor(f) * factor(g) - factor(f):factor(g) + x:z",
      "I(y/1000) ~ factor(f) * factor(g) - factor(f):factor(g) + x:z"),
    c("numeric_cross", "y ~ x * z - 1 + factor(h):z", "y ~ x * z - 1 + factor(h):z"),
    # a column of text is a factor without factor(), as R's character columns
    c("char_cross", "y ~ f * x", "y ~ f * x"),
    c("char_mixed", "y ~ 0 + g:z + factor(h) + f", "y ~ 0 + g:z + factor(h) + f"),
    # TermCode: nested coding, interactions without their margins
    c("nested", "y ~ factor(f) + factor(f):factor(g)", "y ~ factor(f) + factor(f):factor(g)"),
    c("two_slopes", "y ~ factor(f):x + factor(g):x", "y ~ factor(f):x + factor(g):x"),
    c("three_no_margin", "y ~ x + x:factor(f):factor(g)", "y ~ x + x:factor(f):factor(g)"),
    c("no_int_inter", "y ~ 0 + x:factor(f) + factor(g)", "y ~ 0 + x:factor(f) + factor(g)"),
    c("fun_cross", "y ~ log(x) * factor(g) + exp(-z^2) + poly(x, 2):z",
      "y ~ log(x) * factor(g) + exp(-z^2) + poly(x, 2):z")
)

fmt <- function(v) sprintf("%.17g", v)
q <- function(s) paste0("\"", gsub("\"", "\"\"", s), "\"")
tsv <- character(0)
for (cs in cases) {
    mf <- model.frame(as.formula(cs[3]), d)
    X <- model.matrix(as.formula(cs[3]), mf)
    nm <- gsub("relevel(factor(f), ref = \"B\")", "factor(f, ref = \"B\")", colnames(X),
               fixed = TRUE)
    off <- model.offset(mf)
    if (is.null(off)) off <- rep(0, n)
    out <- cbind(X, model.response(mf), off)
    lines <- c(paste(q(c(nm, "(response)", "(offset)")), collapse = ","),
               apply(out, 1, function(r) paste(fmt(r), collapse = ",")))
    writeLines(lines, file.path(outdir, paste0(cs[1], ".csv")))
    tsv <- c(tsv, paste(cs, collapse = "\t"))
}
writeLines(tsv, file.path(outdir, "formulas.tsv"))

# lme4's cake: an interaction of a factor and a number with a random intercept
data(cake, package = "lme4")
ck <- data.frame(recipe = as.character(cake$recipe), replicate = as.integer(cake$replicate),
                 temp = cake$temp, angle = cake$angle)
write.csv(ck, file.path(outdir, "cake.csv"), row.names = FALSE, quote = FALSE)
fit <- lmer(angle ~ recipe * temp + (1 | replicate), data = ck, REML = FALSE,
            control = lmerControl(optimizer = "bobyqa",
                                  optCtrl = list(rhoend = 1e-12, maxfun = 1e5)))
b <- fixef(fit)
bn <- sub("^\\(Intercept\\)$", "intercept", names(b))
bn <- gsub("recipe([A-C])", "recipe[\\1]", bn)
bn <- ifelse(bn == "intercept", bn, paste0("coef.", bn))
vc <- as.data.frame(VarCorr(fit))
res <- data.frame(
    name = c("loglik", bn, "f.replicate.variance", "likelihood.variance"),
    value = c(as.numeric(logLik(fit)), unname(b), vc$vcov[vc$grp == "replicate"],
              vc$vcov[vc$grp == "Residual"]))
write.csv(data.frame(name = res$name, value = fmt(res$value)), file.path(outdir, "cake_fit.csv"),
          row.names = FALSE, quote = FALSE)

# offset(log(e)) in a Poisson GLMM: glmer (Laplace) at tight tolerances
gl <- glmer(n ~ x + offset(log(e)) + (1 | grp), data = d, family = poisson,
            control = glmerControl(optimizer = "bobyqa", tolPwrss = 1e-12,
                                   optCtrl = list(rhoend = 1e-10, maxfun = 1e5)))
gb <- fixef(gl)
gv <- as.data.frame(VarCorr(gl))
write.csv(data.frame(name = c("loglik", "intercept", "coef.x", "f.grp.variance"),
                     value = fmt(c(as.numeric(logLik(gl)), unname(gb), gv$vcov[1]))),
          file.path(outdir, "offset_fit.csv"), row.names = FALSE, quote = FALSE)
