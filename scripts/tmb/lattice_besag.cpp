// lattice_besag.cpp -- TMB template for scripts/bench_sparse.sh: Poisson counts
// on a graph with a besag (intrinsic CAR) field, fitted by TMB's Laplace
// approximation (random = "x"),
//
//   y_i ~ Poisson(exp(b + x_i)),  x ~ N(0, (tau (R + eps I))^-1),
//
// R the graph Laplacian (degree on the diagonal, -1 per edge).  gmm-infer's
// besag differs in two ways, both said in docs/benchmarks.md: it conditions x
// on sum(x) = 0 (a hard constraint, by kriging) where TMB, which has no hard
// constraints in its Laplace approximation, gets the ridge eps I (eps small:
// the sum's prior variance 1 / (tau eps n) is diffuse, and the likelihood's
// b + x_i identifies the level); and it scales R (Sorbye and Rue), which only
// renames tau.  The log determinant of the prior precision is n log tau + a
// constant, so no factorisation of it is needed; the constant is left out,
// so the objective is the negative log likelihood up to a constant.
#include <TMB.hpp>

template <class Type>
Type objective_function<Type>::operator()()
{
    DATA_VECTOR(y);
    DATA_SPARSE_MATRIX(R);
    DATA_SCALAR(eps);
    PARAMETER(b);
    PARAMETER(log_tau);
    PARAMETER_VECTOR(x);
    Type tau = exp(log_tau);
    vector<Type> Rx = R * x;
    Type nll = -0.5 * Type(x.size()) * log_tau
             + 0.5 * tau * ((x * Rx).sum() + eps * (x * x).sum());
    for (int i = 0; i < y.size(); i++)
        nll -= dpois(y(i), exp(b + x(i)), true);
    return nll;
}
