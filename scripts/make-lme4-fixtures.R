#!/usr/bin/env Rscript
# make-lme4-fixtures.R -- reference fits for gmm-infer's formulas with fixed
# effects and an iid term (tests/cli/cases/47_formula.sh), computed by lme4
# (Debian r-cran-lme4; these fixtures were made with lme4 1.1-31 on R 4.2).
#
#   Rscript scripts/make-lme4-fixtures.R [OUTDIR]
#
# OUTDIR defaults to tests/fixtures/lme4.  For each set NAME it writes
#
#   NAME.csv      the data, drawn here from a seeded generator;
#   NAME_ref.csv  name,value: "loglik" (glmer's maximised Laplace log
#                 likelihood, nAGQ = 1, binomial coefficients included as
#                 in R's dbinom, which gmm-infer's binomial includes too),
#                 each coefficient under gmm-infer's name ("intercept",
#                 "coef.x1", "coef.period[2]"), the group variance as
#                 "f.g.variance", and each coefficient's standard error as
#                 "se:NAME" (vcov(), from lme4's finite-difference Hessian
#                 of the deviance in (theta, beta)).
#
#   pois     y ~ x1 + x2 + x3 + (1 | g), Poisson, 600 rows, 40 groups;
#   binom    cbind(k, n - k) ~ x1 + factor(period) + (1 | g), binomial with
#            trials n in 1..12, 500 rows, 30 groups, 4 periods;
#   gauss    y ~ x1 + factor(period) + (1 | g), Gaussian, by lmer at
#            REML = FALSE: the exact marginal likelihood.
#
# glmer's defaults stop its inner PIRLS at a relative change of 1e-7
# (tolPwrss), which moves the log likelihood by ~1e-4: the fits below ask
# for 1e-12 and a tight bobyqa, so that they compare like with like.  The
# files are reproducible; the tests read the committed files and never need
# R.
suppressPackageStartupMessages(library(lme4))

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/lme4"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)

num <- function(x) sprintf("%.17g", x)

write_atomic <- function(lines, path) {
    tmp <- paste0(path, ".tmp")
    writeLines(lines, tmp)
    invisible(file.rename(tmp, path))
}

write_data <- function(d, path) {
    cols <- lapply(d, as.character)  # the values were rounded: 15 digits are exact
    write_atomic(c(paste(names(d), collapse = ","), do.call(paste, c(cols, sep = ","))), path)
}

# lme4's coefficient names to gmm-infer's
gmm_names <- function(nm) {
    nm <- sub("^\\(Intercept\\)$", "intercept", nm)
    nm <- sub("^factor\\(([^)]*)\\)(.*)$", "coef.\\1[\\2]", nm)
    ifelse(grepl("^(intercept|coef\\.)", nm), nm, paste0("coef.", nm))
}

write_ref <- function(m, path) {
    b <- fixef(m)
    se <- sqrt(diag(as.matrix(vcov(m))))
    nm <- gmm_names(names(b))
    rows <- c("name,value",
              paste0("loglik,", num(as.numeric(logLik(m)))),
              paste0(nm, ",", num(b)),
              paste0("f.g.variance,", num(VarCorr(m)$g[1])),
              paste0("se:", nm, ",", num(se)))
    write_atomic(rows, path)
}

ctl <- glmerControl(tolPwrss = 1e-12, optimizer = "bobyqa",
                    optCtrl = list(rhoend = 1e-10, maxfun = 1e5))

# Poisson with three covariates
set.seed(20261127)
n <- 600; G <- 40
g <- sprintf("grp%02d", sample.int(G, n, replace = TRUE))
u <- setNames(rnorm(G, 0, 0.6), sprintf("grp%02d", 1:G))
x1 <- round(rnorm(n), 4); x2 <- round(runif(n), 4); x3 <- round(rnorm(n, 1, 0.5), 4)
y <- rpois(n, exp(0.4 + 0.3 * x1 - 0.5 * x2 + 0.2 * x3 + u[g]))
d <- data.frame(y = y, x1 = x1, x2 = x2, x3 = x3, g = g)
write_data(d, file.path(outdir, "pois.csv"))
m <- glmer(y ~ x1 + x2 + x3 + (1 | g), family = poisson, data = d, nAGQ = 1, control = ctl)
write_ref(m, file.path(outdir, "pois_ref.csv"))

# binomial with trials, a factor and a group
set.seed(20261128)
n <- 500; G <- 30
g <- sprintf("h%d", sample.int(G, n, replace = TRUE))
u <- setNames(rnorm(G, 0, 0.8), sprintf("h%d", 1:G))
x1 <- round(rnorm(n), 4)
period <- sample(c(3, 10, 2, 7), n, replace = TRUE)  # numeric levels: 2 is the reference
trials <- sample.int(12, n, replace = TRUE)
p <- plogis(-0.3 + 0.6 * x1 + c("2" = 0, "3" = 0.4, "7" = -0.5, "10" = 0.2)[as.character(period)]
            + u[g])
k <- rbinom(n, trials, p)
d <- data.frame(k = k, n = trials, x1 = x1, period = period, g = g)
write_data(d, file.path(outdir, "binom.csv"))
m <- glmer(cbind(k, n - k) ~ x1 + factor(period) + (1 | g), family = binomial, data = d,
           nAGQ = 1, control = ctl)
write_ref(m, file.path(outdir, "binom_ref.csv"))

# Gaussian: lmer's maximum likelihood is exact
set.seed(20261129)
n <- 300; G <- 25
g <- sprintf("c%02d", sample.int(G, n, replace = TRUE))
u <- setNames(rnorm(G, 0, 0.7), sprintf("c%02d", 1:G))
x1 <- round(rnorm(n), 4)
period <- sample(c("b", "a", "c"), n, replace = TRUE)
y <- round(1.5 + 0.8 * x1 + c(a = 0, b = 0.5, c = -0.3)[period] + u[g] + rnorm(n, 0, 0.5), 5)
d <- data.frame(y = y, x1 = x1, period = period, g = g)
write_data(d, file.path(outdir, "gauss.csv"))
m <- lmer(y ~ x1 + factor(period) + (1 | g), data = d, REML = FALSE,
          control = lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12)))
write_ref(m, file.path(outdir, "gauss_ref.csv"))
cat("noise variance (gauss):", num(sigma(m)^2), "\n")
