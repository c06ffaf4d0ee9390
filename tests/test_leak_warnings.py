"""A PrivacyLeakWarning points at the user's line, also when a library calls fit for them."""

import warnings

import numpy as np
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from privclust import KMeans
from privclust.privacy.leaks import PrivacyLeakWarning


def _leak_files(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    files = {w.filename for w in caught if issubclass(w.category, PrivacyLeakWarning)}
    assert files  # the seeded runs warn
    return files


def test_a_search_or_pipeline_warns_at_the_users_line():
    X = np.random.default_rng(2).uniform(-1, 1, (200, 2))
    seeded = KMeans(2, bounds=(-1, 1), random_state=1)
    assert _leak_files(lambda: GridSearchCV(seeded, {"epsilon": [0.5, 1.0]}, cv=2).fit(X)) == {__file__}
    assert _leak_files(lambda: cross_val_score(seeded, X, cv=2)) == {__file__}
    assert _leak_files(lambda: make_pipeline(FunctionTransformer(), seeded).fit(X)) == {__file__}
