#!/usr/bin/env Rscript
# make-ts-fixtures.R -- fixtures for the stacked latent's ar1 term
# (tests/cli/cases/66_formula_ts.sh): two simulated Gaussian series on
# integer positions with gaps and repeated rows, rho near +1 and near -1, and
# the maximum of their exact log marginal likelihood by dense linear algebra
# here (base R, optim over log variance, atanh rho, log noise and the
# intercept), as the tool fits `y ~ f(t, ar1)`: y - intercept ~ N(0,
# V[idx, idx] + noise I), V_ij = variance rho^|i - j| over the positions
# min..max.
# Run from the repository root: Rscript scripts/make-ts-fixtures.R
out <- "tests/fixtures/ts"
dir.create(out, showWarnings = FALSE, recursive = TRUE)

dense_loglik <- function(p, t, y) {
  v <- exp(p[1]); rho <- tanh(p[2]); s2 <- exp(p[3])
  pos <- t - min(t) + 1
  C <- v * rho^abs(outer(pos, pos, "-")) + diag(s2, length(y))
  R <- tryCatch(chol(C), error = function(e) NULL)
  if (is.null(R)) return(-1e10)  # a trial step off the domain (|rho| rounded to 1)
  z <- backsolve(R, y - p[4], transpose = TRUE)
  -0.5 * length(y) * log(2 * pi) - sum(log(diag(R))) - 0.5 * sum(z^2)
}

make <- function(name, rho, seed) {
  set.seed(seed)
  n <- 70
  x <- numeric(n)
  x[1] <- rnorm(1)
  for (j in 2:n) x[j] <- rho * x[j - 1] + sqrt(1 - rho^2) * rnorm(1)
  keep <- sort(c(setdiff(1:n, c(12, 13, 30, 41, 55)), c(5, 20, 33)))  # gaps, repeats
  t <- keep + 100
  y <- 3 + x[keep] + rnorm(length(keep), sd = 0.3)
  write.csv(data.frame(t = t, y = sprintf("%.10f", y)), file.path(out, paste0(name, ".csv")),
            row.names = FALSE, quote = FALSE)
  best <- NULL
  for (r0 in c(-0.5, 0, 0.5, sign(rho) * 0.9)) {
    o <- optim(c(0, atanh(r0), log(0.1), mean(y)), function(p) -dense_loglik(p, t, y),
               method = "BFGS", control = list(reltol = 1e-14, maxit = 2000))
    if (is.null(best) || o$value < best$value) best <- o
  }
  p <- best$par
  data.frame(key = paste0(name, c(":loglik", ":f.t.variance", ":f.t.rho",
                                  ":likelihood.variance", ":intercept")),
             value = sprintf("%.12g", c(-best$value, exp(p[1]), tanh(p[2]), exp(p[3]), p[4])))
}

res <- rbind(make("ar1_pos", 0.995, 303), make("ar1_neg", -0.95, 302))
write.csv(res, file.path(out, "expected.csv"), row.names = FALSE, quote = FALSE)
print(res)
