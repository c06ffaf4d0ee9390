"""``privclust.KMeans``: differentially private k-means with scikit-learn's API."""

from __future__ import annotations

import numbers
from functools import partial
from typing import Callable

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._parallel import fit_threads
from ._validation import (
    check_data,
    check_delta,
    check_epsilon,
    check_n_clusters,
    refuse_non_numeric_columns,
    values_withheld,
)
from .algorithms import ALGORITHMS, FitContext
from .algorithms.base import NEARLY_EMPTY, NON_PRIVATE, algorithm_spec
from .algorithms.params import DEFAULT_ALPHA, ESTIMATOR_DEFAULTS, START, check_params
from .compat import (
    Progress,
    auto_ignores_max_iter,
    check_sample_weight,
    ignored,
    public_start,
    resolve_algorithm,
    threads,
    warn_ignored,
)
from .geometry.private_box import NO_BUDGET_FOR_A_BOX, is_private_domain_request
from .metrics import labels_and_cost
from .models import USER_LEVEL_CENTRAL_ONLY, check_privacy_model, open_oracle
from .privacy.budget import Budget, PrivacyAccountant, Spend
from .privacy.noise import Randomness
from .privacy.unit import ROW, PrivacyUnit, UserBound, check_privacy_unit
from .private_domain import PrivateDomain, find_fit_domain
from .queries.central import CentralOracle
from .queries.plan import SAMPLED, PlanningOracle
from .queries.spark import is_spark_frame
from .session import open_session

__all__ = ["KMeans"]

IN_MEMORY_CAPABILITIES = CentralOracle.capabilities | {SAMPLED}  # the curator over rows in this process
# Computed exactly on the training rows, for the data holder only: not differentially private.
ON_TRAINING_ROWS = ("labels_", "inertia_", "n_rows_clipped_", "outliers_")


def nearly_empty(sizes: np.ndarray, n_estimate: float | None) -> int:
    """How many centers' noisy sizes are below ``NEARLY_EMPTY`` of the noisy row count: ``n_estimate`` (public
    or released), else the noisy sizes' total.  Released values only: post-processing, free."""
    n = n_estimate if n_estimate is not None else float(np.sum(np.maximum(sizes, 0.0)))
    return int(np.sum(sizes < max(NEARLY_EMPTY * n, 1.0)))


class KMeans(ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin, BaseEstimator):
    """Differentially private k-means.

    Parameters
    ----------
    n_clusters : int
        Number of centers k.
    epsilon, delta : float
        The privacy budget of one ``fit``.  Gaussian algorithms (``fastlloyd``,
        ``glloyd``) need ``delta > 0``; ``sulloyd`` is pure epsilon-DP and spends
        no delta.
    bounds :
        ``None`` (default): a share (10%) of the budget finds a box holding
        nearly all rows privately before the fit (``private_domain``;
        ``fit_info_["domain"]`` says which box and what it cost, and
        ``privacy_spent_`` lists its three ``domain:`` releases);
        ``{"outer": <bounds>}`` finds it inside declared bounds that are only an
        outer limit, and ``{"share": s}`` sets the share (docs/choosing.md).
        Otherwise the public data domain, declared without looking at the data:
        ``(lower, upper)`` for every feature, a sequence of per-feature
        ``(lower, upper)`` pairs, or a radius ``R`` (the ball about the
        origin).  Rows outside are clipped to it (box: per coordinate; ball:
        projected).  ``bounds='data'`` derives a box from the data and voids
        the guarantee (it warns).
    algorithm : {"auto", "fastlloyd", "glloyd", "sulloyd", "greedy", "evolve", "maxcover", "onecluster", "nonprivate-lloyd"}
        ``auto`` (default) picks the greedy, FastLloyd, or FastLloyd from the
        greedy's centers (``fastlloyd-greedy-start``) from public parameters
        (n -- ``public_n`` or a noisy count --, d, k, epsilon, the privacy model)
        and says what and why in ``fit_info_["auto"]`` (docs/choosing.md).
        ``nonprivate-lloyd`` is the non-private baseline; scikit-learn's
        ``"lloyd"`` and ``"elkan"`` (its implementations of the non-private
        Lloyd) run ``auto`` with a warning (docs/sklearn.md); ``maxcover`` is Nguyen et al.'s
        exponential-mechanism / max-cover algorithm; ``onecluster`` finds k
        balls by k rounds of Nissim et al.'s 1-cluster (both central model only).
    random_state : None or int
        ``None`` (default) draws noise from OpenDP's floating-point-safe
        samplers; an int makes the run reproducible with numpy samplers, which
        is for experiments, not for releasing real data.
    public_n : int or None
        A row count that is public knowledge, used by the iteration heuristic.
        When ``None``, ``count_fraction`` of the budget buys a noisy count.
    count_fraction : float
        Share of the budget spent on the noisy row count (of mu^2 for Gaussian
        algorithms, of epsilon for ``sulloyd``).
    max_iter : int or None
        The Lloyd family's fixed number of iterations, 1 to 1,000; ``None`` uses
        the seed's heuristic (clamped to [2, 7]) for private algorithms and 100
        for ``nonprivate-lloyd``.  The privacy cost does not depend on it.
    alpha, radius_strategy :
        FastLloyd's radius scale (eta = alpha * 2 sqrt(d) / (2 k^(1/d))) and
        ``"step"`` (first iteration at half the diagonal) or ``"constant"``.
    postprocess : {"fold", "clip", "none"} or None
        Bring centers back into the domain; default ``fold`` for FastLloyd,
        ``clip`` for ``glloyd`` and ``sulloyd``.

        These four are checked against the chosen algorithm's parameter table
        (``privclust.algorithms.params``, docs/algorithms.md) before anything is
        planned: one it does not take, set to anything but its default, is
        refused naming the algorithm.  ``auto`` takes only the options every
        algorithm it may choose takes -- none of these, as the greedy takes none.
    algorithm_params : dict or None
        Parameters of the chosen algorithm beyond the common ones, e.g. for
        ``maxcover``: ``projection_dim``, ``budget_split``, ``growth``,
        ``candidates_per_level``, ``final_lloyd``; for ``onecluster``: ``t``,
        ``budget_split``, ``shifts``; for ``fastlloyd``: ``init="greedy"``
        (a private, data-dependent start from the greedy in ``init_share``
        of the budget, default 0.3; ``fit_info_["init"]`` records the split)
        (see docs/algorithms.md).
        Unknown keys are an error.
    accountant : PrivacyAccountant or None
        A shared accountant; every release is also recorded there, and a fit
        that would exceed its budget is refused before any data is read.
    privacy_model : {"central", "local", "shuffle"}
        Who adds the noise (``privclust.models``): a trusted curator
        (``central``); every user's own device, each row one user sending one
        report (``local``: ``epsilon`` is each user's local guarantee, delta is
        not used); or the devices at a larger local epsilon_0 with the reports
        shuffled (``shuffle``: ``(epsilon, delta)`` is the central guarantee).
        The local and shuffle models run ``algorithm="greedy"`` (one round of
        reports); algorithms that need adaptive rounds or exact access are
        refused before anything is spent.
    init, n_init, tol, verbose, copy_x, n_jobs :
        scikit-learn's (and diffprivlib's) parameters, read for a private fit
        (``privclust.compat``, docs/sklearn.md): ``init`` an array of public
        centers (data units) starts the Lloyd family at no cost (``auto``:
        FastLloyd from it)
        (``"k-means++"``/``"random"`` read the data: ignored); ``n_init`` > 1
        and ``tol`` are ignored, with one warning saying why; ``verbose``
        prints progress on stderr; ``n_jobs`` sets the threads; ``copy_x`` is
        honoured either way (``X`` is never modified).
    privacy_unit : {"row", "user"}
        What the guarantee protects (``privclust.privacy.unit``, docs/privacy.md):
        one row (default), or every row of one user -- then ``fit`` takes
        ``user_ids`` (one per row; for a Spark DataFrame, the name of its user
        column), each user's rows are cut to ``max_rows_per_user`` at random
        (never by their values) and every release is calibrated for that many
        rows.  Central model only; ``maxcover``, ``onecluster`` and the greedy's
        exponential selection (mechanisms over exact rows) are refused.
        ``public_n`` then stands for the number of rows the fit reads after
        the bounding (a public guess for the heuristics; any value keeps the
        guarantee), and no count of users is released.
    max_rows_per_user : int or None
        The public maximum of rows kept per user (with ``privacy_unit="user"``).

    Attributes
    ----------
    cluster_centers_, n_iter_, privacy_spent_ :
        The private output, how many iterations ran, and what was spent
        (a :class:`~privclust.privacy.PrivacyReport`, itemised per release).
    cluster_sizes_ :
        The noisy size of each center's cell from the last release (private;
        for the non-private ``lloyd``, exact counts).
    fit_info_ :
        What the algorithm did, from public parameters and the releases only
        (the noisy or public row count ``n_estimate``, noise scales, the
        ``auto`` choice, ...).
    radii_ :
        ``onecluster`` only: the released radius of each ball (private).
    domain_, n_features_in_, feature_names_in_ :
        The declared bounds and the input's schema (public; with
        ``bounds='data'`` the domain is read off the rows and the fit is not
        private).
    labels_, inertia_ :
        Computed from the released centers *on the training data*, for the
        data holder: they are not differentially private and must not be
        published.
    n_rows_clipped_ :
        The exact number of training rows outside ``bounds`` (clipped to
        them), for the data holder to check the bounds: not differentially
        private (it depends on single rows), must not be published.
    outliers_ :
        ``onecluster`` only: the training rows outside every ball, for the
        data holder (use :meth:`outlier_mask` on other rows): not
        differentially private, must not be published.

    ``labels_``, ``inertia_``, ``n_rows_clipped_`` and ``outliers_`` are set
    only when the rows are in this process (not on Spark).
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-6,
        bounds=None,
        algorithm: str = "auto",
        random_state=None,
        public_n: int | None = None,
        count_fraction: float = 0.05,
        max_iter: int | None = None,
        alpha: float = DEFAULT_ALPHA,
        radius_strategy: str = ESTIMATOR_DEFAULTS["radius_strategy"],
        postprocess: str | None = None,
        algorithm_params: dict | None = None,
        accountant: PrivacyAccountant | None = None,
        privacy_model: str = "central",
        init=None,
        n_init=None,
        tol: float | None = None,
        verbose: int = 0,
        copy_x: bool = True,
        n_jobs: int | None = None,
        privacy_unit: str = "row",
        max_rows_per_user: int | None = None,
    ):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.algorithm = algorithm
        self.random_state = random_state
        self.public_n = public_n
        self.count_fraction = count_fraction
        self.max_iter = max_iter
        self.alpha = alpha
        self.radius_strategy = radius_strategy
        self.postprocess = postprocess
        self.algorithm_params = algorithm_params
        self.accountant = accountant
        self.privacy_model = privacy_model
        self.privacy_unit = privacy_unit
        self.max_rows_per_user = max_rows_per_user
        self.init = init
        self.n_init = n_init
        self.tol = tol
        self.verbose = verbose
        self.copy_x = copy_x
        self.n_jobs = n_jobs

    @property
    def _algorithm(self) -> str:
        """The algorithm to run: ``self.algorithm``, or ``auto`` for scikit-learn's names (``privclust.compat``)."""
        return resolve_algorithm(self.algorithm)

    def _ignored(self) -> dict[str, str]:
        """scikit-learn's parameters given but not honoured, with why (``privclust.compat``); checks them all."""
        return ignored(
            self.algorithm, self.init, self.n_init, self.tol, self.verbose, self.copy_x, self.n_jobs, self.max_iter
        )

    def _check_params(self) -> tuple[Budget | None, dict, dict[str, str]]:
        """The budget, the chosen algorithm's checked options (``algorithms.params``) and scikit-learn's
        parameters given but not honoured (``_ignored``, for the fit's warning), before anything is planned
        or read."""
        algorithm = self._algorithm
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {sorted(ALGORITHMS)}")
        check_n_clusters(self.n_clusters)
        if self.public_n is not None and (
            isinstance(self.public_n, bool) or not isinstance(self.public_n, numbers.Integral) or self.public_n < 1
        ):
            raise ValueError(f"public_n must be a positive integer or None, got {self.public_n!r}")
        if not (isinstance(self.count_fraction, numbers.Real) and 0 < self.count_fraction < 1):
            raise ValueError(f"count_fraction must lie in (0, 1), got {self.count_fraction!r}")
        # The options and algorithm_params against the chosen algorithm's table; for auto, against every
        # algorithm it may choose (it chooses after releasing a noisy count: nothing may be refused then).
        given = {key: getattr(self, key) for key in ESTIMATOR_DEFAULTS}
        if auto_ignores_max_iter(self.algorithm, self.max_iter):  # ignored with a warning (privclust.compat)
            given["max_iter"] = ESTIMATOR_DEFAULTS["max_iter"]
        given[START] = public_start(self.init)  # an array of public centers, or None
        options = check_params(algorithm, {**given, "params": self.algorithm_params})
        notes = self._ignored()
        if self.accountant is not None and not isinstance(self.accountant, PrivacyAccountant):
            raise TypeError("accountant must be a privclust PrivacyAccountant")
        check_privacy_model(self.privacy_model)
        if check_privacy_unit(self.privacy_unit, self.max_rows_per_user).user and self.privacy_model != "central":
            raise ValueError(USER_LEVEL_CENTRAL_ONLY.format(model=self.privacy_model))
        if algorithm in NON_PRIVATE:
            if is_private_domain_request(self.bounds):
                raise ValueError(NO_BUDGET_FOR_A_BOX)
            return None, options, notes
        if self.privacy_model == "local":  # each user's report is pure epsilon-LDP: no delta
            return Budget(check_epsilon(self.epsilon)), options, notes
        return Budget(check_epsilon(self.epsilon), check_delta(self.delta)), options, notes

    def fit(
        self,
        X,
        y=None,
        sample_weight=None,
        *,
        user_ids=None,
        callback: Callable[[int, int], None] | None = None,
        progress: Callable[[str, float], None] | None = None,
    ):
        """Fit on ``X``; ``callback(done, planned)`` is called after each iteration, and ``progress(what,
        fraction)`` as a long stage before them goes (placing many starting centers; public work only).

        ``sample_weight`` must be None: weights would need a public bound to scale the noise by (refused).

        ``user_ids`` (with ``privacy_unit="user"``): the user owning each row of ``X`` -- integers or
        strings, one per row -- or, for a Spark DataFrame, the name of its user column.

        ``X`` is an array-like, or a PySpark DataFrame of numeric feature
        columns: then the executors compute the exact aggregates and the driver
        adds the noise (``queries.spark``), and ``labels_`` / ``inertia_`` are
        not computed (:meth:`predict` labels a Spark DataFrame where its rows are).
        """
        budget, options, notes = self._check_params()
        check_sample_weight(sample_weight)
        unit = self._unit(user_ids, X)
        warn_ignored(notes)
        with fit_threads(threads(self.n_jobs)):
            return self._fit(X, budget, options, Progress(self.verbose, callback), unit, user_ids, progress)

    def _fit(
        self,
        X,
        budget: Budget | None,
        options: dict,
        progress: Progress,
        unit: PrivacyUnit,
        user_ids,
        stages: Callable[[str, float], None] | None,
    ):
        algorithm = self._algorithm
        spend = "not private" if budget is None else f"epsilon={budget.epsilon:g}, delta={budget.delta:g}"
        progress.say(f"fitting algorithm={algorithm!r}, k={self.n_clusters}, {spend}")

        def oracle(accountant, randomness):
            # user level: each user's rows bounded to m by secret coins, on the first read (privacy.unit)
            users = None if not unit.user else UserBound(user_ids, unit, randomness.secret())
            # bounds=None or {"outer": ...}: a share of the budget finds the box privately (private_domain);
            # the oracle plans within what is left (so does the algorithm: its context has the oracle's budget)
            bounds, algorithm_budget = find_fit_domain(
                X,
                self.bounds,
                budget,
                accountant,
                self.privacy_model,
                partial(self._planned, options, unit=unit),
                users,
            )
            return open_oracle(X, bounds, self.privacy_model, algorithm_budget, accountant, randomness, users)

        with open_session(
            budget,
            self.bounds,
            parent=self.accountant,
            random_state=self.random_state,
            oracle=oracle,
            not_private=f"algorithm={algorithm!r} is the non-private baseline: the result is NOT differentially private",
        ) as session:
            if not is_spark_frame(X):  # n_features_in_ and feature_names_in_ from the schema; rows read later
                validate_data(self, X, skip_check_array=True, reset=True)
            context = self._context(
                session.oracle,
                session.oracle.budget,
                session.randomness,
                options,
                progress.as_callback(),
                session.domain,
            )
            context.progress = stages
            result = ALGORITHMS[algorithm](context)
        domain, rows, oracle = session.domain, session.checked_rows(), session.oracle
        found = domain if isinstance(domain, PrivateDomain) else None
        if found is not None:  # the private box, found when the fit first read the rows
            domain = found.resolve()

        self.cluster_centers_ = domain.from_unit(result.centers)
        self.n_iter_ = result.n_iter
        self.n_features_in_ = session.n_features
        self.domain_ = domain
        self.privacy_spent_ = session.report()
        info = dict(result.info)
        sizes = info.pop("sizes", None)
        self.fit_info_ = {"n_estimate": result.n_estimate, **info}
        if found is not None:  # the privately found box and what it cost (public: post-processing)
            self.fit_info_["domain"] = found.box.as_dict()
        if sizes is not None:  # from the last release: private, free
            self.cluster_sizes_ = np.asarray(sizes, dtype=np.float64)
            self.fit_info_["nearly_empty_centers"] = nearly_empty(self.cluster_sizes_, result.n_estimate)
        if unit.user:  # public: the parameters
            self.fit_info_["privacy_unit"] = unit.as_dict()
        if getattr(oracle, "local_epsilon", None) is not None:  # local and shuffle: each report's epsilon
            self.fit_info_["local_epsilon"] = oracle.local_epsilon
        if "radii" in result.info:  # ball-finding algorithms also say where their balls end
            self.radii_ = np.asarray(result.info["radii"]) * domain.length_scale
        if rows is not None:  # for the data holder, on the training rows in this process (not private)
            self.labels_, self.inertia_ = self._assign(rows)
            self.n_rows_clipped_ = domain.count_outside(rows)
            if "radii" in result.info:
                self.outliers_ = self.outlier_mask(rows)
        if "auto" in self.fit_info_:
            progress.say(f"auto chose {self.fit_info_['auto']['chose']}: {self.fit_info_['auto']['because']}")
        progress.say(f"done after {self.n_iter_} iteration(s); spent {self.privacy_spent_}")
        return self

    def _context(self, oracle, budget, randomness, options: dict, callback=None, domain=None) -> FitContext:
        return FitContext(
            oracle=oracle,
            n_clusters=int(self.n_clusters),
            budget=budget,
            randomness=randomness,
            public_n=self.public_n,
            count_fraction=float(self.count_fraction),
            options=options,
            callback=callback,
            domain=domain,  # maps a public start (init) into the unit box
        )

    def planned_spends(self, n_features: int) -> list[list[Spend]]:
        """What a fit with these parameters on ``n_features`` columns (central model, rows in memory) may
        spend, from its plan as a value -- no data is read and nothing is charged.  One list of spends, or
        one per plan it may choose (``auto`` chooses after a noisy count).  ``privclust.opendp`` derives
        its privacy map from it."""
        budget, options, _ = self._check_params()
        if self.privacy_model != "central":
            raise ValueError("planned_spends is for the central model (privacy_model='central')")
        if budget is not None and is_private_domain_request(self.bounds):
            raise ValueError("planned_spends needs declared bounds (a private domain's box is found first)")
        return self._planned(options, budget, n_features, check_privacy_unit(self.privacy_unit, self.max_rows_per_user))

    def _unit(self, user_ids, X) -> PrivacyUnit:
        """The fit's privacy unit (parameters checked already); ``user_ids`` must come with a user-level one, one
        per row of an in-memory ``X`` (checked now, before any plan is checked or anything reserved: both are the
        caller's own inputs, and the refusal says only that their lengths differ)."""
        unit = check_privacy_unit(self.privacy_unit, self.max_rows_per_user)
        if unit.user and user_ids is None:
            raise ValueError("privacy_unit='user' needs fit(X, user_ids=...): the user owning each row of X")
        if not unit.user and user_ids is not None:
            raise ValueError(
                "user_ids are for a user-level fit: set privacy_unit='user' and max_rows_per_user "
                "(a row-level fit would ignore them and protect rows only)"
            )
        in_memory = unit.user and not is_spark_frame(X) and not isinstance(user_ids, str) and hasattr(X, "__len__")
        if in_memory and np.shape(user_ids)[:1] != (len(X),):
            raise ValueError("user_ids must give one user id per row of X, in the rows' order: their lengths differ")
        return unit

    def _planned(
        self, options: dict, budget: Budget | None, n_features: int, unit: PrivacyUnit = ROW
    ) -> list[list[Spend]]:
        """The spends of each plan the algorithm may make with ``budget`` on ``n_features`` columns (a value)."""
        oracle = PlanningOracle(n_features, budget, IN_MEMORY_CAPABILITIES, "the central model", unit)
        context = self._context(oracle, budget, Randomness(None), options)
        return oracle.spends(algorithm_spec(self._algorithm, context))

    def outlier_mask(self, X) -> np.ndarray:
        """Rows outside every found ball (``algorithm="onecluster"`` only; post-processing)."""
        X = self._check_X(X)
        if not hasattr(self, "radii_"):
            raise AttributeError(f"outliers need the balls of algorithm='onecluster', not {self.algorithm!r}")
        outside = np.ones(X.shape[0], dtype=bool)
        # A row beyond ~1e154 overflows its distance to infinity -- outside, rightly -- and must not raise a warning
        # that only such a row would raise
        with np.errstate(over="ignore", invalid="ignore"):
            for center, radius in zip(self.cluster_centers_, self.radii_):
                outside &= np.linalg.norm(X - center, axis=1) > radius
        return outside

    def _assign(self, X: np.ndarray) -> tuple[np.ndarray, float]:
        # Squared distances of coordinates beyond ~1e150 overflow a double. Dividing by a
        # public scalar leaves every nearest center unchanged, so do that in the danger range.
        scale = self.domain_.extent
        # A training row far outside the bounds may overflow its distances: its label is then any
        # center's, and no warning may say that such a row exists (the warning would depend on it).
        with np.errstate(over="ignore", invalid="ignore"):
            if 1e-150 < scale < 1e150:  # chunk by chunk: int32 labels and no n-long array of distances
                return labels_and_cost(X, self.cluster_centers_)
            labels, cost = labels_and_cost(X / scale, self.cluster_centers_ / scale)
            return labels, cost * scale * scale

    def _check_X(self, X) -> np.ndarray:
        check_is_fitted(self, "cluster_centers_")
        if is_spark_frame(X):
            return check_data(X)  # refused: says which methods take a Spark DataFrame
        if isinstance(X, np.memmap):  # kept on disk: checked block by block, never converted whole
            validate_data(self, X, skip_check_array=True, reset=False)
            return check_data(X)
        refuse_non_numeric_columns(X)
        with values_withheld():
            X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=False, ensure_min_samples=0)
        return check_data(X)

    @property
    def _n_features_out(self) -> int:
        """The columns of :meth:`transform`: one distance per center (named ``kmeans0``, ...)."""
        return self.cluster_centers_.shape[0]

    def predict(self, X) -> np.ndarray:
        """Index of the nearest released center for each row (post-processing, no privacy cost).

        For a Spark DataFrame: the same DataFrame with a ``cluster`` column, computed where the rows are."""
        if is_spark_frame(X):
            from .queries.spark import predict_frame

            check_is_fitted(self, "cluster_centers_")
            return predict_frame(X, self.cluster_centers_)
        return self._assign(self._check_X(X))[0]

    def fit_predict(self, X, y=None, **kwargs) -> np.ndarray:
        if is_spark_frame(X):
            raise ValueError(
                "fit_predict returns a label for every row, which a Spark DataFrame's rows would have to be "
                "gathered for: call fit, then predict (it labels the DataFrame where its rows are)"
            )
        return self.fit(X, **kwargs).labels_

    def transform(self, X) -> np.ndarray:
        """Euclidean distances from each row to each released center."""
        X = self._check_X(X)
        # As in _assign: divide by a public scale where squared coordinates would overflow a double.
        scale = self.domain_.extent
        scale = 1.0 if 1e-150 < scale < 1e150 else scale
        with np.errstate(over="ignore", invalid="ignore"):  # as in _assign: no warning about a row
            x, c = X / scale, self.cluster_centers_ / scale
            sq = (x * x).sum(1)[:, None] - 2.0 * x @ c.T + (c * c).sum(1)[None, :]
            return np.sqrt(np.maximum(sq, 0.0)) * scale

    def score(self, X, y=None) -> float:
        """Minus the k-means cost of ``X`` under the released centers (scikit-learn convention)."""
        return -self._assign(self._check_X(X))[1]
