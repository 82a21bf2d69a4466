#!/usr/bin/env Rscript
# make-re-fixtures.R -- lme4's random-effect terms (formula_bars.c, the stack's
# CORR component) against lme4 itself: data sets and lme4's optimum of each model
# (tests/cli/cases/77_re_terms.sh).  Made with R 4.2.2, lme4 1.1-31, glmmTMB 1.1.5.
#
#   Rscript scripts/make-re-fixtures.R [OUTDIR]   (OUTDIR: tests/fixtures/re)
#
# OUTDIR receives
#
#   sleep.csv, pastes.csv   lme4's sleepstudy and Pastes;
#   slopes3.csv, fslope.csv, pois.csv, singular.csv  simulated (set.seed per set):
#                   three correlated effects (1 + x + z | g); a factor-valued
#                   slope (0 + h | g), written (0 + factor(h) | g) and, h being
#                   text, (0 + h | g); Poisson counts with (1 + x | g); a
#                   Gaussian slope whose variance is 0, so that lme4's fit is
#                   singular (an SD of 0 or a correlation of +-1);
#   models.tsv      name, data file, gmm-infer's formula, likelihood, lme4's
#                   formula, expect ("converged", or "boundary": lme4's fit is
#                   singular);
#   lme4.csv        model,name,value: "loglik", the coefficients ("intercept",
#                   "coef.x"), and the random effects' parameters under
#                   gmm-infer's names: f.GROUP.variance[.EFFECT] (VarCorr's
#                   variances), f.GROUP.cor.A.B (k = 2: the correlation) or
#                   f.GROUP.pcor.A.B (k >= 3: the canonical partial
#                   correlations of VarCorr's correlation matrix, z_ab the
#                   correlation of effects a and b given effects 0 .. b - 1);
#                   "sd.GROUP.EFFECT" and "cor.GROUP.A.B" as VarCorr prints
#                   them; "ranef.GROUP.EFFECT.LEVEL" the conditional modes and
#                   "ranefsd.GROUP.EFFECT.LEVEL" their conditional sds (condVar);
#                   "predict.ROW" sleep_slope's predictions at newrows.csv's
#                   rows (a new level's: the fixed effects alone).
#
# lme4 is asked for its best: lmer at REML = FALSE with bobyqa to rhoend
# 1e-12; glmer (Laplace, nAGQ = 1) with bobyqa, maxfun 1e5, rhoend 1e-10 and
# PIRLS to tolPwrss 1e-12; the Poisson fit is checked against glmmTMB's
# (nlminb, rel.tol 1e-12) and the script stops if their log likelihoods
# differ by more than 1e-5.
suppressPackageStartupMessages({
    library(lme4)
    library(glmmTMB)
})

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/re"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)
fxdir <- "tests/fixtures/re"

num <- function(x) sprintf("%.17g", x)
write_data <- function(d, name) {
    write.csv(d, file.path(outdir, paste0(name, ".csv")), row.names = FALSE, quote = FALSE)
}

dyadic <- function(v) round(v * 1024) / 1024

sleep <- sleepstudy
write_data(sleep, "sleep")
pastes <- Pastes
write_data(pastes[, c("strength", "batch", "cask")], "pastes")

set.seed(30)
ng <- 40
g <- rep(sprintf("g%02d", 1:ng), each = 12)
x <- dyadic(rnorm(length(g)))
z <- dyadic(rnorm(length(g)))
L <- t(chol(matrix(c(1, 0.5, -0.3, 0.5, 0.8, 0.2, -0.3, 0.2, 0.6), 3)))
U <- t(L %*% matrix(rnorm(3 * ng), 3))
gi <- match(g, unique(g))
y <- 2 + 0.5 * x - z + U[gi, 1] + U[gi, 2] * x + U[gi, 3] * z + rnorm(length(g), sd = 0.7)
slopes3 <- data.frame(y = dyadic(y), x = x, z = z, g = g)
write_data(slopes3, "slopes3")

set.seed(31)
ng <- 30
g <- rep(sprintf("s%02d", 1:ng), each = 9)
h <- rep(c("a", "b", "c"), length.out = length(g))
gi <- match(g, unique(g))
U <- t(t(chol(matrix(c(1, 0.6, 0.3, 0.6, 1.5, 0.5, 0.3, 0.5, 0.9), 3))) %*% matrix(rnorm(3 * ng), 3))
hi <- match(h, c("a", "b", "c"))
y <- c(1, 2, 0.5)[hi] + U[cbind(gi, hi)] + rnorm(length(g), sd = 0.5)
fslope <- data.frame(y = dyadic(y), h = h, g = g)
write_data(fslope, "fslope")

set.seed(32)
ng <- 50
g <- rep(sprintf("p%02d", 1:ng), each = 10)
x <- dyadic(rnorm(length(g)))
gi <- match(g, unique(g))
U <- t(t(chol(matrix(c(0.4, 0.1, 0.1, 0.2), 2))) %*% matrix(rnorm(2 * ng), 2))
pois <- data.frame(y = rpois(length(g), exp(0.5 + 0.3 * x + U[gi, 1] + U[gi, 2] * x)), x = x, g = g)
write_data(pois, "pois")

set.seed(33)
ng <- 25
g <- rep(sprintf("q%02d", 1:ng), each = 8)
x <- rep(0:7, ng)
gi <- match(g, unique(g))
y <- 1 + 0.2 * x + rnorm(ng)[gi] + rnorm(length(g), sd = 1)
singular <- data.frame(y = dyadic(y), x = x, g = g)
write_data(singular, "singular")

models <- data.frame(
    name = c("sleep_slope", "sleep_indep", "sleep_only", "pastes_nested", "slopes3",
             "fslope", "fslope_text", "pois_slope", "singular"),
    data = c("sleep", "sleep", "sleep", "pastes", "slopes3", "fslope", "fslope", "pois",
             "singular"),
    formula = c("Reaction ~ Days + (Days | Subject)", "Reaction ~ Days + (Days || Subject)",
                "Reaction ~ Days + (0 + Days | Subject)", "strength ~ (1 | batch/cask)",
                "y ~ x + z + (1 + x + z | g)", "y ~ factor(h) + (0 + factor(h) | g)",
                "y ~ factor(h) + (0 + h | g)", "y ~ x + (1 + x | g)", "y ~ x + (x | g)"),
    likelihood = c(rep("gaussian", 7), "poisson", "gaussian"),
    lme4 = c("Reaction ~ Days + (Days | Subject)", "Reaction ~ Days + (Days || Subject)",
             "Reaction ~ Days + (0 + Days | Subject)", "strength ~ (1 | batch/cask)",
             "y ~ x + z + (1 + x + z | g)", "y ~ h + (0 + h | g)", "y ~ h + (0 + h | g)",
             "y ~ x + (1 + x | g)", "y ~ x + (x | g)"),
    stringsAsFactors = FALSE)

lctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
gctrl <- glmerControl(optimizer = "bobyqa", tolPwrss = 1e-12,
                      optCtrl = list(maxfun = 1e5, rhoend = 1e-10))

# canonical partial correlations of a correlation matrix (row a > column b)
cpc <- function(R) {
    k <- nrow(R)
    L <- t(chol(R))
    z <- matrix(0, k, k)
    for (a in seq_len(k)[-1]) for (b in 1:(a - 1)) {
        s <- 1 - sum(L[a, seq_len(b - 1)]^2)
        z[a, b] <- L[a, b] / sqrt(s)
    }
    z
}

rows <- list()
add <- function(model, name, value) rows[[length(rows) + 1]] <<- c(model, name, num(value))
expect <- character(nrow(models))
for (i in seq_len(nrow(models))) {
    d <- get(models$data[i])
    if (grepl("^fslope", models$name[i]))
        d$h <- factor(d$h)
    f <- as.formula(models$lme4[i])
    fit <- if (models$likelihood[i] == "poisson") glmer(f, d, family = poisson, control = gctrl)
           else lmer(f, d, REML = FALSE, control = lctrl)
    if (models$likelihood[i] == "poisson") {
        tmb <- glmmTMB(f, d, family = poisson,
                       control = glmmTMBControl(optCtrl = list(rel.tol = 1e-12, iter.max = 1e4,
                                                               eval.max = 1e4)))
        if (abs(as.numeric(logLik(tmb)) - as.numeric(logLik(fit))) > 1e-5)
            stop("glmer and glmmTMB disagree on ", models$name[i])
        message(models$name[i], ": glmer ", num(logLik(fit)), " glmmTMB ", num(logLik(tmb)))
    }
    expect[i] <- if (isSingular(fit, tol = 1e-6)) "boundary" else "converged"
    m <- models$name[i]
    add(m, "loglik", as.numeric(logLik(fit)))
    fe <- fixef(fit)
    for (j in seq_along(fe)) {
        nm <- names(fe)[j]
        add(m, if (nm == "(Intercept)") "intercept"
               else if (grepl("^h", nm)) sprintf("coef.h[%s]", sub("^h", "", nm))
               else paste0("coef.", nm), fe[[j]])
    }
    vc <- VarCorr(fit)
    grp <- names(vc)
    for (gname in grp) {
        S <- vc[[gname]]
        eff <- colnames(S)
        k <- length(eff)
        sds <- attr(S, "stddev")
        R <- attr(S, "correlation")
        lab <- gname
        for (a in 1:k) {
            vname <- if (k == 1 && eff[1] == "(Intercept)") sprintf("f.%s.variance", lab)
                     else sprintf("f.%s.variance.%s", lab, eff[a])
            add(m, vname, S[a, a])
            add(m, sprintf("sd.%s.%s", lab, eff[a]), sds[[a]])
        }
        if (k >= 2) {
            z <- if (k >= 3) cpc(R) else NULL
            for (a in 2:k) for (b in 1:(a - 1)) {
                add(m, sprintf("cor.%s.%s.%s", lab, eff[b], eff[a]), R[a, b])
                if (k == 2) add(m, sprintf("f.%s.cor.%s.%s", lab, eff[b], eff[a]), R[a, b])
                else add(m, sprintf("f.%s.pcor.%s.%s", lab, eff[b], eff[a]), z[a, b])
            }
        }
    }
    re <- as.data.frame(ranef(fit, condVar = TRUE))
    for (j in seq_len(nrow(re))) {
        add(m, sprintf("ranef.%s.%s.%s", re$grpvar[j], re$term[j], re$grp[j]), re$condval[j])
        add(m, sprintf("ranefsd.%s.%s.%s", re$grpvar[j], re$term[j], re$grp[j]), re$condsd[j])
    }
    if (m == "sleep_slope") {
        # predictions at a data level and at a new one (allow.new.levels: the
        # prior mean, 0), as re-read by predict --at newrows.csv
        nd <- data.frame(Days = c(3, 3, 0, 7.5), Subject = c("308", "999", "999", "335"))
        write.csv(nd, file.path(outdir, "newrows.csv"), row.names = FALSE, quote = FALSE)
        p <- predict(fit, newdata = nd, allow.new.levels = TRUE)
        for (r in seq_along(p)) add(m, sprintf("predict.%d", r), p[[r]])
    }
    message(m, ": ", expect[i], ", loglik ", num(logLik(fit)))
}
models$data <- file.path(fxdir, paste0(models$data, ".csv"))
models$expect <- expect
write.table(models, file.path(outdir, "models.tsv"), sep = "\t", quote = FALSE,
            row.names = FALSE)
out <- do.call(rbind, rows)
colnames(out) <- c("model", "name", "value")
write.csv(out, file.path(outdir, "lme4.csv"), row.names = FALSE, quote = FALSE)
