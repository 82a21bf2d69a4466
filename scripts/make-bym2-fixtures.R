#!/usr/bin/env Rscript
# make-bym2-fixtures.R -- a dense reference for gmm-infer's bym2 term on a real
# areal data set (tests/cli/cases/59_formula_bym2.sh): the influenza counts of
# the 140 districts of Baden-Wuerttemberg, 2001-2008 (data/flu_bybw_nodes.csv,
# count_total and population_2001; the adjacency data/flu_bybw_edges.csv; see
# data/README.md for their provenance), with the centroid's standardised
# east-west coordinate as a covariate:
#
#   count ~ Poisson(population exp(b0 + b1 east + f_node)),
#   f = sqrt(v) (sqrt(1 - phi) w + sqrt(phi) u),  w ~ N(0, I),
#   u the scaled ICAR (R^+ / c, c the geometric mean of diag(R^+)) with sum = 0,
#
# i.e. f ~ N(0, v ((1 - phi) I + phi R^+ / c)), Riebler et al. (2016).  The
# Laplace approximation of the log marginal likelihood (a function of f only
# through the linear predictor, so the Laplace approximation over (w, u)
# equals the one over f) is computed densely: Newton for the mode, log
# densities with every constant (dpois's log y! included).  Then the same
# maximised over (b0, b1, log v, logit phi) by optim (BFGS, then
# Nelder-Mead at a relative change of 1e-15).
#
# R-INLA is not in Debian and no published R-INLA result for a classic areal
# data set was at hand as numbers comparable with a maximum-likelihood fit
# (R-INLA reports posteriors under its priors), so this dense computation of
# gmm-infer's own convention is the reference.
#
#   Rscript scripts/make-bym2-fixtures.R [OUTDIR]     (OUTDIR: tests/fixtures/bym2)
#
# Writes districts.csv (node,east,count,population) and ref.csv: name,value
# with at:loglik (the Laplace log likelihood at the parameters at:NAME),
# loglik and each parameter at the maximum under gmm-infer's names, and
# eta:NODE (the linear predictor without the log exposure at the maximum).
args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/bym2"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)
num <- function(x) sprintf("%.17g", x)
write_atomic <- function(lines, path) {
    tmp <- paste0(path, ".tmp")
    writeLines(lines, tmp)
    invisible(file.rename(tmp, path))
}

nodes <- read.csv("data/flu_bybw_nodes.csv")
edges <- read.csv("data/flu_bybw_edges.csv")
k <- nrow(nodes)
stopifnot(all(nodes$node == 0:(k - 1)))
R <- matrix(0, k, k)
for (e in seq_len(nrow(edges))) {
    i <- edges$i[e] + 1; j <- edges$j[e] + 1
    R[i, j] <- R[i, j] - 1; R[j, i] <- R[j, i] - 1
    R[i, i] <- R[i, i] + 1; R[j, j] <- R[j, j] + 1
}
ev <- eigen(R, symmetric = TRUE)
stopifnot(sum(ev$values < 1e-9) == 1)      # connected
Rp <- ev$vectors[, 1:(k - 1)] %*% diag(1 / ev$values[1:(k - 1)]) %*% t(ev$vectors[, 1:(k - 1)])
cscale <- exp(mean(log(diag(Rp))))

east <- round((nodes$x - mean(nodes$x)) / sd(nodes$x), 4)
y <- nodes$count_total
E <- nodes$population_2001
write_atomic(c("node,east,count,population", paste(nodes$node, east, y, E, sep = ",")),
             file.path(outdir, "districts.csv"))
X <- cbind(1, east)

laplace <- function(b, v, phi) {
    S <- v * ((1 - phi) * diag(k) + phi * Rp / cscale)
    Q <- solve(S)
    off <- (X %*% b)[, 1] + log(E)
    f <- rep(0, k)
    for (it in 1:200) {
        mu <- exp(off + f)
        g <- (y - mu) - (Q %*% f)[, 1]
        step <- solve(Q + diag(mu), g)
        f <- f + step
        if (max(abs(step)) < 1e-13) break
    }
    mu <- exp(off + f)
    ll <- sum(dpois(y, mu, log = TRUE)) - 0.5 * sum(f * (Q %*% f)) -
        0.5 * determinant(S)$modulus - 0.5 * determinant(Q + diag(mu))$modulus
    list(ll = as.numeric(ll), eta = (X %*% b)[, 1] + f)
}

# a fixed point: the evaluation alone, no optimiser
at <- c(intercept = log(sum(y) / sum(E)), coef.east = 0.1, variance = 0.5, phi = 0.6)
l_at <- laplace(at[1:2], at[3], at[4])$ll

# far from the maximum (phi near 1, v tiny) S is singular: such a point is no maximum
obj <- function(p) tryCatch(-laplace(p[1:2], exp(p[3]), plogis(p[4]))$ll, error = function(e) 1e10)
o <- optim(c(at[1:2], log(at[3]), qlogis(at[4])), obj, method = "Nelder-Mead",
           control = list(reltol = 1e-12, maxit = 20000))
o <- optim(o$par, obj, method = "BFGS", control = list(reltol = 1e-15, maxit = 2000))
o <- optim(o$par, obj, method = "Nelder-Mead", control = list(reltol = 1e-15, maxit = 20000))
o <- optim(o$par, obj, method = "BFGS", control = list(reltol = 1e-15, maxit = 2000))
lp <- laplace(o$par[1:2], exp(o$par[3]), plogis(o$par[4]))
cat(sprintf("bym2: at the fixed point %.10f; maximum %.10f at b %.8g %.8g, v %.8g, phi %.8g\n",
            l_at, lp$ll, o$par[1], o$par[2], exp(o$par[3]), plogis(o$par[4])))
write_atomic(c("name,value",
               paste0("at:intercept,", num(at[1])), paste0("at:coef.east,", num(at[2])),
               paste0("at:f.node.variance,", num(at[3])), paste0("at:f.node.phi,", num(at[4])),
               paste0("at:loglik,", num(l_at)),
               paste0("loglik,", num(lp$ll)), paste0("intercept,", num(o$par[1])),
               paste0("coef.east,", num(o$par[2])), paste0("f.node.variance,", num(exp(o$par[3]))),
               paste0("f.node.phi,", num(plogis(o$par[4]))),
               paste0("eta:", 0:(k - 1), ",", num(lp$eta)),
               paste0("scale_c,", num(cscale))),
             file.path(outdir, "ref.csv"))
