# bench_stan.R -- gmm-infer hmc against Stan (rstan 2.21, Debian r-cran-rstan)
# on the same models, in the same run, on the same machine.
#
#   Rscript scripts/bench_stan.R [--gmm-infer PATH] [--out DIR] [--chains K]
#       [--warmup W] [--draws D] [--cases flu,chicago,flu-hyper]
#
# (scripts/bench_stan.sh builds gmm-infer and runs this.)  Cases:
#   flu        Poisson counts on the 140 districts of data/flu_bybw_*.csv,
#              population as exposure, edge-ou precision and intercept fixed at
#              gmm-infer fit's values; gmm-infer runs twice, whitened by the
#              Laplace posterior (--metric laplace) and by the prior
#              (--metric prior);
#   flu-hyper  the same with the edge-ou variance and lengthscale and the
#              intercept sampled, under gmm-infer hmc --sample-hyper's default
#              priors (lognormal(log value, 1), normal(value, 2)); gmm-infer
#              runs twice, the hyperparameters sampled jointly with the field
#              (--marginal none) and by NUTS on their Laplace marginal with
#              the field drawn given them (--marginal laplace, and
#              laplace-mh, corrected to exact draws), f means against the
#              joint run's;
#   chicago    Poisson crime counts on the 338 nodes of the Chicago street
#              graph, hyperparameters fixed at gmm-infer fit's values (both
#              maps, as flu).
# The fixed cases run first, so that their rows are in results.csv when the
# long flu-hyper case is cut short.
# Samplers: gmm-infer hmc (whitened NUTS), Stan NUTS on the non-centred model
# (z ~ N(0, I), x = L^-T z: scripts/stan/gmrf_poisson_fixed.stan and
# gmrf_poisson_hyper.stan -- the same target as gmm-infer's), and, at fixed
# hyperparameters, Stan on the centred model (gmrf_poisson_centred.stan).
# Both run their K chains one after the other on one core (gmm-infer
# --threads 1, rstan cores = 1), W warm-up iterations and D draws each (default
# 4 x 1000 + 1000).  Stan starts z (or x) at its default random inits and
# the hyperparameters at the fitted values (gmm-infer starts at the Laplace
# mode).  Measured for each:
#   time_s        seconds of sampling, warm-up included, wall clock, one
#                 core: gmm-infer's whole process (reading the data, the
#                 mode, writing the draws included); Stan's own timer summed
#                 over the chains (get_elapsed_time(): warm-up + sampling, as
#                 CmdStan reports it -- neither the compilation nor rstan's
#                 work in R before and after, which results.csv gives as
#                 r_cpu_s, R's CPU time over the whole sampling() call)
#   grad_us       time_s / all leapfrog steps (warm-up included): the cost of
#                 one gradient with the sampler's own work
#   ess_min       minimum bulk ESS over the latents f[node] (gmm-infer
#                 summary on both samplers' draws, written with the same
#                 columns), and ess_hyper the minimum over the hyperparameters
#                 (the table gives it per second too)
#   ess_per_s     ess_min / time_s
#   zmax, z3, zsd max |z| over the latents of the difference of the posterior
#                 means, z = (m1 - m2) / sqrt(mcse1^2 + mcse2^2) against the
#                 case's first gmm-infer run (mcse: posterior::mcse_mean), how
#                 many exceed 3, and the sd of the n z-scores (1 when the
#                 means agree within Monte Carlo error; max |z| is the largest
#                 of n: above 3 in 31% of runs for n = 140, 60% for n = 338)
# After the table, each gmm-infer run's ESS per second over Stan's best
# (centred or non-centred) in the same case, for the latents and (sampled
# hyperparameters) for the hyperparameters.
# Everything goes to DIR (default bench-stan): draws, summaries, results.csv,
# and the table printed at the end.

suppressMessages({
    library(rstan)
    library(jsonlite)
})

args <- commandArgs(TRUE)
opt <- list(gmm = "./gmm-infer", out = "bench-stan", chains = 4L, warmup = 1000L,
            draws = 1000L, cases = "flu,chicago,flu-hyper")
i <- 1L
while (i <= length(args)) {
    a <- args[i]
    v <- if (i < length(args)) args[i + 1L] else NA
    switch(a,
           "--gmm-infer" = opt$gmm <- v,
           "--out" = opt$out <- v,
           "--chains" = opt$chains <- as.integer(v),
           "--warmup" = opt$warmup <- as.integer(v),
           "--draws" = opt$draws <- as.integer(v),
           "--cases" = opt$cases <- v,
           stop("bench_stan.R: unknown option ", a))
    i <- i + 2L
}
cases <- strsplit(opt$cases, ",")[[1]]
gmm <- normalizePath(opt$gmm)
dir.create(opt$out, showWarnings = FALSE, recursive = TRUE)
out <- function(f) file.path(opt$out, f)
stan_dir <- file.path(dirname(normalizePath(sub("--file=", "",
    grep("--file=", commandArgs(FALSE), value = TRUE)[1]))), "stan")
# Debian's r-cran-bh is a stub over libboost-dev's headers, which rstan
# 2.21 does not look for by itself
if (!nzchar(rstan_options("boost_lib")) && dir.exists("/usr/include/boost"))
    rstan_options(boost_lib = "/usr/include")
rstan_options(auto_write = FALSE)
msg <- function(...) cat("bench_stan:", ..., "\n", file = stderr())

run_gmm <- function(...) {
    a <- c(...)
    st <- system2(gmm, a)
    if (st != 0) stop("gmm-infer ", paste(a, collapse = " "), ": exit status ", st)
}

# Run gmm-infer under bash's `time`: c(wall, cpu) in seconds (user + system
# of the process itself, as bench_large.sh measures it).
timed_gmm <- function(a) {
    tf <- tempfile()
    cmd <- sprintf("TIMEFORMAT='%%R %%U %%S'; { time %s 2>&3; } 3>&2 2> %s",
                   paste(shQuote(c(gmm, a)), collapse = " "), shQuote(tf))
    st <- system2("bash", c("-c", shQuote(cmd)))
    if (st != 0) stop("gmm-infer ", paste(a, collapse = " "), ": exit status ", st)
    t <- scan(tf, quiet = TRUE)
    unlink(tf)
    c(wall = t[1], cpu = t[2] + t[3])
}

## ---- the graphs and gmm-infer's fits -------------------------------------

graphs <- list(
    flu = list(nodes = "data/flu_bybw_nodes.csv", edges = "data/flu_bybw_edges.csv",
               y = "count_total", exposure = "population_2001",
               start = "edge-ou(variance=1, lengthscale=300)"),
    chicago = list(nodes = "data/chicago_road_nodes.csv", edges = "data/chicago_road_edges.csv",
                   y = "count", exposure = NULL, start = "edge-ou(lengthscale=20)"))

# Nodes are the integer labels 0..n-1 of the files; Stan's index k is label k - 1.
load_graph <- function(g, name) {
    nd <- read.csv(g$nodes)
    ed <- read.csv(g$edges)
    n <- nrow(nd)
    stopifnot(sort(nd$node) == 0:(n - 1), all(c(ed$i, ed$j) %in% nd$node))
    nd <- nd[order(nd$node), ]
    model <- out(paste0(name, ".json"))
    a <- c("fit", g$nodes, "--graph", g$edges, "--node", "node", "--y", g$y,
           "--likelihood", "poisson", "--precision", shQuote(g$start), "-o", model)
    if (!is.null(g$exposure)) a <- c(a, "--exposure", g$exposure)
    t0 <- proc.time()
    run_gmm(a)
    fit_s <- (proc.time() - t0)[["elapsed"]]
    p <- fromJSON(model)$parameters
    list(name = name, n = n, m = nrow(ed), ei = ed$i + 1L, ej = ed$j + 1L, len = ed$length,
         y = nd[[g$y]],
         log_exposure = if (is.null(g$exposure)) rep(0, n) else log(nd[[g$exposure]]),
         variance = p[["0.edge-ou.variance"]], lengthscale = p[["0.edge-ou.lengthscale"]],
         b = p[["intercept"]], model = model, fit_s = fit_s, src = g)
}

# The edge-ou precision of include/gmm/gmrf.h, dense, in the files' numbering.
edge_ou <- function(G, v = G$variance, l = G$lengthscale) {
    Q <- matrix(0, G$n, G$n)
    t <- G$len / l
    s <- -expm1(-2 * t)
    cd <- (1 / s - 0.5) / v
    co <- -exp(-t) / (s * v)
    for (e in seq_len(G$m)) {
        i <- G$ei[e]
        j <- G$ej[e]
        Q[i, i] <- Q[i, i] + cd[e]
        Q[j, j] <- Q[j, j] + cd[e]
        Q[i, j] <- Q[i, j] + co[e]
        Q[j, i] <- Q[j, i] + co[e]
    }
    iso <- !(seq_len(G$n) %in% c(G$ei, G$ej))
    Q[cbind(which(iso), which(iso))] <- 1 / v
    Q
}

# Q built here is gmm-infer's: the Gaussian log likelihood of the counts,
# log N(y; 0, Q^-1 + s2 I), by gmm-infer loglik and densely here.
check_precision <- function(G) {
    s2 <- var(G$y)
    spec <- sprintf("edge-ou(variance=%.17g, lengthscale=%.17g)", G$variance, G$lengthscale)
    txt <- system2(gmm, c("loglik", G$src$nodes, "--graph", G$src$edges, "--node", "node",
                          "--y", G$src$y, "--precision", shQuote(spec), "--noise",
                          sprintf("%.17g", s2), "--no-center"), stdout = TRUE)
    ll_gmm <- fromJSON(paste(txt, collapse = "\n"))$loglik
    S <- solve(edge_ou(G)) + diag(s2, G$n)
    R <- chol(S)
    ll <- -sum(log(diag(R))) - 0.5 * sum(backsolve(R, G$y, transpose = TRUE)^2) -
        0.5 * G$n * log(2 * pi)
    rel <- abs(ll - ll_gmm) / abs(ll)
    msg(sprintf("%s: Q checked against gmm-infer loglik: %.12g vs %.12g (rel %.1e)",
                G$name, ll, ll_gmm, rel))
    if (rel > 1e-9) stop("the precision built in R is not gmm-infer's")
}

## ---- samplers ------------------------------------------------------------

hyper_names <- c(sigma2 = "0.edge-ou.variance", ell = "0.edge-ou.lengthscale", b = "intercept")

# gmm-infer summary's table, with posterior's mcse_mean of each latent
# (NA for the others): the Monte Carlo SE of the mean from the ESS of the
# draws themselves, not bulk ESS's rank-normalised ones
summarise <- function(draws, tag) {
    s <- out(paste0(tag, "-summary.csv"))
    run_gmm("summary", "-o", s, draws)
    s <- read.csv(s, check.names = FALSE, stringsAsFactors = FALSE)
    d <- read.csv(draws, check.names = FALSE)
    d <- d[order(d$.chain, d$.iteration), ]
    nc <- length(unique(d$.chain))
    s$mcse_mean <- vapply(s$variable, function(v) {
        if (!grepl("^f\\[", v)) return(NA_real_)
        posterior::mcse_mean(matrix(d[[v]], ncol = nc))
    }, numeric(1))
    s
}

sample_gmm <- function(G, tag, hyper, marginal = "none", metric = NULL) {
    draws <- out(paste0(tag, ".csv"))
    a <- c("hmc", "--model", G$model, "--chains", opt$chains, "--threads", 1,
           "--warmup", opt$warmup, "--draws", opt$draws, "--seed", 1, "--quiet",
           "-o", draws)
    if (hyper) a <- c(a, "--sample-hyper", "--marginal", marginal)
    if (!is.null(metric)) a <- c(a, "--metric", metric)
    t <- timed_gmm(a)
    info <- fromJSON(paste0(draws, ".json"))
    list(sampler = if (hyper) paste("gmm-infer hmc --marginal", marginal)
                   else paste("gmm-infer hmc --metric", metric), draws = draws,
         time_s = t[["wall"]], cpu_s = t[["cpu"]], r_cpu_s = NA,
         leapfrogs = sum(info$leapfrog_steps$warmup) + sum(info$leapfrog_steps$draws),
         divergent = sum(info$divergences), compile_s = NA)
}

compiled <- list()
stan_compile <- function(file) {
    if (is.null(compiled[[file]])) {
        t0 <- proc.time()
        m <- stan_model(file.path(stan_dir, file), model_name = sub("\\.stan$", "", file))
        compiled[[file]] <<- list(model = m, s = (proc.time() - t0)[["elapsed"]])
        msg(sprintf("compiled %s in %.1f s", file, compiled[[file]]$s))
    }
    compiled[[file]]
}

# Stan's draws as gmm-infer writes its own: .chain,.iteration,.draw, the
# sampler columns, the hyperparameters by gmm-infer's names, f[label].
write_stan_draws <- function(fit, G, file, hyper) {
    sp <- get_sampler_params(fit, inc_warmup = FALSE)
    lp <- as.array(fit, pars = "lp__")
    f <- as.array(fit, pars = "f")
    hp <- if (hyper) as.array(fit, pars = names(hyper_names)) else NULL
    rows <- lapply(seq_along(sp), function(c) {
        D <- nrow(sp[[c]])
        d <- data.frame(.chain = c, .iteration = seq_len(D), .draw = (c - 1) * D + seq_len(D),
                        lp__ = lp[, c, 1], check.names = FALSE)
        d <- cbind(d, sp[[c]][, c("accept_stat__", "stepsize__", "treedepth__",
                                  "n_leapfrog__", "divergent__", "energy__")])
        if (hyper) {
            h <- hp[, c, , drop = TRUE]
            colnames(h) <- hyper_names[dimnames(hp)[[3]]]
            d <- cbind(d, h)
        }
        ff <- f[, c, , drop = TRUE]
        colnames(ff) <- sprintf("f[%d]", seq_len(G$n) - 1L)
        cbind(d, ff)
    })
    d <- do.call(rbind, rows)
    write.table(format(d, digits = 17), file, sep = ",", quote = FALSE, row.names = FALSE)
}

sample_stan <- function(G, tag, kind) {
    hyper <- kind == "hyper"
    file <- switch(kind, fixed = "gmrf_poisson_fixed.stan", hyper = "gmrf_poisson_hyper.stan",
                   centred = "gmrf_poisson_centred.stan")
    cm <- stan_compile(file)
    Q <- edge_ou(G)
    data <- switch(kind,
        fixed = list(n = G$n, y = G$y, log_exposure = G$log_exposure, Q = Q, b = G$b),
        centred = list(n = G$n, m = G$m, ei = G$ei, ej = G$ej, qdiag = diag(Q),
                       qoff = Q[cbind(G$ei, G$ej)], y = G$y, log_exposure = G$log_exposure,
                       b = G$b),
        hyper = list(n = G$n, m = G$m, ei = G$ei, ej = G$ej, elen = G$len,
                     isolated = as.integer(!(seq_len(G$n) %in% c(G$ei, G$ej))), y = G$y,
                     log_exposure = G$log_exposure,
                     mu_sigma2 = log(G$variance), sd_sigma2 = 1,
                     mu_ell = log(G$lengthscale), sd_ell = 1, mu_b = G$b, sd_b = 2))
    init <- if (hyper) function() list(sigma2 = G$variance, ell = G$lengthscale, b = G$b)
            else "random"
    t0 <- proc.time()
    fit <- sampling(cm$model, data = data, chains = opt$chains, cores = 1,
                    iter = opt$warmup + opt$draws, warmup = opt$warmup, seed = 1,
                    init = init, refresh = 0)
    t <- proc.time() - t0
    sp <- get_sampler_params(fit, inc_warmup = TRUE)
    draws <- out(paste0(tag, ".csv"))
    write_stan_draws(fit, G, draws, hyper)
    post <- get_sampler_params(fit, inc_warmup = FALSE)
    list(sampler = if (kind == "centred") "Stan NUTS (centred)" else "Stan NUTS (non-centred)",
         draws = draws, time_s = sum(get_elapsed_time(fit)), cpu_s = NA,
         r_cpu_s = t[["user.self"]] + t[["sys.self"]],
         leapfrogs = sum(sapply(sp, function(s) sum(s[, "n_leapfrog__"]))),
         divergent = sum(sapply(post, function(s) sum(s[, "divergent__"]))),
         compile_s = cm$s)
}

## ---- the runs ------------------------------------------------------------

results <- list()
ref <- list()
record <- function(case, n, r, s) {
    lat <- s[grepl("^f\\[", s$variable), ]
    hyp <- s[s$variable %in% hyper_names, ]
    z <- c(zmax = NA, z3 = NA, zsd = NA)
    if (!identical(r$draws, attr(ref[[case]], "draws"))) {
        b <- ref[[case]][match(lat$variable, ref[[case]]$variable), ]
        zz <- (lat$mean - b$mean) / sqrt(lat$mcse_mean^2 + b$mcse_mean^2)
        z <- c(zmax = max(abs(zz)), z3 = sum(abs(zz) > 3), zsd = sd(zz))
    }
    row <- data.frame(case = case, n = n, sampler = r$sampler, time_s = r$time_s,
                      cpu_s = r$cpu_s, r_cpu_s = r$r_cpu_s, leapfrogs = r$leapfrogs,
                      grad_us = 1e6 * r$time_s / r$leapfrogs,
                      ess_min = min(lat$ess_bulk), ess_per_s = min(lat$ess_bulk) / r$time_s,
                      ess_hyper = if (nrow(hyp)) min(hyp$ess_bulk) else NA,
                      rhat_max = max(c(lat$rhat, hyp$rhat)),
                      zmax = z[["zmax"]], z3 = z[["z3"]], zsd = z[["zsd"]], divergent = r$divergent,
                      compile_s = r$compile_s, check.names = FALSE)
    msg(paste(names(row), format(row, digits = 4), sep = "=", collapse = " "))
    results[[length(results) + 1L]] <<- row
    write.csv(do.call(rbind, results), out("results.csv"), row.names = FALSE)
}

G <- list()
for (case in cases) {
    gname <- sub("-hyper$", "", case)
    if (is.null(G[[gname]])) {
        G[[gname]] <- load_graph(graphs[[gname]], gname)
        check_precision(G[[gname]])
    }
    g <- G[[gname]]
    hyper <- grepl("-hyper$", case)
    msg(sprintf("%s: n = %d, variance %.4g, lengthscale %.4g, intercept %.4g", case, g$n,
                g$variance, g$lengthscale, g$b))
    # fixed: the Laplace map, the prior's against it; sampled: the joint
    # sampler, the embedded Laplace ones against it
    runs <- if (hyper) c("none", "laplace", "laplace-mh") else c("laplace", "prior")
    for (k in seq_along(runs)) {
        tag <- paste0(case, "-gmm-", runs[k])
        r <- if (hyper) sample_gmm(g, tag, TRUE, marginal = runs[k])
             else sample_gmm(g, tag, FALSE, metric = runs[k])
        s <- structure(summarise(r$draws, tag), draws = r$draws)
        if (k == 1L) ref[[case]] <- s
        record(case, g$n, r, s)
    }
    kinds <- if (hyper) "hyper" else c("fixed", "centred")
    for (k in kinds) {
        tag <- paste0(case, "-stan-", k)
        r <- sample_stan(g, tag, k)
        record(case, g$n, r, summarise(r$draws, tag))
    }
}

res <- do.call(rbind, results)
cat(sprintf("\nrstan %s, %d chains x (%d warm-up + %d draws), one after the other on one core;\ntime: wall clock, warm-up included (Stan: its own timer)\n\n",
            packageVersion("rstan"), opt$chains, opt$warmup, opt$draws))
cat("| model | n | sampler | time s | per gradient | min bulk ESS (latents) | ESS/s | hyper ESS | max R-hat | means against gmm-infer: max abs z (> 3), sd z | Stan compile s |\n")
cat("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
for (k in seq_len(nrow(res))) {
    x <- res[k, ]
    cat(sprintf("| %s | %d | %s | %.1f | %.1f us | %.0f | %.1f | %s | %.3f | %s | %s |\n",
                x$case, x$n, x$sampler, x$time_s, x$grad_us, x$ess_min, x$ess_per_s,
                if (is.na(x$ess_hyper)) "--"
                else sprintf("%.0f (%.1f/s)", x$ess_hyper, x$ess_hyper / x$time_s), x$rhat_max,
                if (is.na(x$zmax)) "--" else sprintf("%.2f (%d), %.2f", x$zmax, as.integer(x$z3),
                                                     x$zsd),
                if (is.na(x$compile_s)) "--" else sprintf("%.0f", x$compile_s)))
}
cat("\n")
for (case in unique(res$case)) {
    r <- res[res$case == case, ]
    stan <- grepl("^Stan", r$sampler)
    if (!any(stan)) next
    best <- which(stan)[which.max(r$ess_per_s[stan])]
    for (k in which(!stan)) {
        cat(sprintf("%s, %s: latents' ESS/s %.1fx Stan's best (%s)", case, r$sampler[k],
                    r$ess_per_s[k] / r$ess_per_s[best],
                    gsub("Stan NUTS \\(|\\)", "", r$sampler[best])))
        if (!is.na(r$ess_hyper[k]) && !is.na(r$ess_hyper[best]))
            cat(sprintf(", hyperparameters' %.1fx", (r$ess_hyper[k] / r$time_s[k]) /
                        (r$ess_hyper[best] / r$time_s[best])))
        cat("\n")
    }
}
