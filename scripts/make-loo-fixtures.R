#!/usr/bin/env Rscript
# make-loo-fixtures.R -- the reference values for gmm-infer's PSIS-LOO and
# WAIC (src/infer/loo.c, tests/infer/test_loo.c), computed by the R package
# loo (Debian r-cran-loo; these fixtures were made with loo 2.5.1 on R 4.2).
#
#   Rscript scripts/make-loo-fixtures.R [OUTDIR]
#
# OUTDIR defaults to tests/fixtures/loo.  For each set NAME it writes
#
#   draws_NAME.csv     pointwise log-likelihood draws in the layout of
#                      `gmm-infer hmc --log-lik`: .chain,.iteration,.draw,
#                      lp__,accept_stat__,log_lik[1],...,log_lik[N], rows by
#                      chain then iteration, 17 significant digits;
#   pointwise_NAME.csv per observation: elpd_loo,p_loo,looic,pareto_k,r_eff
#                      of loo::loo(ll, r_eff = loo::relative_eff(exp(ll))),
#                      elpd_waic,p_waic,waic of loo::waic(ll), and loo's
#                      mcse_elpd_loo;
#   totals_NAME.csv    measure,estimate,se for elpd_loo, p_loo, looic,
#                      elpd_waic, p_waic, waic (their $estimates tables),
#                      then mcse_elpd_loo (loo's mcse_loo, NA when some
#                      k > 0.7), its se NA.
#
# The draws are seeded, so the files are reproducible; the tests read the
# committed files and never need R.
suppressPackageStartupMessages(library(loo))

args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/loo"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)

num <- function(x) ifelse(is.na(x), "NA", sprintf("%.17g", x))

write_csv <- function(df, path) {
    cols <- lapply(df, function(col) if (is.numeric(col)) num(col) else as.character(col))
    lines <- do.call(paste, c(cols, sep = ","))
    tmp <- paste0(path, ".tmp")
    writeLines(c(paste(names(df), collapse = ","), lines), tmp)
    invisible(file.rename(tmp, path))
}

ar1 <- function(n, rho) {
    x <- numeric(n)
    x[1] <- rnorm(1) / sqrt(1 - rho^2)
    for (t in seq_len(n)[-1]) x[t] <- rho * x[t - 1] + rnorm(1)
    x
}

# ll: iterations x chains x observations.
make_set <- function(name, ll) {
    niter <- dim(ll)[1]; nchain <- dim(ll)[2]; nobs <- dim(ll)[3]
    m <- matrix(aperm(ll, c(1, 2, 3)), nrow = niter * nchain)  # chain-major rows
    d <- data.frame(.chain = rep(seq_len(nchain), each = niter),
                    .iteration = rep(seq_len(niter), nchain),
                    .draw = seq_len(niter * nchain),
                    lp__ = rowSums(m), accept_stat__ = 0.9)
    colnames(m) <- sprintf("log_lik[%d]", seq_len(nobs))
    d <- cbind(d, as.data.frame(m, check.names = FALSE))
    write_csv(d, file.path(outdir, paste0("draws_", name, ".csv")))

    r_eff <- relative_eff(exp(ll))
    l <- suppressWarnings(loo(ll, r_eff = r_eff))
    w <- suppressWarnings(waic(ll))
    p <- data.frame(elpd_loo = l$pointwise[, "elpd_loo"], p_loo = l$pointwise[, "p_loo"],
                    looic = l$pointwise[, "looic"], pareto_k = l$diagnostics$pareto_k,
                    r_eff = r_eff, elpd_waic = w$pointwise[, "elpd_waic"],
                    p_waic = w$pointwise[, "p_waic"], waic = w$pointwise[, "waic"],
                    mcse_elpd_loo = l$pointwise[, "mcse_elpd_loo"])
    write_csv(p, file.path(outdir, paste0("pointwise_", name, ".csv")))
    # the Monte Carlo SE of elpd_loo (print.loo's; NA when some k > 0.7) as
    # a measure without an SE
    e <- rbind(l$estimates, w$estimates, mcse_elpd_loo = c(mcse_loo(l), NA))
    write_csv(data.frame(measure = rownames(e), estimate = e[, "Estimate"], se = e[, "SE"]),
              file.path(outdir, paste0("totals_", name, ".csv")))
}

set.seed(20261127)

# A normal model y_i ~ N(mu, sigma) with autocorrelated draws of mu and
# log sigma (r_eff far from 1) and two outlying observations (k > 0.7).
gauss <- function(nchain, niter, y, rho) {
    ll <- array(0, c(niter, nchain, length(y)))
    for (ch in seq_len(nchain)) {
        mu <- mean(y) + 0.3 * ar1(niter, rho) * sqrt(1 - rho^2)
        ls <- log(sd(y)) + 0.15 * ar1(niter, rho) * sqrt(1 - rho^2)
        for (i in seq_along(y)) ll[, ch, i] <- dnorm(y[i], mu, exp(ls), log = TRUE)
    }
    ll
}
make_set("normal", gauss(4, 250, c(rnorm(28), 6, -9), 0.8))

# One chain, antithetic draws (r_eff > 1), odd length.
make_set("one", gauss(1, 301, rnorm(12), -0.5))

# Heavy tails: a Student-t-like mixture makes very bad k.
heavy <- array(0, c(200, 2, 6))
for (i in 1:6) heavy[, , i] <- -abs(rt(400, df = 0.5 + 0.3 * i))
make_set("heavy", heavy)

# Ties: log-likelihoods rounded to a few values, and a constant observation
# (its tail cannot be fitted: k = Inf, raw weights).
ties <- gauss(2, 100, rnorm(5), 0.5)
ties[, , 1:4] <- round(ties[, , 1:4], 1)
ties[, , 5] <- -1.25
make_set("ties", ties)

# Three chains of 349 (not a product of 2, 3 and 5: loo's FFT padding
# scales the within-chain variance by nextn(349) / 349 against the
# between-chain one) with shifted chain means and mild autocorrelation, so
# r_eff sets the tail length (3 sqrt(S / r_eff) < 0.2 S).
mixed <- gauss(3, 349, c(rnorm(15), 4.5), 0.3)
for (ch in 1:3) mixed[, ch, ] <- mixed[, ch, ] + 0.02 * (ch - 2)
make_set("mixed", mixed)

# Every k <= 0.7: loo's mcse_loo is a number (NA in the sets above).
make_set("clean", gauss(4, 250, rnorm(20), 0.6))
