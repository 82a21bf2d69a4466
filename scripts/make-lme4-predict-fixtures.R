#!/usr/bin/env Rscript
# make-lme4-predict-fixtures.R -- references for `predict` of a model with
# an iid random intercept, y ~ x + f(g, iid) (lme4: y ~ x + (1 | g)), in
# tests/cli/cases/76_predict_lme4.sh, computed by lme4 (Debian r-cran-lme4
# 1.1-31 on R 4.2) and by a dense computation here.
#
#   Rscript scripts/make-lme4-predict-fixtures.R [OUTDIR]
#
# OUTDIR defaults to tests/fixtures/lme4_predict.  Two sets, NAME gauss
# (lmer, REML = FALSE: the exact marginal likelihood) and pois (glmer,
# Poisson, nAGQ = 1, PIRLS to tolPwrss 1e-12 and bobyqa to rhoend 1e-10), each
# with data drawn here from a seeded generator:
#
#   NAME.csv           the data (y,x,g);
#   NAME_model.json    a gmm-infer model file holding lme4's estimates (the
#                      group variance, the noise variance, the coefficients),
#                      so that the tool predicts at lme4's values;
#   NAME_new.csv       new rows (x,g): levels of the data and levels the data
#                      do not have;
#   NAME_expected.csv  per new row: fixed_mean, predict(m, newdata, re.form =
#                      NA), and fixed_var, x_r' C x_r with C the coefficients'
#                      block of the inverse observed information (below);
#                      mean, predict(m, newdata, allow.new.levels = TRUE), and
#                      var, the conditional variance of the row's group effect
#                      (attr(ranef(m, condVar = TRUE)$g, "postVar")) or, for a
#                      new level, the group variance (VarCorr);
#   NAME_fixed.csv     per data row: predict(m, re.form = NA) and its
#                      variance as fixed_var;
#   NAME_terms.csv     --terms' rows: each coefficient with sqrt(C_kk), then
#                      each level's conditional mode (ranef) and conditional
#                      sd (sqrt of postVar).
#
# THE COEFFICIENTS' COVARIANCE.  gmm-infer's standard errors invert the
# observed information over every free parameter -- the variances on the log
# scale, the coefficients -- at the model's values.  The same here, densely:
# the Hessian of the log likelihood in (log variances, beta) at lme4's
# estimates -- Gaussian: of log N(y; X beta, s2g Z Z' + s2e I), analytic;
# Poisson: of the Laplace approximation glmer maximises, one group at a
# time (the groups are independent), each group's mode by Newton to
# rounding, as Richardson differences (numDeriv) of its exact gradient --
# the value checked against logLik(m), the Hessian or gradient against
# numDeriv's differences of the value, before use.  (lme4's vcov is
# another matrix: lmer's is conditional on the variances.)
suppressPackageStartupMessages({
    library(lme4)
    library(numDeriv)
})

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/lme4_predict"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)

num <- function(x) sprintf("%.17g", x)
write_atomic <- function(lines, path) {
    tmp <- paste0(path, ".tmp")
    writeLines(lines, tmp)
    invisible(file.rename(tmp, path))
}
write_table <- function(d, path) {
    cols <- lapply(d, function(v) if (is.numeric(v)) num(v) else as.character(v))
    write_atomic(c(paste(names(d), collapse = ","), do.call(paste, c(cols, sep = ","))), path)
}

write_model <- function(name, lik, pars) {
    p <- paste0('    "', names(pars), '": ', num(pars), collapse = ",\n")
    write_atomic(c("{", '  "format_version": 1,', '  "tool_version": "0.1.0",',
                   '  "formula": "y ~ x + f(g, iid)",', '  "parameters": {', p, "  },",
                   paste0('  "likelihood": "', lik, '",'), '  "center": null,',
                   '  "loglik": 0.0,', '  "iterations": 0,', '  "converged": false,',
                   paste0('  "data": {"file": "', name, '.csv", "x": null, "y": "y", ',
                          '"node": null, "exposure": null}'), "}"),
                 file.path(outdir, paste0(name, "_model.json")))
}

# The Poisson Laplace log likelihood (glmer's nAGQ = 1) at log s2 and beta:
# per group, the mode of sum_i log p(y_i | eta_i + u) - u^2 / (2 s2) and the
# curvature there
pois_laplace <- function(par, d) {
    s2 <- exp(par[1])
    eta <- par[2] + par[3] * d$x
    tot <- 0
    for (idx in split(seq_len(nrow(d)), d$g)) {
        y <- d$y[idx]; e <- eta[idx]; u <- 0
        for (it in 1:100) {
            mu <- exp(e + u)
            step <- (sum(y - mu) - u / s2) / (sum(mu) + 1 / s2)
            u <- u + step
            if (abs(step) < 1e-15 * max(1, abs(u))) break
        }
        mu <- exp(e + u)
        h <- sum(mu) + 1 / s2
        tot <- tot + sum(y * (e + u) - mu - lgamma(y + 1)) - u^2 / (2 * s2) -
            0.5 * log(s2 * h)
    }
    tot
}

# Its gradient in (log s2, beta), exact: by the envelope theorem the mode's
# own movement drops out of the first term; the curvature h moves with the
# mode, du/dtheta = (d2f / du dtheta) / h.
pois_grad <- function(par, d) {
    s2 <- exp(par[1])
    X <- cbind(1, d$x)
    eta <- drop(X %*% par[-1])
    gr <- numeric(length(par))
    for (idx in split(seq_len(nrow(d)), d$g)) {
        y <- d$y[idx]; e <- eta[idx]; Xg <- X[idx, , drop = FALSE]; u <- 0
        for (it in 1:100) {
            mu <- exp(e + u)
            step <- (sum(y - mu) - u / s2) / (sum(mu) + 1 / s2)
            u <- u + step
            if (abs(step) < 1e-15 * max(1, abs(u))) break
        }
        mu <- exp(e + u)
        h <- sum(mu) + 1 / s2
        du_b <- -colSums(mu * Xg) / h
        du_t <- (u / s2) / h
        dh_b <- colSums(mu * sweep(Xg, 2, du_b, "+"))
        dh_t <- sum(mu) * du_t - 1 / s2
        gr[-1] <- gr[-1] + colSums((y - mu) * Xg) - 0.5 * dh_b / h
        gr[1] <- gr[1] + u^2 / (2 * s2) - 0.5 - 0.5 * dh_t / h
    }
    gr
}

gauss_loglik <- function(par, d, Z) {
    V <- exp(par[1]) * tcrossprod(Z) + diag(exp(par[2]), nrow(d))
    r <- d$y - par[3] - par[4] * d$x
    L <- chol(V)
    z <- backsolve(L, r, transpose = TRUE)
    -0.5 * nrow(d) * log(2 * pi) - sum(log(diag(L))) - 0.5 * sum(z^2)
}

# The Hessian of gauss_loglik, analytic: with V_i = dV/dtau_i (= V_ii),
# P = V^-1 and r = y - X beta,
#   d2l/dtau_i dtau_j = tr(P V_j P V_i) / 2 - [i = j] tr(P V_i) / 2
#                       - r'P V_j P V_i P r + [i = j] r'P V_i P r / 2,
#   d2l/dbeta dtau_i  = -X'P V_i P r,     d2l/dbeta dbeta' = -X'P X.
gauss_hessian <- function(par, d, Z) {
    Vs <- list(exp(par[1]) * tcrossprod(Z), diag(exp(par[2]), nrow(d)))
    X <- cbind(1, d$x)
    P <- solve(Vs[[1]] + Vs[[2]])
    Pr <- P %*% (d$y - X %*% par[3:4])
    H <- matrix(0, 4, 4)
    for (i in 1:2) {
        for (j in 1:2) {
            H[i, j] <- 0.5 * sum(diag(P %*% Vs[[j]] %*% P %*% Vs[[i]])) -
                drop(t(Pr) %*% Vs[[j]] %*% P %*% Vs[[i]] %*% Pr)
            if (i == j)
                H[i, j] <- H[i, j] - 0.5 * sum(diag(P %*% Vs[[i]])) +
                    0.5 * drop(t(Pr) %*% Vs[[i]] %*% Pr)
        }
        H[3:4, i] <- H[i, 3:4] <- -t(X) %*% P %*% Vs[[i]] %*% Pr
    }
    H[3:4, 3:4] <- -t(X) %*% P %*% X
    H
}

# the coefficients' block (the last nb) of the inverse of -H
coef_cov <- function(H, nb) {
    C <- solve(-(H + t(H)) / 2)
    k <- seq(nrow(H) - nb + 1, nrow(H))
    C[k, k]
}

write_set <- function(name, m, d, nw, C, lik, pars) {
    X <- cbind(1, d$x)
    Xn <- cbind(1, nw$x)
    re <- ranef(m, condVar = TRUE)$g
    pv <- attr(re, "postVar")[1, 1, ]
    s2g <- VarCorr(m)$g[1]
    known <- nw$g %in% rownames(re)
    cv <- ifelse(known, pv[match(nw$g, rownames(re))], s2g)
    write_data <- d
    write_table(write_data, file.path(outdir, paste0(name, ".csv")))
    write_table(nw, file.path(outdir, paste0(name, "_new.csv")))
    write_model(name, lik, pars)
    write_table(data.frame(row = seq_len(nrow(nw)),
                           fixed_mean = predict(m, newdata = nw, re.form = NA),
                           fixed_var = rowSums((Xn %*% C) * Xn),
                           mean = predict(m, newdata = nw, allow.new.levels = TRUE),
                           var = cv),
                file.path(outdir, paste0(name, "_expected.csv")))
    write_table(data.frame(row = seq_len(nrow(d)), mean = predict(m, re.form = NA),
                           var = rowSums((X %*% C) * X)),
                file.path(outdir, paste0(name, "_fixed.csv")))
    write_table(data.frame(term = c("intercept", "coef.x", rep("f.g", nrow(re))),
                           level = c("", "", rownames(re)),
                           mean = c(fixef(m), re[, 1]),
                           sd = c(sqrt(diag(C)), sqrt(pv))),
                file.path(outdir, paste0(name, "_terms.csv")))
}

groups <- function(G) sprintf("g%02d", seq_len(G))

# ---- Gaussian: lmer at REML = FALSE ------------------------------------------
set.seed(20261207)
n <- 240; G <- 16
g <- groups(G)[sample.int(G, n, replace = TRUE)]
u <- setNames(rnorm(G, 0, 0.8), groups(G))
x <- round(rnorm(n), 4)
y <- round(2 + 0.7 * x + u[g] + rnorm(n, 0, 0.6), 5)
d <- data.frame(y = y, x = x, g = g)
m <- lmer(y ~ x + (1 | g), data = d, REML = FALSE,
          control = lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12)))
b <- fixef(m); s2g <- VarCorr(m)$g[1]; s2e <- sigma(m)^2
Z <- outer(d$g, sort(unique(d$g)), "==") * 1
par <- c(log(s2g), log(s2e), b)
ll <- function(p) gauss_loglik(p, d, Z)
stopifnot(abs(ll(par) - as.numeric(logLik(m))) < 1e-8,
          max(abs(gauss_hessian(par, d, Z) - numDeriv::hessian(ll, par))) < 1e-4)
nw <- data.frame(x = c(0.5, -1.2, 2.0, 0.0, 1.1, -0.3),
                 g = c("g03", "new1", "g11", "g16", "zz", "new1"))
write_set("gauss", m, d, nw, coef_cov(gauss_hessian(par, d, Z), 2), "gaussian",
          c(f.g.variance = s2g, likelihood.variance = s2e, intercept = b[[1]],
            coef.x = b[[2]]))

# ---- Poisson: glmer's Laplace ----------------------------------------------
set.seed(20261208)
n <- 300; G <- 20
g <- groups(G)[sample.int(G, n, replace = TRUE)]
u <- setNames(rnorm(G, 0, 0.5), groups(G))
x <- round(rnorm(n), 4)
y <- rpois(n, exp(0.3 + 0.4 * x + u[g]))
d <- data.frame(y = y, x = x, g = g)
m <- glmer(y ~ x + (1 | g), family = poisson, data = d, nAGQ = 1,
           control = glmerControl(tolPwrss = 1e-12, optimizer = "bobyqa",
                                  optCtrl = list(rhoend = 1e-10, maxfun = 1e5)))
b <- fixef(m); s2g <- VarCorr(m)$g[1]
par <- c(log(s2g), b)
ll <- function(p) pois_laplace(p, d)
# the analytic gradient against differences of the value, away from the
# maximum (where it is not ~0)
off <- par + c(0.3, -0.1, 0.05)
stopifnot(abs(ll(par) - as.numeric(logLik(m))) < 1e-6,
          max(abs(pois_grad(off, d) - numDeriv::grad(ll, off))) < 1e-5)
# the Hessian: Richardson differences of the exact gradient (the value's
# own rounding, ~1e-13, swamps second differences of it)
H <- numDeriv::jacobian(function(p) pois_grad(p, d), par,
                        method.args = list(d = 1e-3, r = 6))
nw <- data.frame(x = c(0.5, -1.2, 2.0, 0.0, 1.1, -0.3),
                 g = c("g03", "new1", "g11", "g20", "zz", "new1"))
write_set("pois", m, d, nw, coef_cov(H, 2), "poisson",
          c(f.g.variance = s2g, intercept = b[[1]], coef.x = b[[2]]))
