import os

import numpy as np
import pytest

# Rich wraps messages at the terminal's width, read when a console is made: the CLI's consoles are made
# wide, so long paths in its messages stay whole for the tests (pytest's own output keeps its width).
_columns = os.environ.get("COLUMNS")
os.environ["COLUMNS"] = "400"
import privclust.cli  # noqa: E402,F401  (its consoles are created at import)

if _columns is None:
    del os.environ["COLUMNS"]
else:
    os.environ["COLUMNS"] = _columns


@pytest.fixture
def blobs():
    """Three well-separated blobs in [-1, 1]^2, 3,000 rows."""
    rng = np.random.default_rng(7)
    centers = np.array([[-0.6, -0.5], [0.55, -0.4], [0.0, 0.6]])
    X = centers[rng.integers(0, 3, 3000)] + rng.normal(0, 0.06, (3000, 2))
    return np.clip(X, -1, 1), centers
