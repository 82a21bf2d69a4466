#!/usr/bin/Rscript
# make-stack-predict-fixtures.R -- dense references for predict --at and
# score on NEW rows of formulas of several f() terms
# (tests/cli/cases/48_formula_stack.sh), written to tests/fixtures/stack/.
#
#   Rscript scripts/make-stack-predict-fixtures.R      (base R only)
#
# A new row's walk value that is not a value of the data is a new level of
# the walk, and a new iid level a new level of the iid term: the dense
# reference builds the AUGMENTED prior -- the walk's precision on the union
# of the data's and the new rows' values (rw1: (x_{j+1} - x_j)^2 / (s dt);
# rw2: the integrated Wiener process's two-state transitions), conditioned
# on the model's own constraints, which sum over the DATA's values only --
# whose marginal on the data's latents is the model's prior.  The new rows
# are then ordinary rows without outcome: no bridge formula is used here.
#
# GAUSSIAN: model_rw1_iid_x1.json (y ~ x1 + f(t, rw1) + f(g, iid)) on
# data_rw1_iid.csv, at the rows of predict_new.csv: the linear predictor's
# posterior mean and variance (covariance form: P = prior covariance,
# S = A P A' + noise I over the observed rows) and the outcome's log
# predictive density, log N(y; mean, var + noise).  Writes
# predict_new_expected.csv (row,mean,var,lpd).
#
# POISSON: n ~ x1 + f(node, besag, graph=edges.csv) + f(week, rw2) on data
# made here (predict_pois_data.csv; node 6 has no row), the parameters of
# model_pois.json: the Laplace approximation at the augmented model's mode
# (Newton in x = V z, V an orthonormal basis of the constrained subspace),
# the new rows' mean and variance of the linear predictor, and the log
# predictive density log int Poisson(n | exp f) N(f; mean, var) df by R's
# integrate().  The besag precision is the scaled ICAR, c R with c the
# geometric mean of diag(R^+) (connected graph).  Writes predict_pois_data.csv,
# model_pois.json, predict_pois_new.csv, predict_pois_expected.csv.
out <- file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "..", "tests", "fixtures", "stack")
set.seed(20261128)

# the walk's precision on sorted values u (unit variance)
walk_q <- function(u, two) {
    m <- length(u)
    k <- if (two) 2 else 1
    Q <- matrix(0, k * m, k * m)
    for (j in seq_len(m - 1)) {
        h <- u[j + 1] - u[j]
        if (two) {
            G <- matrix(0, 2, 2 * m)
            G[, (2 * j + 1):(2 * j + 2)] <- diag(2)
            G[, (2 * j - 1):(2 * j)] <- -matrix(c(1, 0, h, 1), 2)
            Q <- Q + t(G) %*% solve(matrix(c(h^3 / 3, h^2 / 2, h^2 / 2, h), 2), G)
        } else {
            g <- numeric(m)
            g[j + 1] <- 1
            g[j] <- -1
            Q <- Q + outer(g, g) / h
        }
    }
    Q
}

# orthonormal basis of {x : C x = 0}
null_basis <- function(C) {
    k <- nrow(C)
    qr.Q(qr(t(C)), complete = TRUE)[, -(1:k), drop = FALSE]
}

# ---- Gaussian: rw1 + iid + covariate --------------------------------------
d <- read.csv(file.path(out, "data_rw1_iid.csv"), colClasses = c("numeric", "character",
                                                                  "numeric", "numeric"))
st <- 0.5; sg <- 0.25; noise <- 0.09; b0 <- 0.3; b1 <- 0.65   # model_rw1_iid_x1.json
# new rows: a data value with a level it never met, between two values, a
# tie of close values, beyond both ends, a new group, a row of the data
nw <- data.frame(t = c(0.99, 5.0, 1.895, 25.5, -3.0, 12.0, 9.2, 19.73, 3.0),
                 g = c("g4", "g1", "g2", "g0", "g3", "g9", "g7", "g0", "g2"),
                 x1 = c(0.5, -1.0, 0.2, 1.5, 0.0, 0.3, -0.4, 2.0, 1.1),
                 y = c(1.9, 0.4, 1.1, 3.6, 0.2, 1.0, 0.7, 4.2, 1.5))
write.csv(nw, file.path(out, "predict_new.csv"), row.names = FALSE, quote = FALSE)
u0 <- sort(unique(d$t))
u <- sort(unique(c(d$t, nw$t)))
gl <- sort(unique(c(d$g, nw$g)))
Q <- walk_q(u, FALSE)
V <- null_basis(matrix(u %in% u0 * 1, 1))
Crw <- V %*% solve(t(V) %*% Q %*% V, t(V))
P <- matrix(0, length(u) + length(gl), length(u) + length(gl))
P[seq_along(u), seq_along(u)] <- st * Crw
P[length(u) + seq_along(gl), length(u) + seq_along(gl)] <- sg * diag(length(gl))
amap <- function(t, g) cbind(outer(t, u, "==") * 1, outer(g, gl, "==") * 1)
obs <- !is.na(d$y)
A <- amap(d$t, d$g)[obs, ]
An <- amap(nw$t, nw$g)
S <- A %*% P %*% t(A) + noise * diag(sum(obs))
r <- d$y[obs] - b0 - b1 * d$x1[obs]
K <- An %*% P %*% t(A) %*% solve(S)
mn <- b0 + b1 * nw$x1 + K %*% r
vn <- diag(An %*% P %*% t(An) - K %*% A %*% P %*% t(An))
lpd <- dnorm(nw$y, mn, sqrt(vn + noise), log = TRUE)
write.csv(data.frame(row = seq_len(nrow(nw)), mean = sprintf("%.17g", mn),
                     var = sprintf("%.17g", vn), lpd = sprintf("%.17g", lpd)),
          file.path(out, "predict_new_expected.csv"), row.names = FALSE, quote = FALSE)

# ---- Poisson: besag + rw2 + covariate (Laplace) ---------------------------
e <- read.csv(file.path(out, "edges.csv"))
nn <- 7
R <- matrix(0, nn, nn)
for (k in seq_len(nrow(e))) {
    i <- e$i[k] + 1; j <- e$j[k] + 1
    R[i, j] <- R[j, i] <- -1
}
diag(R) <- -rowSums(R)
ev <- eigen(R, symmetric = TRUE)
Rp <- ev$vectors[, 1:(nn - 1)] %*% diag(1 / ev$values[1:(nn - 1)]) %*% t(ev$vectors[, 1:(nn - 1)])
cs <- exp(mean(log(diag(Rp))))                 # the scaling: R* = cs R
sd_ <- 0.6; sw <- 0.3; c0 <- 0.4; c1 <- 0.5      # f.node.variance, f.week.variance, coefficients
np_ <- 40
pd <- data.frame(node = sample(0:5, np_, replace = TRUE),
                 week = round(sort(runif(np_, 0, 8)), 2),
                 x1 = round(rnorm(np_), 2))
pd$n <- rpois(np_, exp(c0 + c1 * pd$x1 + 0.4 * sin(pd$week) + 0.3 * (pd$node %% 3 - 1)))
pd$n[7] <- NA
write.csv(pd, file.path(out, "predict_pois_data.csv"), row.names = FALSE, quote = FALSE,
          na = "")
writeLines(c("{", '  "format_version": 1,', '  "tool_version": "0.1.0",',
             '  "formula": "n ~ x1 + f(node, besag, graph=tests/fixtures/stack/edges.csv) + f(week, rw2)",',
             '  "parameters": {', sprintf('    "f.node.variance": %.17g,', sd_),
             sprintf('    "f.week.variance": %.17g,', sw), sprintf('    "intercept": %.17g,', c0),
             sprintf('    "coef.x1": %.17g', c1), "  },", '  "likelihood": "poisson",',
             '  "center": null,', '  "loglik": 0.0,', '  "iterations": 0,', '  "converged": false,',
             '  "data": {"file": "predict_pois_data.csv", "x": null, "y": "n", "node": null, "exposure": null}',
             "}"), file.path(out, "model_pois.json"))
# new rows: the node without data, between weeks, beyond the last and
# before the first week, a week of the data with a node it never met
pn <- data.frame(node = c(6, 2, 0, 5, 3, 1, 4),
                 week = c(3.333, 0.5 * (pd$week[10] + pd$week[11]), 9.4, -0.7, pd$week[20],
                          pd$week[1], 7.123),
                 x1 = c(0.2, -0.5, 1.0, 0.0, 0.7, -1.2, 0.4),
                 n = c(2, 0, 5, 1, 3, 0, 4))
write.csv(pn, file.path(out, "predict_pois_new.csv"), row.names = FALSE, quote = FALSE)
w0 <- sort(unique(pd$week))
w <- sort(unique(c(pd$week, pn$week)))
m <- length(w)
nx <- 2 * m + nn                                  # (x, x') per week, then the nodes
Qa <- matrix(0, nx, nx)
Qa[1:(2 * m), 1:(2 * m)] <- walk_q(w, TRUE) / sw
Qa[2 * m + 1:nn, 2 * m + 1:nn] <- cs * R / sd_
xi <- seq(1, 2 * m, 2)
data_w <- w %in% w0
tbar <- mean(w0)
Cn <- matrix(0, 3, nx)
Cn[1, xi[data_w]] <- 1
Cn[2, xi[data_w]] <- w[data_w] - tbar
Cn[3, 2 * m + 1:nn] <- 1
V <- null_basis(Cn)
hmap <- function(week, node) {
    H <- matrix(0, length(week), nx)
    H[cbind(seq_along(week), xi[match(week, w)])] <- 1
    H[cbind(seq_along(week), 2 * m + node + 1)] <- 1
    H
}
po <- !is.na(pd$n)
H <- hmap(pd$week, pd$node)[po, ] %*% V
off <- (c0 + c1 * pd$x1)[po]
yv <- pd$n[po]
QV <- t(V) %*% Qa %*% V
z <- numeric(ncol(V))
for (it in 1:50) {
    eta <- off + H %*% z
    lam <- as.vector(exp(eta))
    M <- QV + t(H) %*% (lam * H)
    z <- z + solve(M, t(H) %*% (yv - lam) - QV %*% z)
}
eta <- off + H %*% z
M <- QV + t(H) %*% (as.vector(exp(eta)) * H)
Hn <- hmap(pn$week, pn$node) %*% V
mn <- c0 + c1 * pn$x1 + Hn %*% z
vn <- diag(Hn %*% solve(M, t(Hn)))
lpd <- mapply(function(y, mu, v) {
    f <- function(x) dpois(y, exp(x)) * dnorm(x, mu, sqrt(v))
    log(integrate(f, mu - 15 * sqrt(v), mu + 15 * sqrt(v), rel.tol = 1e-13,
                  subdivisions = 1000L)$value)
}, pn$n, mn, vn)
write.csv(data.frame(row = seq_len(nrow(pn)), mean = sprintf("%.17g", mn),
                     var = sprintf("%.17g", vn), lpd = sprintf("%.17g", lpd)),
          file.path(out, "predict_pois_expected.csv"), row.names = FALSE, quote = FALSE)
