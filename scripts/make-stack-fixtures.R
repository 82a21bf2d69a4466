#!/usr/bin/Rscript
# make-stack-fixtures.R -- dense references for stacked formulas that
# scripts/make-stack-fixtures.py (numpy) does not cover, for
# tests/cli/cases/48_formula_stack.sh, written to tests/fixtures/stack/:
# the cyclic walks (f(NAME, rw1|rw2, cyclic[, period=P])) and the per-term
# posterior of predict --terms.
#
#   Rscript scripts/make-stack-fixtures.R      (base R only; run after the .py)
#
# CYCLIC WALKS.
# The prior precision is built from the walk's definition, transition by
# transition, the last value followed by the first a wrap distance
# d = period - (t_max - t_min) further on: rw1 (x_{j+1} - x_j)^2 / (s dt_j);
# rw2 the integrated Wiener process's exact two-state transition
# z_{j+1} = [1 dt; 0 1] z_j + e, e ~ N(0, s [dt^3/3 dt^2/2; dt^2/2 dt]).
# Conditioned on sum_j x_j = 0, the covariance is V (V'QV)^-1 V', V an
# orthonormal basis of that subspace; y ~ N(A x, noise I) over the rows,
# centred by its mean (no covariate), and the log density of the centred y
# is the reference.  Writes cyclic_data.csv, cyclic_model_*.json and
# cyclic_expected.csv (case,loglik).
#
# TERMS.  model_rw1_iid.json (the .py's rw1 + iid on data_rw1_iid.csv) at
# its values: prior covariance P = blockdiag(s_t C_rw1, s_g I) (C_rw1 the
# sum-to-zero constrained rw1 covariance), S = A P A' + noise I over the
# observed rows; posterior mean P A' S^-1 (y - center) and covariance
# P - P A' S^-1 A P; writes terms_rw1_iid.csv (term,level,mean,sd).
out <- file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))),
                 "..", "tests", "fixtures", "stack")
set.seed(20261127)

walk_q <- function(u, period, two, cyclic = TRUE) {
    m <- length(u)
    d <- c(diff(u), period - (u[m] - u[1]))
    k <- if (two) 2 else 1
    Q <- matrix(0, k * m, k * m)
    for (j in 1:(if (cyclic) m else m - 1)) {
        nx <- if (j == m) 1 else j + 1
        h <- d[j]
        if (two) {
            G <- matrix(0, 2, 2 * m)
            G[, (2 * nx - 1):(2 * nx)] <- diag(2)
            G[, (2 * j - 1):(2 * j)] <- G[, (2 * j - 1):(2 * j)] - matrix(c(1, 0, h, 1), 2)
            S <- matrix(c(h^3 / 3, h^2 / 2, h^2 / 2, h), 2)
            Q <- Q + t(G) %*% solve(S, G)
        } else {
            g <- numeric(m)
            g[nx] <- g[nx] + 1
            g[j] <- g[j] - 1
            Q <- Q + outer(g, g) / h
        }
    }
    Q
}

# covariance of the data-read values x_j under unit variance
walk_cov <- function(u, period, two, cyclic = TRUE) {
    Q <- walk_q(u, period, two, cyclic)
    m <- length(u)
    xi <- if (two) seq(1, 2 * m, 2) else 1:m
    a <- numeric(nrow(Q))
    a[xi] <- 1
    V <- qr.Q(qr(cbind(a, diag(nrow(Q)))))[, -1]   # orthonormal complement of a
    C <- V %*% solve(t(V) %*% Q %*% V, t(V))
    C[xi, xi]
}

gauss_loglik <- function(r, S) {
    L <- chol(S)
    z <- backsolve(L, r, transpose = TRUE)
    -0.5 * sum(z^2) - sum(log(diag(L))) - 0.5 * length(r) * log(2 * pi)
}

n <- 60
week <- 1:n                                   # three seasons of 20
v <- round(sort(runif(12, 0, 10)), 2)[c(1:12, 1:12, 1:12, 1:12, 1:12)]
y <- round(sin(2 * pi * week / 20) + 0.3 * cos(2 * pi * v / 11) + rnorm(n, 0, 0.3), 4)
write.csv(data.frame(week = week, v = v, y = sprintf("%.4f", y)),
          file.path(out, "cyclic_data.csv"), row.names = FALSE, quote = FALSE)
yc <- y - mean(y)
model_json <- function(name, formula, par) {
    p <- paste0(sprintf('    "%s": %.17g', names(par), par), collapse = ",\n")
    writeLines(c("{", '  "format_version": 1,', '  "tool_version": "0.1.0",',
                 sprintf('  "formula": "%s",', formula), '  "parameters": {', p, "  },",
                 '  "likelihood": "gaussian",', sprintf('  "center": %.17g,', mean(y)),
                 '  "loglik": 0.0,', '  "iterations": 0,', '  "converged": false,',
                 '  "data": {"file": "cyclic_data.csv", "x": null, "y": "y", "node": null, "exposure": null}',
                 "}"), file.path(out, name))
}
cases <- list()
# rw2 on the week numbers reduced modulo 20: the levels 1..20, wrap 1
A <- outer((week - 1) %% 20 + 1, 1:20, "==") * 1
S <- 0.7 * A %*% walk_cov(1:20, 20, TRUE) %*% t(A) + 0.08 * diag(n)
cases$rw2_period <- gauss_loglik(yc, S)
model_json("cyclic_model_rw2_period.json", "y ~ f(week, rw2, cyclic, period=20)",
           c("f.week.variance" = 0.7, "likelihood.variance" = 0.08))
# rw1 and rw2 on irregular values, the default period: range plus one mean spacing
u <- sort(unique(v))
A <- outer(v, u, "==") * 1
per <- (max(u) - min(u)) * length(u) / (length(u) - 1)
for (two in c(FALSE, TRUE)) {
    S <- 0.5 * A %*% walk_cov(u, per, two) %*% t(A) + 0.1 * diag(n)
    k <- if (two) "rw2" else "rw1"
    cases[[paste0(k, "_default")]] <- gauss_loglik(yc, S)
    model_json(sprintf("cyclic_model_%s_default.json", k), sprintf("y ~ f(v, %s, cyclic)", k),
               c("f.v.variance" = 0.5, "likelihood.variance" = 0.1))
}
writeLines(c("case,value", sprintf("%s,%.17g", names(cases), unlist(cases))),
           file.path(out, "cyclic_expected.csv"))

# ---- predict --terms of model_rw1_iid.json ----
d <- read.csv(file.path(out, "data_rw1_iid.csv"), colClasses = c("numeric", "character",
                                                                  "numeric", "numeric"))
m <- readLines(file.path(out, "model_rw1_iid.json"))
num <- function(key) as.numeric(sub(".*: *([-0-9.eE+]+),?$", "\\1",
                                    grep(sprintf('"%s"', key), m, value = TRUE, fixed = TRUE)[1]))
st <- num("f.t.variance"); sg <- num("f.g.variance"); noise <- num("likelihood.variance")
center <- num("center")
obs <- !is.na(d$y)
u <- sort(unique(d$t)); gl <- sort(unique(d$g))
A <- cbind(outer(d$t, u, "==") * 1, outer(d$g, gl, "==") * 1)[obs, ]
P <- matrix(0, ncol(A), ncol(A))
P[seq_along(u), seq_along(u)] <- st * walk_cov(u, 0, FALSE, FALSE)
P[length(u) + seq_along(gl), length(u) + seq_along(gl)] <- sg * diag(length(gl))
S <- A %*% P %*% t(A) + noise * diag(sum(obs))
K <- P %*% t(A) %*% solve(S)
mu <- K %*% (d$y[obs] - center)
C <- P - K %*% A %*% P
write.csv(data.frame(term = c(rep("f.t", length(u)), rep("f.g", length(gl))),
                     level = c(sprintf("%.17g", u), gl), mean = sprintf("%.17g", mu),
                     sd = sprintf("%.17g", sqrt(diag(C)))),
          file.path(out, "terms_rw1_iid.csv"), row.names = FALSE, quote = FALSE)
