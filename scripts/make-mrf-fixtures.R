#!/usr/bin/env Rscript
# make-mrf-fixtures.R -- references for gmm-infer's besag term against mgcv's
# Markov random field smooth, s(region, bs = "mrf", xt = list(nb = ...))
# (Debian r-cran-mgcv; made with mgcv 1.8-41 on R 4.2), and against dense
# computations here (tests/cli/cases/58_formula_mrf.sh).
#
#   Rscript scripts/make-mrf-fixtures.R [OUTDIR]      (OUTDIR: tests/fixtures/mrf)
#
# Where the conventions coincide.  mgcv's mrf penalty is the unscaled ICAR
# R = D - W; fitted by method = "ML" the region effect is N(0, (phi/lambda) R^+)
# on the subspace of mgcv's centring constraint, sum over the data rows of
# f(region) = 0, with the intercept and covariates fixed effects.  gmm-infer's
# besag is N(0, v R^+ / c) on sum over the nodes = 0, c the geometric mean of
# diag(R^+) (Sorbye and Rue 2014), so v = c phi / lambda.  The two constraints
# are the same when every region has the same number of rows (a balanced
# design); otherwise the models differ by a random shift of the intercept and
# their likelihoods differ.  The data here are balanced.
#
# Gaussian: mgcv's ML score (gcv.ubre) is minus the log marginal likelihood
# of y with the constants included and the fixed effects at their GLS value,
# i.e. the profile likelihood that gmm-infer maximises; this script checks
# that against the dense N(X b, (v/c) A R^+ A' + phi I), maximised by optim,
# and stops if they differ by more than 1e-6.
#
# Poisson: mgcv's ML for a non-Gaussian family is its Laplace approximation
# evaluated at the joint penalised mode of (fixed effects, region effects),
# whereas gmm-infer maximises the Laplace approximation over the fixed
# effects (their mode then includes the log-determinant's gradient): not the
# same approximation (this script checks that the dense Laplace at mgcv's
# estimates equals mgcv's score).  The Poisson reference is therefore a dense Laplace
# computation of gmm-infer's convention (Newton for the mode on the
# constrained subspace, an orthonormal basis of sum = 0), maximised by optim
# over (intercept, coefficient, log v); mgcv's value is written beside it for
# the record ("mgcv:" rows, not tested).
#
# Writes edges.csv (i,j; a 4 x 4 lattice with one diagonal), gauss.csv,
# pois.csv (region,x,y; three rows per region), and NAME_ref.csv: name,value
# with loglik, intercept, coef.x, f.region.variance, eta:ROW (the linear
# predictor at data row ROW, counted from 1: intercept + coef.x x + f), and
# the scaling constant c.  The tests read the committed files, never R.
suppressPackageStartupMessages(library(mgcv))

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/mrf"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)
num <- function(x) sprintf("%.17g", x)
write_atomic <- function(lines, path) {
    tmp <- paste0(path, ".tmp")
    writeLines(lines, tmp)
    invisible(file.rename(tmp, path))
}

# the graph: 4 x 4 lattice, nodes 0..15 row-major, plus the chord 0-15
side <- 4; k <- side * side
edges <- NULL
for (r in 0:(side - 1)) for (s in 0:(side - 1)) {
    v <- r * side + s
    if (s < side - 1) edges <- rbind(edges, c(v, v + 1))
    if (r < side - 1) edges <- rbind(edges, c(v, v + side))
}
edges <- rbind(edges, c(0, 15))
write_atomic(c("i,j", paste(edges[, 1], edges[, 2], sep = ",")), file.path(outdir, "edges.csv"))
R <- matrix(0, k, k)
for (e in seq_len(nrow(edges))) {
    i <- edges[e, 1] + 1; j <- edges[e, 2] + 1
    R[i, j] <- R[i, j] - 1; R[j, i] <- R[j, i] - 1
    R[i, i] <- R[i, i] + 1; R[j, j] <- R[j, j] + 1
}
ev <- eigen(R, symmetric = TRUE)
stopifnot(sum(ev$values < 1e-9) == 1)      # connected: one null direction
Rp <- ev$vectors[, 1:(k - 1)] %*% diag(1 / ev$values[1:(k - 1)]) %*% t(ev$vectors[, 1:(k - 1)])
cscale <- exp(mean(log(diag(Rp))))
B <- ev$vectors[, 1:(k - 1)]                 # orthonormal basis of sum = 0
labels <- as.character(0:(k - 1))
nb <- lapply(1:k, function(i) which(R[i, ] < 0 & seq_len(k) != i))
names(nb) <- labels

per <- 3; n <- k * per
region <- rep(0:(k - 1), each = per)
A <- matrix(0, n, k); A[cbind(1:n, region + 1)] <- 1
u_true <- function(sd) { z <- B %*% rnorm(k - 1, 0, 1 / sqrt(ev$values[1:(k - 1)])); sd * z / sqrt(cscale) }

fit_mgcv <- function(d, family) {
    d$region <- factor(as.character(d$region), levels = labels)
    gam(y ~ x + s(region, bs = "mrf", xt = list(nb = nb)), family = family, data = d,
        method = "ML", control = gam.control(epsilon = 1e-12, newton = list(conv.tol = 1e-10)))
}

# lambda on the scale of the penalty R as supplied: mgcv rescales S internally
mgcv_variance <- function(m, scale) {
    sm <- m$smooth[[1]]
    cscale * scale / (m$sp[1] / sm$S.scale)
}

write_ref <- function(path, ll, b, v, eta, extra) {
    write_atomic(c("name,value", paste0("loglik,", num(ll)), paste0("intercept,", num(b[1])),
                   paste0("coef.x,", num(b[2])), paste0("f.region.variance,", num(v)),
                   paste0("eta:", seq_along(eta), ",", num(eta)), extra), path)
}

# --- Gaussian --------------------------------------------------------------
set.seed(20261201)
x <- round(rnorm(n), 4)
y <- round(1.2 + 0.7 * x + (A %*% u_true(0.9))[, 1] + rnorm(n, 0, 0.5), 5)
d <- data.frame(region = region, x = x, y = y)
write_atomic(c("region,x,y", paste(d$region, d$x, d$y, sep = ",")), file.path(outdir, "gauss.csv"))
m <- fit_mgcv(d, gaussian())
phi <- m$reml.scale                          # the ML scale (sig2 is Pearson's)
v_mgcv <- mgcv_variance(m, phi)
X <- cbind(1, x)
dense_gauss <- function(lv) {                # profile log likelihood in (log v, log noise)
    S <- exp(lv[1]) / cscale * A %*% Rp %*% t(A) + exp(lv[2]) * diag(n)
    L <- chol(S)
    Xs <- backsolve(L, X, transpose = TRUE); ys <- backsolve(L, y, transpose = TRUE)
    b <- qr.coef(qr(Xs), ys)
    r <- ys - Xs %*% b
    list(ll = -0.5 * sum(r^2) - sum(log(diag(L))) - 0.5 * n * log(2 * pi), b = b, S = S)
}
o <- optim(log(c(v_mgcv, phi)), function(lv) -dense_gauss(lv)$ll, method = "BFGS",
           control = list(reltol = 1e-15, maxit = 1000))
o <- optim(o$par, function(lv) -dense_gauss(lv)$ll, method = "Nelder-Mead",
           control = list(reltol = 1e-15, maxit = 5000))
dg <- dense_gauss(o$par)
cat(sprintf("gauss: mgcv -score %.10f, dense max %.10f; v mgcv %.8g dense %.8g; noise mgcv %.8g dense %.8g\n",
            -m$gcv.ubre, dg$ll, v_mgcv, exp(o$par[1]), phi, exp(o$par[2])))
stopifnot(abs(-m$gcv.ubre - dg$ll) < 1e-6,
          abs(log(c(v_mgcv, phi)) - o$par) < 1e-4)
# the dense posterior mean of the linear predictor at mgcv's parameters
Sg <- dense_gauss(log(c(v_mgcv, phi)))
b <- Sg$b
Ku <- v_mgcv / cscale * A %*% Rp %*% t(A)
eta_dense <- (X %*% b + Ku %*% solve(Sg$S, y - X %*% b))[, 1]
cat(sprintf("gauss: max |eta mgcv - eta dense at mgcv's parameters| %.3g\n",
            max(abs(m$linear.predictors - eta_dense))))
write_ref(file.path(outdir, "gauss_ref.csv"), -m$gcv.ubre, coef(m)[1:2], v_mgcv,
          m$linear.predictors,
          c(paste0("likelihood.variance,", num(phi)), paste0("scale_c,", num(cscale)),
            paste0("dense:loglik,", num(dg$ll)), paste0("dense:f.region.variance,", num(exp(o$par[1]))),
            paste0("dense:likelihood.variance,", num(exp(o$par[2])))))

# --- Poisson ---------------------------------------------------------------
set.seed(20261202)
x <- round(rnorm(n, 0, 0.7), 4)
y <- rpois(n, exp(0.5 + 0.4 * x + (A %*% u_true(0.7))[, 1]))
d <- data.frame(region = region, x = x, y = y)
write_atomic(c("region,x,y", paste(d$region, d$x, d$y, sep = ",")), file.path(outdir, "pois.csv"))
m <- fit_mgcv(d, poisson())
v_mgcv <- mgcv_variance(m, 1)
X <- cbind(1, x)
AB <- A %*% B
laplace <- function(b, v, z0 = rep(0, k - 1)) {
    P <- cscale / v * crossprod(B, R %*% B)
    off <- (X %*% b)[, 1]
    z <- z0
    for (it in 1:100) {
        eta <- off + (AB %*% z)[, 1]
        mu <- exp(eta)
        g <- crossprod(AB, y - mu)[, 1] - (P %*% z)[, 1]
        H <- P + crossprod(AB, mu * AB)
        step <- solve(H, g)
        z <- z + step
        if (max(abs(step)) < 1e-13) break
    }
    eta <- off + (AB %*% z)[, 1]; mu <- exp(eta)
    H <- P + crossprod(AB, mu * AB)
    ll <- sum(dpois(y, mu, log = TRUE)) - 0.5 * sum(z * (P %*% z)) +
        0.5 * determinant(P)$modulus - 0.5 * determinant(H)$modulus
    list(ll = as.numeric(ll), z = z, eta = eta)
}
obj <- function(p) -laplace(p[1:2], exp(p[3]))$ll
o <- optim(c(coef(m)[1:2], log(v_mgcv)), obj, method = "BFGS", control = list(reltol = 1e-15, maxit = 1000))
o <- optim(o$par, obj, method = "Nelder-Mead", control = list(reltol = 1e-15, maxit = 5000))
lp <- laplace(o$par[1:2], exp(o$par[3]))
cat(sprintf("pois: dense Laplace max %.10f (b %.8g %.8g, v %.8g); mgcv -score %.10f (b %.8g %.8g, v %.8g)\n",
            lp$ll, o$par[1], o$par[2], exp(o$par[3]), -m$gcv.ubre, coef(m)[1], coef(m)[2], v_mgcv))
# mgcv's LAML is this Laplace formula at its own (b, v): check, so the test may use it
lm <- laplace(coef(m)[1:2], v_mgcv)$ll
cat(sprintf("pois: dense Laplace at mgcv's (b, v) %.10f, mgcv %.10f\n", lm, -m$gcv.ubre))
stopifnot(abs(lm + m$gcv.ubre) < 1e-7)
write_ref(file.path(outdir, "pois_ref.csv"), lp$ll, o$par[1:2], exp(o$par[3]), lp$eta,
          c(paste0("scale_c,", num(cscale)), paste0("mgcv:loglik,", num(-m$gcv.ubre)),
            paste0("mgcv:intercept,", num(coef(m)[1])), paste0("mgcv:coef.x,", num(coef(m)[2])),
            paste0("mgcv:f.region.variance,", num(v_mgcv))))
