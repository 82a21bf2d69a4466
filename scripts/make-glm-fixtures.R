#!/usr/bin/env Rscript
# make-glm-fixtures.R -- models without latent terms (lm, glm, MASS::glm.nb), prior
# weights (with and without an iid term: lmer, glmer) and rows with missing covariates,
# for tests/cli/cases/72_glm.sh (made with R 4, lme4, MASS, Debian 12).
#
#   Rscript scripts/make-glm-fixtures.R [OUTDIR]   (OUTDIR: tests/fixtures/glm)
#
# Every data set is drawn from a seeded generator; the tests read the committed files and
# never need R.  OUTDIR receives
#
#   glm.csv      200 rows: x (sd 1), a factor a (levels p, q, r), a group g (20 levels),
#                prior weights w in (0.2, 3) with two rows at 0, and the outcomes y
#                (Gaussian), c (Poisson), s of t trials (binomial), nb (negative binomial);
#   glm_na.csv   glm.csv with empty cells in x (rows 3, 17), a (rows 5, 40), w (row 8) and
#                g (row 60), and y missing in row 100 (a row to predict, kept);
#   models.tsv   name, data, formula, likelihood, options of gmm-infer fit;
#   ref.csv      model,name,value: R's "loglik", every coefficient and the likelihood's
#                parameter under gmm-infer's names, "se.NAME" the standard error of each
#                coefficient, "dropped" (rows R's na.omit drops for a covariate) and, for
#                the models without latent terms, "pred.mean.R" and "pred.var.R" at the
#                data rows R = 1, 2, 3: the linear predictor and x'Vx, V the covariance
#                of the coefficients behind the standard errors below (predict.glm's
#                se.fit^2 for glm; lm's times (n - p) / n; the negative binomial's
#                observed information).
#
# The standard errors are those of the maximum likelihood fit: glm's vcov for Poisson and
# binomial (canonical links: observed and expected information agree); lm's times
# sqrt((n - p) / n) (sigma^2 = RSS / n instead of RSS / (n - p); n the rows of nonzero
# weight); for the negative binomial the observed information of the whole likelihood in
# (beta, theta) by optimHess (glm.nb's vcov holds theta fixed and uses the expected
# information of its non-canonical log link).  Weights: lm's N(mu, sigma^2 / w) (its
# logLik includes sum(log w) / 2), glm's w times each row's log density (binomial with a
# cbind(s, t - s) response: w times dbinom(s, t, p)).  lmer and glmer (ML; glmer Laplace)
# fit the models with an iid term; they are fitted to tight tolerances.
suppressPackageStartupMessages({
    library(lme4)
    library(MASS)
})
args <- commandArgs(trailingOnly = TRUE)
outdir <- if (length(args) >= 1) args[1] else "tests/fixtures/glm"
dir.create(outdir, recursive = TRUE, showWarnings = FALSE)
fx <- "tests/fixtures/glm"

set.seed(30)
n <- 200
d <- data.frame(x = round(rnorm(n) * 1024) / 1024,
                a = sample(c("p", "q", "r"), n, TRUE),
                g = sprintf("g%02d", sample(1:20, n, TRUE)))
u <- rnorm(20, 0, 0.5)[as.integer(factor(d$g))]
eta <- 0.4 * d$x + c(p = 0, q = 0.3, r = -0.2)[d$a]
d$w <- round(runif(n, 0.2, 3), 3)
d$w[c(11, 12)] <- 0
d$y <- round(1 + eta + u + rnorm(n) / sqrt(pmax(d$w, 0.2)), 6)
d$c <- rpois(n, exp(0.5 + eta + u))
d$t <- sample(1:10, n, TRUE)
d$s <- rbinom(n, d$t, plogis(-0.3 + eta))
d$nb <- rnegbin(n, exp(1 + eta), theta = 2)
write.csv(d, file.path(outdir, "glm.csv"), row.names = FALSE, quote = FALSE, na = "")
dn <- d
dn$x[c(3, 17)] <- NA
dn$a[c(5, 40)] <- NA
dn$w[8] <- NA
dn$g[60] <- NA
dn$y[100] <- NA
write.csv(dn, file.path(outdir, "glm_na.csv"), row.names = FALSE, quote = FALSE, na = "")

ref <- list()
models <- list()
add <- function(model, name, value)
    ref[[length(ref) + 1]] <<- data.frame(model = model, name = name,
                                          value = sprintf("%.17g", value))
cname <- function(nm) {
    nm <- sub("^\\(Intercept\\)$", "intercept", nm)
    nm <- sub("^factor\\(a\\)(.*)$", "coef.a[\\1]", nm)
    ifelse(nm == "intercept" | grepl("^coef\\.", nm), nm, paste0("coef.", nm))
}
# the linear predictor and its variance x'Vx at data rows 1..3
pred <- function(X, b, V) {
    x <- X[1:3, , drop = FALSE]
    v <- rowSums((x %*% V) * x)
    c(setNames(drop(x %*% b), sprintf("pred.mean.%d", 1:3)), setNames(v, sprintf("pred.var.%d", 1:3)))
}
put <- function(model, data, formula, lik, opts, ll, b, se, extra = NULL) {
    models[[length(models) + 1]] <<- data.frame(name = model, data = file.path(fx, data),
                                                formula = formula, likelihood = lik,
                                                options = opts)
    add(model, "loglik", ll)
    add(model, cname(names(b)), b)
    if (!is.null(se)) add(model, paste0("se.", cname(names(b))), se)
    for (k in names(extra)) add(model, k, extra[[k]])
}
ctl <- glm.control(epsilon = 1e-14, maxit = 200)

# lm: ML log likelihood (logLik's REML = FALSE), sigma^2 = sum(w r^2) / n
lm_fit <- function(model, data, dd, wt, opts) {
    m <- if (wt) lm(y ~ x + factor(a), dd, weights = w) else lm(y ~ x + factor(a), dd)
    nn <- if (wt) sum(m$weights != 0) else nobs(m)
    p <- m$rank
    s2 <- sum((if (wt) m$weights else 1) * residuals(m)^2) / nn
    put(model, data, "y ~ x + factor(a)", "gaussian", opts, logLik(m, REML = FALSE), coef(m),
        sqrt(diag(vcov(m))) * sqrt((nn - p) / nn), c(likelihood.variance = s2,
        dropped = length(na.action(m)), pred(model.matrix(m), coef(m), vcov(m) * (nn - p) / nn)))
}
glm_fit <- function(model, data, dd, wt, opts, resp, fam, lik) {
    f <- as.formula(paste(resp, "~ x + factor(a)"))
    m <- if (wt) glm(f, fam, dd, weights = w, control = ctl) else glm(f, fam, dd, control = ctl)
    lhs <- if (lik == "binomial") "s" else resp
    put(model, data, paste(lhs, "~ x + factor(a)"), lik, opts, logLik(m), coef(m),
        sqrt(diag(vcov(m))), c(dropped = length(na.action(m)),
                               pred(model.matrix(m), coef(m), vcov(m))))
}
nb_fit <- function(model, data, dd, wt, opts) {
    m <- if (wt) glm.nb(nb ~ x + factor(a), dd, weights = w, control = ctl)
         else glm.nb(nb ~ x + factor(a), dd, control = ctl)
    X <- model.matrix(m)
    yy <- m$y
    ww <- if (wt) m$prior.weights else rep(1, length(yy))
    nll <- function(q) {
        mu <- exp(drop(X %*% q[-length(q)]))
        -sum(ww * dnbinom(yy, size = exp(q[length(q)]), mu = mu, log = TRUE))
    }
    H <- optimHess(c(coef(m), log(m$theta)), nll, control = list(ndeps = rep(1e-4, ncol(X) + 1)))
    V <- solve(H)[seq_len(ncol(X)), seq_len(ncol(X))]
    put(model, data, "nb ~ x + factor(a)", "negbinomial", opts, logLik(m), coef(m),
        sqrt(diag(V)), c(likelihood.dispersion = m$theta, dropped = length(na.action(m)),
                         pred(X, coef(m), V)))
}
dc <- d; dc$fail <- dc$t - dc$s
lm_fit("lm", "glm.csv", d, FALSE, "-")
lm_fit("lm_w", "glm.csv", d, TRUE, "--weights w")
glm_fit("pois", "glm.csv", d, FALSE, "-", "c", poisson, "poisson")
glm_fit("pois_w", "glm.csv", d, TRUE, "--weights w", "c", poisson, "poisson")
glm_fit("binom", "glm.csv", dc, FALSE, "--trials t", "cbind(s, fail)", binomial, "binomial")
glm_fit("binom_w", "glm.csv", dc, TRUE, "--trials t --weights w", "cbind(s, fail)", binomial,
        "binomial")
nb_fit("nb", "glm.csv", d, FALSE, "-")
nb_fit("nb_w", "glm.csv", d, TRUE, "--weights w")
# na.omit: the rows with a missing x, a or w dropped (y missing in row 100 is dropped by R
# too, but gmm-infer keeps it as a row to predict: no log likelihood either way)
dna <- dn[!is.na(dn$y), ]
lm_fit("lm_na", "glm_na.csv", dna, TRUE, "--weights w")
glm_fit("pois_na", "glm_na.csv", dn, FALSE, "-", "c", poisson, "poisson")

# with an iid term: lmer (ML) and glmer (Laplace), prior weights, rows of weight 0 dropped
# (lme4 refuses zero weights in some versions; they carry no likelihood)
dg <- d[d$w > 0, ]
m <- lmer(y ~ x + factor(a) + (1 | g), dg, weights = w, REML = FALSE,
          control = lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12)))
vc <- as.data.frame(VarCorr(m))
put("lmer_w", "glm.csv", "y ~ x + factor(a) + f(g, iid)", "gaussian", "--weights w",
    logLik(m), fixef(m), NULL,
    c(f.g.variance = vc$vcov[1], likelihood.variance = sigma(m)^2))
m <- glmer(c ~ x + factor(a) + (1 | g), dg, poisson, weights = w,
           control = glmerControl(optimizer = "bobyqa", tolPwrss = 1e-12,
                                  optCtrl = list(rhoend = 1e-10, maxfun = 1e5)))
vc <- as.data.frame(VarCorr(m))
put("glmer_w", "glm.csv", "c ~ x + factor(a) + f(g, iid)", "poisson", "--weights w",
    logLik(m), fixef(m), NULL, c(f.g.variance = vc$vcov[1]))

write.table(do.call(rbind, models), file.path(outdir, "models.tsv"), sep = "\t",
            row.names = FALSE, quote = FALSE)
write.csv(do.call(rbind, ref), file.path(outdir, "ref.csv"), row.names = FALSE, quote = FALSE)
