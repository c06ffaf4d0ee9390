"""The privacy models a fit can run in, and the oracle each one opens.

* ``central`` (default): a trusted curator holds the rows (in memory, a memory map
  or Spark) and adds the noise (``queries.central``);
* ``local``: every row is one user whose device randomizes its own contribution
  and sends one report (``privclust.local``); ``epsilon`` is each user's local
  guarantee;
* ``shuffle``: the same reports at a larger local epsilon_0, shuffled before the
  server reads them (``privclust.shuffle``); ``(epsilon, delta)`` is the central
  guarantee the shuffled reports meet.

The local and shuffle models are simulated end to end over rows in this process
(the deployed protocol is ``privclust.local.protocol``).  In them the number of
users is public -- every device sends one report -- and the guarantee protects
what each user's report says.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .privacy.budget import Budget, PrivacyAccountant
from .privacy.noise import Randomness
from .privacy.unit import UserBound
from .queries.curator import Curated, central_oracle, input_features
from .queries.rows import MemoryRows
from .queries.spark import is_spark_frame

__all__ = ["PRIVACY_MODELS", "check_privacy_model", "open_oracle"]

PRIVACY_MODELS = ("central", "local", "shuffle")
USER_LEVEL_CENTRAL_ONLY = (
    "privacy_unit='user' runs in the central model (rows in memory or on Spark): in the {model} model each "
    "device randomizes one row's report, so a user's many rows would be many reports"
)


def check_privacy_model(model) -> str:
    if model not in PRIVACY_MODELS:
        raise ValueError(f"privacy_model must be one of {PRIVACY_MODELS}, got {model!r}")
    return model


@contextmanager
def open_oracle(
    X,
    bounds,
    model: str,
    budget: Budget | None,
    accountant: PrivacyAccountant,
    randomness: Randomness,
    users: UserBound | None = None,
) -> Iterator[Curated]:
    """The oracle of ``model`` over the rows of ``X`` (see the module docstring); ``users``: a user-level
    fit's bound (central model only)."""
    if check_privacy_model(model) == "central":
        with central_oracle(X, bounds, budget, accountant, randomness.noise, users) as curated:
            yield curated
        return
    if users is not None:
        raise ValueError(USER_LEVEL_CENTRAL_ONLY.format(model=model))
    if budget is None:
        raise ValueError(f"the {model} model runs private algorithms only")
    # here, not at the top: a central fit needs none of the devices' machinery (nor ``cryptography``)
    from .geometry.domain import make_domain
    from .local.oracle import LocalOracle
    from .local.secure import SecureRandom
    from .shuffle.oracle import ShuffleOracle

    if is_spark_frame(X):
        raise ValueError(f"the {model} model is simulated over rows in memory: pass an array, not a Spark DataFrame")
    if isinstance(bounds, str):
        raise ValueError(f"bounds='data' has no meaning in the {model} model: devices need public bounds")
    domain = make_domain(bounds, input_features(X))
    rows = MemoryRows(X, domain.n_features, transform=domain.to_unit)
    seed = int(randomness.geometry().integers(2**31))  # public: the hash families every device uses
    # The devices' coins: the OS CSPRNG, unless the run is seeded for an experiment (then numpy's generator).
    devices = SecureRandom() if randomness.secure else randomness.devices()
    if model == "local":
        oracle = LocalOracle(rows, budget.epsilon, accountant, devices, seed)
    else:
        oracle = ShuffleOracle(rows, budget, accountant, devices, seed)
    yield Curated(oracle, domain, rows.n_features, rows)
