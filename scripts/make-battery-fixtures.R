#!/usr/bin/env Rscript
# make-battery-fixtures.R -- the data sets of the optimiser's battery
# (tests/cli/cases/29_battery.sh, scripts/battery-table.sh) and lme4's optimum
# of every battery model that lme4 or glmmTMB can fit (made with R 4.2.2,
# lme4 1.1-31, glmmTMB 1.1.5, Debian 12).
#
#   Rscript scripts/make-battery-fixtures.R [OUTDIR]   (OUTDIR: tests/fixtures/battery)
#
# Every data set is drawn here from a seeded generator (set.seed per set), so
# the data files are reproducible; lme4.csv is too but for the last digits
# (bern_crossed's glmer moved by 1e-13 in loglik and 5e-8 relative in its
# coefficients between two runs on the same machine).  The tests read the
# committed files and never need R.  OUTDIR receives
#
#   NAME.csv        the data sets (50..300 rows);
#   lattice_edges.csv  an 8 x 6 lattice (48 nodes, i,j) for besag and bym2;
#   models.tsv      the battery, one model a line, tab-separated:
#                   name, data (relative to the checkout), formula,
#                   likelihood, extra fit options, expect ("converged", or
#                   "unbounded": a Gaussian likelihood that grows without
#                   bound as the noise -> 0), base (the model this one is a
#                   transformed copy of, or "-"), the transformed covariate's
#                   column in this model and in the base, shift and scale
#                   (column = scale * base column + shift), and lower: a model
#                   whose maximum is a lower bound of this one's supremum (a
#                   limit of it: besag is bym2 at phi = 1), or "-";
#   lme4.csv        model,name,value: for each model lme4 (or glmmTMB) fits,
#                   "status" ("converged", or lme4's warnings), "fitter",
#                   "loglik" and every coefficient and variance under
#                   gmm-infer's names.
#
# The covariate x is a multiple of 2^-10 with sd about 1, so that x + 1e3
# and x + 1e6 (1e3 and 1e6 standard deviations) are exact doubles and the
# shifted data are exactly the base data shifted; 1e-12 x and 1e12 x are
# written to 17 significant digits (round trip).  Formulas of gmm-infer and
# of lme4: f(g, iid) is (1 | g); a Poisson or negative binomial exposure E
# is offset(log(E)); binomial k of n trials is cbind(k, n - k).
#
# lme4 is asked for its best: lmer at REML = FALSE with bobyqa to rhoend
# 1e-12; glmer (Laplace, nAGQ = 1) with bobyqa to rhoend 1e-10, maxfun 1e5
# and PIRLS to tolPwrss 1e-12; the negative binomial by glmmTMB (nbinom2,
# variance mu + mu^2 / theta as gmm-infer's dispersion; Laplace) at nlminb's
# rel.tol 1e-10 (lme4's glmer.nb, which alternates theta and glmer, reported
# a log likelihood 0.006 above glmmTMB's maximum on nb_grp: not the same
# objective).  Its status is "converged" when the optimiser returned 0 and
# lme4's convergence checks (optinfo$conv$lme4) said nothing (glmmTMB:
# convergence 0 and a positive definite Hessian); otherwise what they said,
# commas removed.  Other warnings during the fit ("Some predictor variables
# are on very different scales") are kept in "warnings"; an error leaves
# only the status "error: ...".
suppressPackageStartupMessages({
    library(lme4)
    library(glmmTMB)
})

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/battery"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)
fxdir <- "tests/fixtures/battery"  # as the models' rows name it (read from the checkout)

num <- function(x) sprintf("%.17g", x)
# the shortest of 15 and 17 significant digits that reads back as x
short <- function(x) {
    s <- sprintf("%.15g", x)
    ifelse(as.numeric(s) == x, s, num(x))
}

write_atomic <- function(lines, path) {
    tmp <- paste0(path, ".tmp")
    writeLines(lines, tmp)
    invisible(file.rename(tmp, path))
}

write_data <- function(d, name) {
    cols <- lapply(d, function(v) if (is.numeric(v)) short(v) else as.character(v))
    write_atomic(c(paste(names(d), collapse = ","), do.call(paste, c(cols, sep = ","))),
                 file.path(outdir, paste0(name, ".csv")))
}

dyadic <- function(v) round(v * 1024) / 1024
# x and its four transforms
with_transforms <- function(d) {
    d$x_shift3 <- d$x + 1e3
    d$x_shift6 <- d$x + 1e6
    d$x_scale_m12 <- d$x * 1e-12
    d$x_scale_p12 <- d$x * 1e12
    d
}
transforms <- list(shift3 = c(shift = 1e3, scale = 1), shift6 = c(shift = 1e6, scale = 1),
                   scale_m12 = c(shift = 0, scale = 1e-12), scale_p12 = c(shift = 0, scale = 1e12))
grp <- function(prefix, G, n) sprintf("%s%02d", prefix, sample.int(G, n, replace = TRUE))
eff <- function(prefix, G, s) setNames(rnorm(G, 0, s), sprintf("%s%02d", prefix, 1:G))

# ---- the battery ------------------------------------------------------------
models <- list()
lme4_rows <- character(0)

# add(name, data, formula, likelihood, options, lme4 = function() fit or NULL,
#     expect, base, transform, lower)
add <- function(name, data, formula, likelihood, options = "", lme4 = NULL,
                expect = "converged", base = "-", transform = "-", lower = "-") {
    tr <- if (transform == "-") c(shift = 0, scale = 1) else transforms[[transform]]
    col <- if (transform == "-") "-" else paste0("x_", transform)
    models[[length(models) + 1]] <<- c(name = name, data = file.path(fxdir, paste0(data, ".csv")),
        formula = formula, likelihood = likelihood, options = if (options == "") "-" else options,
        expect = expect, base = base, column = col, base_column = if (col == "-") "-" else "x",
        shift = num(tr[["shift"]]), scale = num(tr[["scale"]]), lower = lower)
    if (!is.null(lme4)) lme4_rows <<- c(lme4_rows, reference(name, lme4))
}

# lme4's names to gmm-infer's
gmm_names <- function(nm) {
    nm <- sub("^\\(Intercept\\)$", "intercept", nm)
    nm <- sub("^factor\\(([^)]*)\\)(.*)$", "coef.\\1[\\2]", nm)
    ifelse(grepl("^(intercept|coef\\.)", nm), nm, paste0("coef.", nm))
}
clean <- function(s) gsub("[,\n\t]+", " ", s)

# Fit, catching warnings; rows model,name,value.
reference <- function(name, fitfun) {
    warns <- character(0)
    m <- withCallingHandlers(tryCatch(fitfun(), error = function(e) e),
                             warning = function(w) {
                                 warns <<- c(warns, conditionMessage(w))
                                 invokeRestart("muffleWarning")
                             })
    row <- function(k, v) paste(name, k, v, sep = ",")
    if (inherits(m, "error"))
        return(row("status", paste("error:", clean(conditionMessage(m)))))
    conv <- character(0)
    if (inherits(m, "glmmTMB")) {
        fitter <- "glmmTMB 1.1.5 nbinom2"
        if (m$fit$convergence != 0) conv <- c(conv, m$fit$message)
        if (!isTRUE(m$sdr$pdHess)) conv <- c(conv, "non-positive-definite Hessian")
        b <- fixef(m)$cond
        vc <- sapply(VarCorr(m)$cond, function(s) s[1])
        extra <- c(likelihood.dispersion = sigma(m))
    } else {
        fitter <- if (isGLMM(m)) "glmer Laplace bobyqa" else "lmer ML bobyqa"
        if (m@optinfo$conv$opt != 0) conv <- c(conv, paste("optimizer code", m@optinfo$conv$opt))
        conv <- c(conv, unlist(m@optinfo$conv$lme4$messages))
        b <- fixef(m)
        vc <- sapply(VarCorr(m), function(s) s[1])
        extra <- if (isGLMM(m)) c() else c(likelihood.variance = sigma(m)^2)
    }
    status <- if (length(conv)) clean(paste(unique(conv), collapse = "; ")) else "converged"
    c(row("status", status), row("fitter", fitter),
      if (length(setdiff(warns, conv)))
          row("warnings", clean(paste(setdiff(unique(warns), conv), collapse = "; "))),
      row("loglik", num(as.numeric(logLik(m)))),
      row(gmm_names(names(b)), num(b)), row(paste0("f.", names(vc), ".variance"), num(vc)),
      if (length(extra)) row(names(extra), num(extra)))
}

lctl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
gctl <- glmerControl(tolPwrss = 1e-12, optimizer = "bobyqa",
                     optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
# nlminb's rel.tol below ~1e-12 ends in "singular convergence (7)" at the same
# optimum
tctl <- glmmTMBControl(optCtrl = list(iter.max = 1e4, eval.max = 1e4, rel.tol = 1e-10))
lmer_ml <- function(f, d) function() lmer(f, data = d, REML = FALSE, control = lctl)
glmer_l <- function(f, d, fam) function() glmer(f, data = d, family = fam, nAGQ = 1, control = gctl)
tmb_nb <- function(f, d) function() glmmTMB(f, data = d, family = nbinom2, control = tctl)

# A base model and its four shifted and scaled copies (the copies' lme4
# formula has x replaced).
add_transformed <- function(name, data, formula, likelihood, options, lme4f, fitter, d,
                            which = names(transforms)) {
    add(name, data, formula, likelihood, options, fitter(lme4f, d))
    for (t in which) {
        col <- paste0("x_", t)
        f <- sub("\\bx\\b", col, formula, perl = TRUE)
        lf <- as.formula(sub("\\bx\\b", col, deparse(lme4f), perl = TRUE))
        add(paste0(name, "_", t), data, f, likelihood, options, fitter(lf, d),
            base = name, transform = t)
    }
}

# ---- Gaussian, one or two crossed groups, a factor ---------------------------
set.seed(2801)
n <- 240
d <- data.frame(x = dyadic(rnorm(n)), k = sample(c("b", "a", "c"), n, replace = TRUE),
                g = grp("g", 20, n), h = grp("h", 12, n))
ug <- eff("g", 20, 0.8); uh <- eff("h", 12, 0.5)
d$y <- round(2 + 0.7 * d$x + c(a = 0, b = 0.5, c = -0.4)[d$k] + ug[d$g] + uh[d$h] +
             rnorm(n, 0, 0.6), 6)
d <- with_transforms(d)
write_data(d[, c("y", "x", "x_shift3", "x_shift6", "x_scale_m12", "x_scale_p12", "k", "g", "h")],
           "gauss_grp")
add_transformed("gauss_iid", "gauss_grp", "y ~ x + factor(k) + f(g, iid)", "gaussian", "",
                y ~ x + factor(k) + (1 | g), lmer_ml, d)
add("gauss_crossed", "gauss_grp", "y ~ x + f(g, iid) + f(h, iid)", "gaussian", "",
    lmer_ml(y ~ x + (1 | g) + (1 | h), d))

# ---- Poisson with exposure ---------------------------------------------------
set.seed(2802)
n <- 300
d <- data.frame(x = dyadic(rnorm(n)), k = sample(c("u", "v", "w"), n, replace = TRUE),
                g = grp("g", 25, n), h = grp("h", 15, n), E = round(runif(n, 0.5, 2), 3))
ug <- eff("g", 25, 0.6); uh <- eff("h", 15, 0.4)
d$y <- rpois(n, d$E * exp(0.3 + 0.5 * d$x + c(u = 0, v = 0.3, w = -0.2)[d$k] + ug[d$g] + uh[d$h]))
d <- with_transforms(d)
write_data(d[, c("y", "E", "x", "x_shift3", "x_shift6", "x_scale_m12", "x_scale_p12", "k", "g",
                 "h")], "pois_grp")
add_transformed("pois_iid", "pois_grp", "y ~ x + f(g, iid)", "poisson", "--exposure E",
                y ~ x + (1 | g) + offset(log(E)), function(f, dd) glmer_l(f, dd, poisson), d)
add("pois_crossed", "pois_grp", "y ~ x + factor(k) + f(g, iid) + f(h, iid)", "poisson",
    "--exposure E", glmer_l(y ~ x + factor(k) + (1 | g) + (1 | h) + offset(log(E)), d, poisson))

# ---- binomial with trials ----------------------------------------------------
set.seed(2803)
n <- 200
d <- data.frame(x = dyadic(rnorm(n)), period = sample(c(3, 10, 2, 7), n, replace = TRUE),
                g = grp("g", 20, n), n = sample.int(10, n, replace = TRUE))
ug <- eff("g", 20, 0.7)
d$k <- rbinom(n, d$n, plogis(-0.2 + 0.6 * d$x +
                             c("2" = 0, "3" = 0.4, "7" = -0.5, "10" = 0.2)[as.character(d$period)] +
                             ug[d$g]))
d <- with_transforms(d)
write_data(d[, c("k", "n", "x", "x_shift3", "x_shift6", "x_scale_m12", "x_scale_p12", "period",
                 "g")], "binom_grp")
add_transformed("binom_iid", "binom_grp", "k ~ x + factor(period) + f(g, iid)", "binomial",
                "--trials n", cbind(k, n - k) ~ x + factor(period) + (1 | g),
                function(f, dd) glmer_l(f, dd, binomial), d, which = c("shift6", "scale_m12"))

# ---- Bernoulli ---------------------------------------------------------------
set.seed(2804)
n <- 300
d <- data.frame(x = dyadic(rnorm(n)), g = grp("g", 30, n), h = grp("h", 10, n))
ug <- eff("g", 30, 1); uh <- eff("h", 10, 0.6)
d$y <- rbinom(n, 1, plogis(0.3 + 0.8 * d$x + ug[d$g] + uh[d$h]))
d <- with_transforms(d)
write_data(d[, c("y", "x", "x_shift3", "x_shift6", "x_scale_m12", "x_scale_p12", "g", "h")],
           "bern_grp")
add_transformed("bern_iid", "bern_grp", "y ~ x + f(g, iid)", "bernoulli", "",
                y ~ x + (1 | g), function(f, dd) glmer_l(f, dd, binomial), d, which = "scale_p12")
add("bern_crossed", "bern_grp", "y ~ x + f(g, iid) + f(h, iid)", "bernoulli", "",
    glmer_l(y ~ x + (1 | g) + (1 | h), d, binomial))

# ---- negative binomial with exposure -----------------------------------------
set.seed(2805)
n <- 250
d <- data.frame(x = dyadic(rnorm(n)), g = grp("g", 20, n), E = round(runif(n, 0.5, 2), 3))
ug <- eff("g", 20, 0.5)
d$y <- rnbinom(n, size = 3, mu = d$E * exp(1 + 0.4 * d$x + ug[d$g]))
d <- with_transforms(d)
write_data(d[, c("y", "E", "x", "x_shift3", "x_shift6", "x_scale_m12", "x_scale_p12", "g")],
           "nb_grp")
add_transformed("nb_iid", "nb_grp", "y ~ x + f(g, iid)", "negbinomial", "--exposure E",
                y ~ x + (1 | g) + offset(log(E)), tmb_nb, d, which = "shift6")

# ---- rw1 / rw2 with a covariate, Gaussian, several rows per level ------------
# rw2 is orthogonal to the linear trend (man page, FORMULAS): the trend in t is
# a covariate beside it.
set.seed(2806)
lev <- sort(sample(1:200, 50))
d <- data.frame(t = rep(lev, each = 4), x = dyadic(rnorm(200)), g = grp("g", 10, 200))
ug <- eff("g", 10, 0.4)
d$y <- round(1 + 0.6 * d$x + sin(d$t / 15) + ug[d$g] + rnorm(200, 0, 0.3), 6)
d <- with_transforms(d)
write_data(d[, c("y", "x", "x_shift3", "x_shift6", "x_scale_m12", "x_scale_p12", "t", "g")],
           "rw_gauss")
add("rw1_gauss", "rw_gauss", "y ~ x + f(t, rw1)", "gaussian")
add("rw2_gauss", "rw_gauss", "y ~ x + t + f(t, rw2)", "gaussian")
add("rw2_gauss_shift6", "rw_gauss", "y ~ x_shift6 + t + f(t, rw2)", "gaussian",
    base = "rw2_gauss", transform = "shift6")
add("rw1_iid_gauss", "rw_gauss", "y ~ x + f(g, iid) + f(t, rw1)", "gaussian")

# ---- rw1, Gaussian, one row per level: no maximum ----------------------------
# The walk can interpolate the data, so the likelihood grows like
# -log(noise) / 2 as the noise -> 0.  Data from a random walk with little
# noise, so that the fit's path goes there (with a smooth signal and more
# noise it stops at an interior local maximum, the supremum lying beyond
# noise ~ 1e-60).
set.seed(2807)
d <- data.frame(t = 1:60, x = dyadic(rnorm(60)))
d$y <- round(0.5 + 0.6 * d$x + cumsum(rnorm(60, 0, 0.2)) + rnorm(60, 0, 0.05), 6)
write_data(d[, c("y", "x", "t")], "rw_gauss_single")
add("rw1_gauss_single", "rw_gauss_single", "y ~ x + f(t, rw1)", "gaussian",
    expect = "unbounded")

# ---- rw1 / rw2 with a covariate, counts, one row per level -------------------
set.seed(2808)
m <- 80
d <- data.frame(t = 1:m, x = dyadic(rnorm(m)), E = round(runif(m, 0.5, 2), 3),
                n = sample(5:20, m, replace = TRUE))
trend <- cumsum(rnorm(m, 0, 0.15))
trend <- trend - mean(trend)
d$y <- rpois(m, d$E * exp(1 + 0.4 * d$x + trend))
d$k <- rbinom(m, d$n, plogis(-0.3 + 0.5 * d$x + sin(d$t / 12)))
d$ynb <- rnbinom(m, size = 4, mu = d$E * exp(1.2 + 0.3 * d$x + trend))
d <- with_transforms(d)
write_data(d[, c("y", "k", "n", "ynb", "E", "x", "x_shift3", "x_shift6", "x_scale_m12",
                 "x_scale_p12", "t")], "rw_count")
add("rw1_pois", "rw_count", "y ~ x + f(t, rw1)", "poisson", "--exposure E")
add("rw1_pois_scale_p12", "rw_count", "y ~ x_scale_p12 + f(t, rw1)", "poisson", "--exposure E",
    base = "rw1_pois", transform = "scale_p12")
add("rw2_binom", "rw_count", "k ~ x + t + f(t, rw2)", "binomial", "--trials n")
add("rw1_nb", "rw_count", "ynb ~ x + f(t, rw1)", "negbinomial", "--exposure E")

# ---- besag / bym2 on a lattice -----------------------------------------------
nr <- 8; nc <- 6
id <- function(r, c) (r - 1) * nc + (c - 1)
e <- rbind(do.call(rbind, lapply(1:nr, function(r) cbind(id(r, 1:(nc - 1)), id(r, 2:nc)))),
           do.call(rbind, lapply(1:(nr - 1), function(r) cbind(id(r, 1:nc), id(r + 1, 1:nc)))))
write_atomic(c("i,j", paste(e[, 1], e[, 2], sep = ",")), file.path(outdir, "lattice_edges.csv"))
graph <- file.path(fxdir, "lattice_edges.csv")
K <- nr * nc
# A smooth surface with a little unstructured noise (y, k: bym2's maximum is at
# phi -> 1, the besag model, whose maximum is then a lower bound), and the same
# with node effects of sd 0.5 added (y2 with 5 times the exposure, k2; the
# Gaussian y2: sd 1) so that phi's maximum is inside (0, 1).
rr <- (0:(K - 1)) %/% nc; cc <- (0:(K - 1)) %% nc
set.seed(2809)
surf <- 0.6 * sin(rr / 2.5) + 0.4 * cos(cc / 2) + rnorm(K, 0, 0.15)
surf <- surf - mean(surf)
d <- data.frame(node = 0:(K - 1), x = dyadic(rnorm(K)), E = round(runif(K, 2, 6), 3),
                n = sample(10:30, K, replace = TRUE))
d$y <- rpois(K, d$E * exp(0.2 + 0.4 * d$x + surf))
d$k <- rbinom(K, d$n, plogis(-0.4 + 0.5 * d$x + surf))
v <- rnorm(K, 0, 0.5)
d$E2 <- 5 * d$E
d$y2 <- rpois(K, d$E2 * exp(0.2 + 0.4 * d$x + surf + v))
d$k2 <- rbinom(K, d$n, plogis(-0.4 + 0.5 * d$x + surf + v))
d <- with_transforms(d)
write_data(d[, c("node", "y", "k", "y2", "k2", "n", "E", "E2", "x", "x_shift3", "x_shift6",
                 "x_scale_m12", "x_scale_p12")], "areal_counts")
besag <- sprintf("f(node, besag, graph=%s)", graph)
bym2 <- sprintf("f(node, bym2, graph=%s)", graph)
add("besag_pois", "areal_counts", paste("y ~ x +", besag), "poisson", "--exposure E")
add("bym2_pois", "areal_counts", paste("y ~ x +", bym2), "poisson", "--exposure E",
    lower = "besag_pois")
add("besag_binom", "areal_counts", paste("k ~ x +", besag), "binomial", "--trials n")
add("bym2_binom", "areal_counts", paste("k ~ x +", bym2), "binomial", "--trials n",
    lower = "besag_binom")
add("bym2_pois_mixed", "areal_counts", paste("y2 ~ x +", bym2), "poisson", "--exposure E2")
add("bym2_pois_mixed_shift3", "areal_counts", paste("y2 ~ x_shift3 +", bym2), "poisson",
    "--exposure E2", base = "bym2_pois_mixed", transform = "shift3")
add("bym2_binom_mixed", "areal_counts", paste("k2 ~ x +", bym2), "binomial", "--trials n")
d <- data.frame(node = rep(0:(K - 1), each = 3), x = dyadic(rnorm(3 * K)))
d$y <- round(1 + 0.5 * d$x + rep(surf, each = 3) + rnorm(3 * K, 0, 0.4), 6)
d$y2 <- round(d$y + rep(2 * v, each = 3), 6)
write_data(d, "areal_gauss")
add("besag_gauss", "areal_gauss", paste("y ~ x +", besag), "gaussian")
add("bym2_gauss", "areal_gauss", paste("y ~ x +", bym2), "gaussian", lower = "besag_gauss")
add("bym2_gauss_mixed", "areal_gauss", paste("y2 ~ x +", bym2), "gaussian")

# ---- a state-space kernel beside fixed effects -------------------------------
set.seed(2810)
n <- 150
t <- sort(unique(round(runif(n, 0, 100) * 64) / 64))
n <- length(t)
d <- data.frame(t = t, x = dyadic(rnorm(n)), k = sample(c("p", "q", "r"), n, replace = TRUE),
                E = round(runif(n, 0.5, 2), 3))
s <- sin(t / 7) + 0.5 * cos(t / 3)
d$y <- round(1 + 0.5 * d$x + c(p = 0, q = 0.4, r = -0.3)[d$k] + s + rnorm(n, 0, 0.3), 6)
d$yc <- rpois(n, d$E * exp(0.5 + 0.4 * d$x + 0.7 * s))
d$ynb <- rnbinom(n, size = 5, mu = d$E * exp(0.8 + 0.3 * d$x + 0.7 * s))
d <- with_transforms(d)
write_data(d[, c("t", "y", "yc", "ynb", "E", "x", "x_shift3", "x_shift6", "x_scale_m12",
                 "x_scale_p12", "k")], "ssm")
add("matern32_gauss", "ssm", "y ~ x + factor(k) + f(t, 'matern32')", "gaussian")
add("matern32_gauss_shift6", "ssm", "y ~ x_shift6 + factor(k) + f(t, 'matern32')", "gaussian",
    base = "matern32_gauss", transform = "shift6")
add("matern32_gauss_scale_m12", "ssm", "y ~ x_scale_m12 + factor(k) + f(t, 'matern32')",
    "gaussian", base = "matern32_gauss", transform = "scale_m12")
add("matern32_pois", "ssm", "yc ~ x + f(t, 'matern32')", "poisson", "--exposure E")
add("matern32_nb", "ssm", "ynb ~ x + f(t, 'matern32')", "negbinomial", "--exposure E")

# ---- write the battery -------------------------------------------------------
hdr <- names(models[[1]])
write_atomic(c(paste(hdr, collapse = "\t"), sapply(models, paste, collapse = "\t")),
             file.path(outdir, "models.tsv"))
write_atomic(c("model,name,value", lme4_rows), file.path(outdir, "lme4.csv"))
cat(length(models), "models;", sum(grepl(",status,", lme4_rows)), "lme4 fits,",
    sum(grepl(",status,converged$", lme4_rows)), "converged\n")
