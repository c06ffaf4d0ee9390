"""The privacy layer: budgets, accounting, calibrated mechanisms and secure noise."""

from .budget import Budget, BudgetExceededError, PrivacyAccountant, PrivacyReport, Spend
from .gdp import analytic_gaussian_sigma, compose_mu, gdp_delta, gdp_epsilon, gdp_mu, mu_to_zcdp_rho, zcdp_epsilon
from .mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    NoisyAverage,
    NonPrivate,
    above_threshold,
    exponential_mechanism,
    noisy_average,
    sample_exponential,
)
from .noise import NoiseSource, Randomness, SecureNoise, SeededNoise

__all__ = [
    "Budget",
    "BudgetExceededError",
    "PrivacyAccountant",
    "PrivacyReport",
    "Spend",
    "analytic_gaussian_sigma",
    "compose_mu",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "mu_to_zcdp_rho",
    "zcdp_epsilon",
    "GaussianMechanism",
    "LaplaceMechanism",
    "NonPrivate",
    "exponential_mechanism",
    "above_threshold",
    "noisy_average",
    "NoisyAverage",
    "sample_exponential",
    "NoiseSource",
    "Randomness",
    "SecureNoise",
    "SeededNoise",
]
