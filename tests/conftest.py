import numpy as np
import pytest


@pytest.fixture
def blobs():
    """Three well-separated blobs in [-1, 1]^2, 3,000 rows."""
    rng = np.random.default_rng(7)
    centers = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])
    X = centers[rng.integers(0, 3, 3000)] + rng.normal(0, 0.06, (3000, 2))
    return np.clip(X, -1, 1), centers
