// Poisson counts on a graph, latent GMRF with the edge-ou precision of
// include/gmm/gmrf.h assembled from sampled hyperparameters, non-centred:
// z ~ N(0, I), x = L^-T z with L = chol(Q(sigma2, ell)), as gmm-infer hmc
// --sample-hyper does.  Priors are gmm-infer's defaults, centred at the
// fitted values: lognormal(log value, 1) for the positive parameters (Stan
// samples their logs, as gmm-infer does), normal(value, 2) for the intercept.
// Per edge e = (i, j) of length d: t = d / ell, rho = exp(-t),
// s = 1 - rho^2 = -expm1(-2 t); Q[i,i] and Q[j,j] += (1/s - 1/2) / sigma2,
// Q[i,j] = Q[j,i] += -rho / (s sigma2); an isolated node gets 1 / sigma2.
data {
  int<lower=1> n;
  int<lower=0> m;
  int<lower=1, upper=n> ei[m];
  int<lower=1, upper=n> ej[m];
  vector<lower=0>[m] elen;
  int<lower=0, upper=1> isolated[n];
  int<lower=0> y[n];
  vector[n] log_exposure;
  real mu_sigma2;   // prior: sigma2 ~ lognormal(mu_sigma2, sd_sigma2)
  real<lower=0> sd_sigma2;
  real mu_ell;      // prior: ell ~ lognormal(mu_ell, sd_ell)
  real<lower=0> sd_ell;
  real mu_b;        // prior: b ~ normal(mu_b, sd_b)
  real<lower=0> sd_b;
}
parameters {
  real<lower=0> sigma2;  // edge-ou variance
  real<lower=0> ell;     // edge-ou lengthscale
  real b;                // intercept
  vector[n] z;
}
transformed parameters {
  vector[n] x;
  {
    matrix[n, n] Q = rep_matrix(0, n, n);
    for (e in 1:m) {
      real t = elen[e] / ell;
      real s = -expm1(-2 * t);
      real cd = (1 / s - 0.5) / sigma2;
      real co = -exp(-t) / (s * sigma2);
      Q[ei[e], ei[e]] += cd;
      Q[ej[e], ej[e]] += cd;
      Q[ei[e], ej[e]] += co;
      Q[ej[e], ei[e]] += co;
    }
    for (i in 1:n)
      if (isolated[i])
        Q[i, i] += 1 / sigma2;
    x = mdivide_right_tri_low(z', cholesky_decompose(Q))';
  }
}
model {
  sigma2 ~ lognormal(mu_sigma2, sd_sigma2);
  ell ~ lognormal(mu_ell, sd_ell);
  b ~ normal(mu_b, sd_b);
  z ~ std_normal();
  y ~ poisson_log(log_exposure + b + x);
}
generated quantities {
  vector[n] f = b + x;
}
