// The same model as gmrf_poisson_fixed.stan, centred: x ~ N(0, Q^-1)
// sampled directly, its log density -x'Qx/2 summed over the edges (O(n + m)
// per gradient, the sparse form of Stan's ICAR case study; log|Q| is a
// constant at fixed hyperparameters).  Not the whitened target gmm-infer
// samples: a different geometry, for comparison.
data {
  int<lower=1> n;
  int<lower=0> m;
  int<lower=1, upper=n> ei[m];
  int<lower=1, upper=n> ej[m];
  vector[n] qdiag;  // diagonal of Q
  vector[m] qoff;   // Q[ei[e], ej[e]]
  int<lower=0> y[n];
  vector[n] log_exposure;
  real b;
}
parameters {
  vector[n] x;
}
model {
  target += -0.5 * (dot_product(qdiag, square(x)) + 2 * dot_product(qoff, x[ei] .* x[ej]));
  y ~ poisson_log(log_exposure + b + x);
}
generated quantities {
  vector[n] f = b + x;
}
