"""The privacy layer: budgets, accounting, calibrated mechanisms and secure noise."""

import importlib

# Imported on first use (PEP 562): the budget and its errors without SciPy and OpenDP until needed.
_HOMES = {
    "Budget": "budget",
    "BudgetExceededError": "budget",
    "PrivacyAccountant": "budget",
    "PrivacyReport": "budget",
    "Spend": "budget",
    "analytic_gaussian_sigma": "gdp",
    "compose_mu": "gdp",
    "gdp_delta": "gdp",
    "gdp_epsilon": "gdp",
    "gdp_mu": "gdp",
    "mu_to_zcdp_rho": "gdp",
    "zcdp_epsilon": "gdp",
    "GaussianMechanism": "mechanisms",
    "LaplaceMechanism": "mechanisms",
    "NoisyAverage": "mechanisms",
    "NonPrivate": "mechanisms",
    "above_threshold": "mechanisms",
    "exponential_mechanism": "mechanisms",
    "noisy_average": "mechanisms",
    "sample_exponential": "mechanisms",
    "NoiseSource": "noise",
    "Randomness": "noise",
    "SecureNoise": "noise",
    "SeededNoise": "noise",
}

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


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'privclust.privacy' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value
    return value
