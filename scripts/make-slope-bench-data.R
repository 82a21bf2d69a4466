#!/usr/bin/env Rscript
# make-slope-bench-data.R -- the random-slope speed benchmark's data
# (scripts/bench_slopes.sh): N rows (default 1e5)
# in G groups (default 1000), a covariate x ~ N(0, 1) rounded to 4
# decimals, each group's intercept and slope (b0, b1) drawn from a normal
# with sds s0, s1 and correlation rho, and
#
#   slope_gauss.csv  y = 1 + 0.5 x + b0 + b1 x + e, e ~ N(0, 1), rounded to
#                    6 decimals; (s0, s1, rho) = (0.8, 0.4, 0.5)
#   slope_pois.csv   y ~ Poisson(exp(0.5 + 0.3 x + b0 + b1 x));
#                    (s0, s1, rho) = (0.5, 0.25, 0.4)
#
# columns y,x,g (g "g0001" ...; every row's group drawn uniformly).  The
# model to fit is y ~ x + (1 + x | g).  Seeded: the same files on every run
# with the same R (R's default Mersenne-Twister and Inversion).  Not
# committed: written to OUTDIR (default bench-data/, ignored by git).
#
#   Rscript scripts/make-slope-bench-data.R [OUTDIR] [N] [G]
args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "bench-data"
n <- if (length(args) >= 2) as.integer(args[2]) else 100000L
G <- if (length(args) >= 3) as.integer(args[3]) else 1000L
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)

# G draws of (b0, b1) with sds s and correlation rho, by the Cholesky factor
effects <- function(s, rho) {
    L <- t(chol(matrix(c(s[1]^2, rho * s[1] * s[2], rho * s[1] * s[2], s[2]^2), 2)))
    z <- matrix(rnorm(2 * G), 2)
    t(L %*% z)
}

write_set <- function(d, path) {
    tmp <- paste0(path, ".tmp")
    write.csv(d, tmp, row.names = FALSE, quote = FALSE)
    invisible(file.rename(tmp, path))
}

levels <- sprintf("g%04d", seq_len(G))

set.seed(20261207)
gi <- sample.int(G, n, replace = TRUE)
x <- round(rnorm(n), 4)
b <- effects(c(0.8, 0.4), 0.5)
y <- round(1 + 0.5 * x + b[gi, 1] + b[gi, 2] * x + rnorm(n), 6)
write_set(data.frame(y = y, x = x, g = levels[gi]), file.path(outdir, "slope_gauss.csv"))

set.seed(20261208)
gi <- sample.int(G, n, replace = TRUE)
x <- round(rnorm(n), 4)
b <- effects(c(0.5, 0.25), 0.4)
y <- rpois(n, exp(0.5 + 0.3 * x + b[gi, 1] + b[gi, 2] * x))
write_set(data.frame(y = y, x = x, g = levels[gi]), file.path(outdir, "slope_pois.csv"))
