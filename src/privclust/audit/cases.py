"""What is audited: every mechanism and algorithm on a neighbouring pair chosen to show its privacy loss.

Each :class:`Case` builds a sampler (side 0 draws on D, side 1 on D', where D'
adds one row) and the claim the library makes for it -- read from the
mechanism's own spend or the fit's ``privacy_spent_``, never restated here.
Everything is driven through the public API: ``privclust.KMeans``,
``Subsampled``, the mechanisms of ``privclust.privacy``, and (in
:mod:`privclust.audit.federated`) the federated server -- but for auto's
private selection, whose comparison is released through the central oracle
as ``Selection.run`` releases it, for two fixed candidates (see
``_private_selection``), and the private box, whose magnitude histogram is
released through the central oracle as ``private_domain.find_box`` releases
it (see ``_private_box``).

How the pairs are chosen.  One row's effect must stand out of the noise, so
each pair puts the extra row where a release is most sensitive to it:

* mechanisms: the largest change the sensitivity allows, in the direction
  that changes the output most (for the exponential mechanism, one score up
  and the other down);
* the Lloyd steps (FastLloyd, GLloyd, SuLloyd, maxcover's final round, the
  greedy's lifting): one center, one iteration, the extra row at the edge of
  the step's radius, and D's rows placed so that the released center mixes
  the noisy sum and the noisy count in the proportions of their likelihood
  ratio (the rows' mean sits off the center by sigma_sum^2 / (sigma_count^2
  sensitivity)), so the center carries nearly all of the step's mu;
* the private selection's comparison: the extra row on one candidate's center
  and at the clip's distance from the other's;
* the private box: the extra row alone in a magnitude bucket that D leaves empty.

The algorithms are audited at epsilon = 8, delta = 1e-5 (Subsampled at a base
epsilon of 2, where amplification matters; the clipping case at 1): a claim must
hold at every epsilon, and the larger the signal-to-noise ratio mu of one row,
the fewer draws it takes to measure it: at epsilon = 1 the noise / 2 controls
of FastLloyd and the greedy would need tens of times the draws.

The greedy and maxcover run with seeded numpy noise (the same distributions as
the secure samplers, several times faster); everything else with the secure
samplers that ``random_state=None`` gives users.
"""

from __future__ import annotations

import itertools
import math
import secrets
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .bounds import Claim
from .broken import overconfident_devices, row_sensitivity_for_users, scaled_noise, unclipped_domain
from .run import Sampler

__all__ = ["Case", "Control", "CASES", "CONTROLS"]

ALG_EPSILON, ALG_DELTA = 8.0, 1e-5


@dataclass(frozen=True)
class Case:
    """A mechanism on a neighbouring pair: ``build()`` returns (sampler, claim)."""

    name: str
    family: str
    build: Callable[[], tuple[Sampler, Claim]]
    draws: int  # per side, at the default strength
    pair: str
    discrete: bool = False
    noise: str = "secure"


@dataclass(frozen=True)
class Control:
    """A case with the library broken on purpose while it draws; the audit must catch it."""

    case: Case
    breakage: str
    broken: Callable[[], object]  # a context manager factory
    draws: int | None = None  # default: the case's

    @property
    def name(self) -> str:
        return f"{self.case.name}: {self.breakage} (broken on purpose)"


def _secure():
    from ..privacy.noise import SecureNoise

    return SecureNoise()


def _ledger(budget=None):
    from ..privacy.budget import PrivacyAccountant

    return PrivacyAccountant(budget)


_seeds = itertools.count(secrets.randbits(40))  # distinct seeds for every seeded fit of a process


# --- mechanisms, with the secure (OpenDP) samplers users get --------------------------------------


def _laplace():
    from ..privacy import LaplaceMechanism

    mechanism, noise = LaplaceMechanism.calibrated(1.0, sensitivity=1.0), _secure()
    spend = mechanism.spend("audit")
    return (lambda side, n: mechanism.apply(np.full(n, float(side)), noise)), Claim.dp(spend.epsilon, spend.delta)


def _gaussian():
    from ..privacy import GaussianMechanism

    delta = 1e-5
    mechanism, noise = GaussianMechanism.calibrated(1.0, delta, sensitivity=1.0), _secure()
    return (lambda side, n: mechanism.apply(np.full(n, float(side)), noise)), Claim.gaussian(
        mechanism.spend("audit").mu, delta
    )


def _accounted(run_once: Callable[[int, object, object], object], delta: float | None = None):
    """A sampler for a mechanism that charges a ledger, and the claim it charged (a GDP charge stated at
    ``delta``)."""
    noise = _secure()
    probe = _ledger()
    run_once(0, noise, probe)

    def sample(side: int, n: int) -> np.ndarray:
        return np.array([_index(run_once(side, noise, _ledger())) for _ in range(n)])

    return sample, Claim.from_report(probe.report(delta))


def _index(value) -> float:
    return -1.0 if value is None else float(value)


def _exponential():
    from ..privacy import exponential_mechanism

    # Two candidates; the extra row raises one score and lowers the other by the sensitivity.
    scores = (np.array([0.0, 0.0]), np.array([1.0, -1.0]))
    return _accounted(lambda side, noise, ledger: exponential_mechanism(scores[side], 1.0, 1.0, noise, ledger, "em"))


def _implicit_exponential():
    from ..privacy import sample_exponential

    # 20 listed candidates and one implicit one (score 0); the extra row raises candidate 0 and lowers the
    # others.  The listed scores are distinct (j * 1e-6), so every group of equal scores has one member and
    # a draw is exactly the exponential mechanism's -- also when the noise is broken.
    base = np.arange(20) * 1e-6
    scores = (base, base + np.r_[1.0, -np.ones(19)])
    noise = _secure()

    def sample(side: int, n: int) -> np.ndarray:
        return np.array(
            [_index(sample_exponential(scores[side], 1.0, 1.0, noise, log_n_implicit=0.0)) for _ in range(n)]
        )

    # sample_exponential records nothing: its documented guarantee is epsilon-DP for this sensitivity.
    return sample, Claim.dp(1.0)


def _sparse_vector():
    from ..privacy import above_threshold

    # Three queries at the threshold; the extra row lowers the first two and raises the third.
    values = (np.zeros(3), np.array([-1.0, -1.0, 1.0]))
    return _accounted(lambda side, noise, ledger: above_threshold(values[side], 0.0, 1.0, 1.0, noise, ledger, "svt"))


NOISY_AVG_ROWS = 2000


def _noisy_average():
    from ..privacy import NoisyAverage

    # D: 2000 rows at -1; D' adds one at +1, the far end of the diameter.  Each draw is one set,
    # averaged by the mechanism's own apply (which averages many sets at once).
    # delta = 0.01 (the claim holds for every delta): at smaller deltas the (epsilon, delta) test must
    # measure rarer tail events, and the sigma / 5 control needs more draws to be caught.
    mechanism, noise = NoisyAverage(epsilon=1.0, delta=0.01, diameter=2.0), _secure()
    n_rows = NOISY_AVG_ROWS
    totals, counts = (-float(n_rows), 1.0 - n_rows), (float(n_rows), n_rows + 1.0)
    spend = mechanism.spend("audit")

    def sample(side: int, n: int) -> np.ndarray:
        return mechanism.apply(np.full((n, 1), totals[side]), np.full(n, counts[side]), -np.ones(1), np.ones(1), noise)

    return sample, Claim.dp(spend.epsilon, spend.delta)


BOX_ROWS, BOX_FAR = 200, 1000.0  # the box audit's D: rows at 0.5; D' adds one at BOX_FAR


def _private_box():
    # The private box's first release as a fit makes it (private_domain.open_box, find_box's own opening): its
    # plan opened with the central oracle over the rows, the magnitude histogram released through it (counted
    # where the rows live, noised by the oracle).  One feature: D's rows at 0.5 fill the bucket (2^-4, 1]; D'
    # adds one at 1000, alone in (2^8, 2^12], whose noisy count is the output -- the one count the extra row
    # moves (the box is post-processing of these counts).
    from ..geometry.private_box import magnitude_buckets
    from ..privacy.budget import Budget
    from ..private_domain import open_box
    from ..queries.central import in_memory
    from ..queries.histogram import COUNTS

    D = _rows((0.5, BOX_ROWS))
    data = (D, np.vstack([D, [[BOX_FAR]]]))
    budget, no_outer = Budget(ALG_EPSILON, ALG_DELTA), np.full(1, np.inf)
    bucket = int(magnitude_buckets(np.array([[BOX_FAR]]), no_outer)[0, 0])

    def run_once(side: int, noise, ledger):
        _, _, released = open_box(in_memory(data[side], budget, ledger, noise), budget, no_outer)
        return released[COUNTS][0, bucket]

    return _accounted(run_once, ALG_DELTA)


# --- algorithms, through the estimator ------------------------------------------------------------


def _fits(make, D: np.ndarray, D2: np.ndarray, read=lambda model: model.cluster_centers_.ravel()):
    """A sampler of fitted outputs on (D, D'), and the claim of a fit (its privacy_spent_)."""
    data = (D, D2)
    claim = Claim.from_report(make().fit(D2).privacy_spent_)

    def sample(side: int, n: int) -> np.ndarray:
        return np.array([read(make().fit(data[side])) for _ in range(n)])

    return sample, claim


ONE_ITERATION = ("fastlloyd", "glloyd", "sulloyd")  # the audited Lloyd runs: one iteration each


def _kmeans(
    algorithm: str, n_rows: int, seeded: bool = False, delta: float = ALG_DELTA, epsilon=ALG_EPSILON, **options
):
    from ..estimator import KMeans

    def make():
        return KMeans(
            1,
            epsilon=epsilon,
            delta=delta,
            bounds=(-1, 1),
            algorithm=algorithm,
            public_n=n_rows,
            random_state=next(_seeds) if seeded else None,
            **({"max_iter": 1} if algorithm in ONE_ITERATION else {}),  # the others take no max_iter
            **options,
        )

    return make


def _rows(*groups: tuple[float, int]) -> np.ndarray:
    return np.concatenate([np.full((count, 1), value) for value, count in groups])


def _lloyd_pair(far: float, rows: int = 200, mean: float = -0.5):
    D = _rows((mean, rows))
    return D, np.vstack([D, [[far]]])


def _fastlloyd():
    # One center (the sphere packing puts it at 0), first step's radius 1.  D's rows at -0.5 make the
    # center's move R / C weigh the count's noise against the sum's as their likelihood ratio does.
    return _fits(_kmeans("fastlloyd", 200), *_lloyd_pair(0.999))


def _fastlloyd_clipped():
    # auto's FastLloyd step (far rows clipped, the shrinking radii: one round at the final radius r = 0.2 in
    # d = 1).  The extra row at 0.999 lies far beyond r and adds exactly r to the sum, as the bound allows;
    # D's rows sit r / 2 off the center, the likelihood-ratio offset for FastLloyd's split in d = 1.
    from ..algorithms.lloyd import FINAL_RADIUS

    radius = FINAL_RADIUS * 2.0  # the unit interval's diagonal is 2
    params = {"far_rows": "clip", "radii": "shrinking", "first_radius": FINAL_RADIUS, "final_radius": FINAL_RADIUS}
    return _fits(_kmeans("fastlloyd", 200, algorithm_params=params), *_lloyd_pair(0.999, mean=-radius / 2))


def _glloyd():
    # Absolute sums at sensitivity 1 and counts; the optimal offset of D's rows is -0.45.
    return _fits(_kmeans("glloyd", 200), *_lloyd_pair(1.0, mean=-0.45))


def _sulloyd():
    return _fits(_kmeans("sulloyd", 200, delta=0.0), *_lloyd_pair(1.0, mean=-0.45))


USER_ROWS, USER_OWN = 5, 10  # m, and the rows the extra user holds (half of them are dropped by the bounding)


def _user_level():
    # FastLloyd's pair, for users: D holds 40 users of 5 rows each at -0.5 (all kept); D' adds one user with
    # 10 rows at 0.999, of which the bounding keeps 5.  Noise and sensitivity both scale by m, so the
    # pair shows the step's whole mu as the row-level pair does; without the bounding, the 10 rows would
    # show twice it, and with one row's sensitivity (the control) m times it.
    D = _rows((-0.5, 40 * USER_ROWS))
    ids = np.repeat(np.arange(40), USER_ROWS)
    D2, ids2 = np.vstack([D, np.full((USER_OWN, 1), 0.999)]), np.r_[ids, np.full(USER_OWN, 40)]
    make = _kmeans("fastlloyd", len(D), privacy_unit="user", max_rows_per_user=USER_ROWS)
    data = ((D, ids), (D2, ids2))
    claim = Claim.from_report(make().fit(D2, user_ids=ids2).privacy_spent_)

    def sample(side: int, n: int) -> np.ndarray:
        X, owners = data[side]
        return np.array([make().fit(X, user_ids=owners).cluster_centers_.ravel() for _ in range(n)])

    return sample, claim


def _subsampled():
    from ..subsample import Subsampled

    # SuLloyd at epsilon = 2 on a 10% Poisson sample claims epsilon' = 0.49 (amplification).  Without the
    # sampling the same pair shows a loss above 1 at these draws, so the audit can tell the two apart.
    make = _kmeans("sulloyd", 2000, delta=0.0, epsilon=2.0)
    D, D2 = _lloyd_pair(1.0, rows=2000, mean=-0.45)
    return _fits(lambda: Subsampled(make(), rate=0.1), D, D2)


GREEDY_SPIKE, GREEDY_SIDE = 1000, 350


def _greedy(selection: str = "histogram"):
    # A spike of rows fixes the greedy's center (within the finest ball's radius of 0); a lighter group
    # at -0.7, inside the lifting's reach, moves the rows' mean off it; the extra row at the far edge.
    params = {"boost": 1, "levels": 4, "z": 1, "selection_share": 0.02, "selection": selection}
    D = _rows((0.0, GREEDY_SPIKE), (-0.7, GREEDY_SIDE))
    make = _kmeans("greedy", len(D), seeded=True, algorithm_params=params)
    return _fits(make, D, np.vstack([D, [[0.735]]]), read=_center_and_cost)


def _evolve():
    # One generation, one center, five public candidates at fixed places (a one-dimensional Latin
    # hypercube: -0.8, -0.4, 0, 0.4, 0.8): the center is the mean of the candidates whose noisy vote clears
    # the floor, weighted by how far it clears it.  D's rows vote for -0.4; the extra row at the far edge votes for 0.8.
    D = _rows((-0.5, 200))
    params = {"generations": 1, "rows_per_candidate": 50.0, "init": "latin"}
    return _fits(_kmeans("evolve", len(D), seeded=True, algorithm_params=params), D, np.vstack([D, [[1.0]]]))


def _center_and_cost(model) -> np.ndarray:
    # The greedy also releases its cost estimate, read off the noisy sums of squares: a second view of
    # the lifting (post-processing, so covered by the claim).  Absent, the center alone is audited.
    cost = model.fit_info_.get("estimated_costs", [])[:1]
    return np.r_[model.cluster_centers_.ravel(), cost]


MAXCOVER_SPLIT = {"cover": 0.002, "proxy": 0.002, "average": 0.036, "lloyd": 0.96}


def _maxcover():
    # k = 1: the cover and the proxy do not matter, NoisyAVG places the final round's center at the mean
    # of all rows (about 0), and the final FastLloyd step (radius 0.8) sees only the group at -0.43 --
    # the group at +1 is beyond its reach and only balances the mean.  The extra row at +0.7.
    D = _rows((-0.43, 1050), (1.0, 450))
    # a small, fast cover; one final round (the default four split its share: each would show a quarter of the row)
    params = {"budget_split": MAXCOVER_SPLIT, "projection_dim": 1, "growth": 8, "lloyd_iterations": 1}
    make = _kmeans("maxcover", len(D), seeded=True, algorithm_params=params)
    return _fits(make, D, np.vstack([D, [[0.7]]]))


def _maxcover_average(average: str = "noisyavg", rows=(-1.0, 1000), extra: float = 100.0):
    # No final round: the center is the average of all rows.  NoisyAVG's diameter (the box's) holds only if
    # every row is clipped to the bounds; the extra row lies at 100, far outside them.  At epsilon = 1 the
    # clipped row moves the center by 0.14 of NoisyAVG's sigma, the unclipped one by 7.  The Gaussian
    # average releases the one part's sum and size: 200 rows at -0.5 (so the noisy mean is rarely clipped
    # at the wall) and an extra row at the far wall, +1, which moves the sum most.
    split = {"cover": 0.01, "proxy": 0.01, "average": 0.98}
    D = _rows(rows)
    params = {"budget_split": split, "final_lloyd": False, "projection_dim": 1, "growth": 8, "average": average}
    make = _kmeans("maxcover", len(D), seeded=True, epsilon=1.0, algorithm_params=params)
    return _fits(make, D, np.vstack([D, [[extra]]]))


ONECLUSTER_SPLIT = {"radius": 0.05, "shift": 0.05, "box": 0.4, "axes": 0.05, "average": 0.2, "refine": 0.25}


def _onecluster():
    # Two equal groups of coincident rows: the stability histogram's heavy box picks one of them at
    # random; the extra row joins the group at -0.5 and tips that choice.  The released center shows it.
    D = _rows((-0.5, 80), (0.5, 80))
    make = _kmeans("onecluster", len(D), seeded=True, algorithm_params={"budget_split": ONECLUSTER_SPLIT})
    return _fits(make, D, np.vstack([D, [[-0.5]]]))


SELECTION_ROWS, SELECTION_D = 200, 4


def _private_selection():
    from ..algorithms.select import CLIP_PER_FEATURE, SELECTION_PART, SELECTION_SHARE, selection_query
    from ..privacy.budget import Budget
    from ..privacy.gdp import gdp_epsilon, gdp_mu
    from ..queries.central import in_memory
    from ..queries.plan import Part, Spec

    # auto's private choice (algorithm_params={"choice": "private"}): the comparison of its candidates' noisy
    # costs, released as auto releases it -- ``selection_query`` through the central oracle, in the part it has
    # of a fit's pool (SELECTION_SHARE of mu^2 at epsilon = 8, delta = 1e-5), in d = 4 where auto selects.
    # The candidates' centers are post-processing of their own releases (audited with FastLloyd above), so
    # they are fixed here: auto's two candidates run the same Lloyd steps from nearby starts and end at the
    # same place, which would leave a row nothing to tell them apart by.  Candidate 1 at the corner c = (0.5,
    # ..., 0.5), candidate 2 at -c, R^2 = d = 4 away from it: the extra row at c costs 0 for one and the clip
    # R^2 for the other, which moves the centred costs by sqrt(2) R^2 / 2, the whole of the comparison's bound.
    # D's rows at the origin cost the same for both (their centred cost is 0).
    d = SELECTION_D
    corner = np.full((1, d), 0.5)
    query = selection_query([corner, -corner], CLIP_PER_FEATURE * d)
    data = (np.zeros((SELECTION_ROWS, d)), np.vstack([np.zeros((SELECTION_ROWS, d)), corner]))
    mu = math.sqrt(SELECTION_SHARE) * gdp_mu(ALG_EPSILON, ALG_DELTA)
    budget = Budget(gdp_epsilon(mu, ALG_DELTA), ALG_DELTA)
    spec = Spec("the selection", (Part(SELECTION_PART, share=1.0),))
    noise, probe = _secure(), _ledger(budget)  # the report states the budget's delta

    def release(side: int, ledger) -> np.ndarray:
        return in_memory(data[side], budget, ledger, noise).open(spec).release(query, SELECTION_PART)["cost"][0]

    release(1, probe)

    def sample(side: int, n: int) -> np.ndarray:
        return np.array([release(side, _ledger()) for _ in range(n)])

    return sample, Claim.from_report(probe.report())


# --- the local and shuffle models: device randomizers and the shuffled count ----------------------


def _devices() -> np.random.Generator:
    return np.random.default_rng(secrets.randbits(128))  # what Randomness.devices gives a secure run


def _randomized_response():
    from ..local.frequency import GeneralizedRR

    # One user's report over 4 values: the user holds 0, or 1 (any two values are neighbours in the local model).
    randomizer, rng = GeneralizedRR(4, 1.0), _devices()
    return (lambda side, n: randomizer.randomize(np.full(n, side), rng).astype(float)), Claim.dp(1.0)


def _one_coordinate():
    from ..local.frequency import OneCoordinate

    # One user's one-coordinate report of a 1-d row: -1 or +1, the ends of the box.
    randomizer, rng = OneCoordinate(1, 1.0), _devices()
    rows = (-np.ones(1), np.ones(1))
    return (lambda side, n: randomizer.randomize(np.tile(rows[side], n), rng)[:, 1].astype(float)), Claim.dp(1.0)


SHUFFLE_USERS, SHUFFLE_DELTA = 200, 1e-3


def _shuffled_count():
    from ..local.frequency import GeneralizedRR
    from ..privacy.amplification import local_epsilon_for

    # SHUFFLE_USERS users answer a yes/no question by randomized response at the epsilon_0 that the
    # amplification bound allows for a central (1, SHUFFLE_DELTA); the server sees the shuffled reports,
    # i.e. how many said yes.  D: everyone holds 0; D': one user holds 1.
    local_epsilon = local_epsilon_for(1.0, SHUFFLE_DELTA, SHUFFLE_USERS)
    randomizer, rng = GeneralizedRR(2, local_epsilon), _devices()
    held = (np.zeros(SHUFFLE_USERS, dtype=np.int64), np.r_[1, np.zeros(SHUFFLE_USERS - 1, dtype=np.int64)])

    def sample(side: int, n: int) -> np.ndarray:
        reports = randomizer.randomize(np.tile(held[side], n), rng).reshape(n, SHUFFLE_USERS)
        return reports.sum(axis=1).astype(float)

    return sample, Claim.dp(1.0, SHUFFLE_DELTA)


def _federated():
    from .federated import masked_view

    return masked_view()


CASES: dict[str, Case] = {
    c.name: c
    for c in [
        Case("Laplace mechanism", "Laplace", _laplace, 20_000, "value 0 vs 1 (sensitivity 1)"),
        Case("Gaussian mechanism", "Gaussian", _gaussian, 20_000, "value 0 vs 1 (sensitivity 1)"),
        Case(
            "exponential mechanism (permute-and-flip)",
            "exponential mechanism",
            _exponential,
            4_000,
            "scores (0, 0) vs (1, -1)",
            discrete=True,
        ),
        Case(
            "implicit exponential mechanism (Gumbel)",
            "exponential mechanism",
            _implicit_exponential,
            3_000,
            "20 distinct listed scores near 0 vs near (1, -1, ..., -1), one implicit candidate",
            discrete=True,
        ),
        Case(
            "sparse vector (AboveThreshold)",
            "sparse vector",
            _sparse_vector,
            3_000,
            "queries (0, 0, 0) vs (-1, -1, 1) at threshold 0",
            discrete=True,
        ),
        Case("NoisyAVG", "NoisyAVG", _noisy_average, 8_000, f"{NOISY_AVG_ROWS} rows at -1, plus one at +1"),
        Case(
            "private box (magnitudes)",
            "private box",
            _private_box,
            3_000,  # each draw samples the 511 magnitude buckets securely: 8,000 took 15 min on 2 shared cores
            f"{BOX_ROWS} rows at 0.5, plus one at {BOX_FAR:g} (the magnitude release through the oracle)",
        ),
        Case("FastLloyd", "FastLloyd", _fastlloyd, 1_500, "200 rows at -0.5, plus one at 0.999"),
        Case(
            "FastLloyd (far rows clipped)",
            "FastLloyd",
            _fastlloyd_clipped,
            1_500,
            "200 rows at -0.1, plus one at 0.999 (clipped onto the radius 0.2)",
        ),
        Case("GLloyd", "GLloyd", _glloyd, 1_000, "200 rows at -0.45, plus one at 1"),
        Case("SuLloyd", "SuLloyd", _sulloyd, 1_500, "200 rows at -0.45, plus one at 1"),
        Case(
            "greedy (histogram)",
            "greedy",
            _greedy,
            800,
            f"{GREEDY_SPIKE} rows at 0 and {GREEDY_SIDE} at -0.7, plus one at 0.735",
            noise="seeded",
        ),
        Case(
            "greedy (exponential)",
            "greedy",
            lambda: _greedy("exponential"),
            300,
            f"{GREEDY_SPIKE} rows at 0 and {GREEDY_SIDE} at -0.7, plus one at 0.735",
            noise="seeded",
        ),
        Case("evolve", "evolve", _evolve, 1_000, "200 rows at -0.5, plus one at 1", noise="seeded"),
        Case(
            "maxcover",
            "maxcover",
            _maxcover,
            300,
            "1050 rows at -0.43 and 450 at 1, plus one at 0.7",
            noise="seeded",
        ),
        Case(
            "maxcover without final round",
            "maxcover",
            _maxcover_average,
            200,
            "epsilon = 1; 1000 rows at -1, plus one at 100 (outside the bounds (-1, 1): clipped to 1)",
            noise="seeded",
        ),
        Case(
            "maxcover Gaussian average",
            "maxcover",
            lambda: _maxcover_average("gaussian", (-0.5, 200), 1.0),
            200,
            "epsilon = 1, no final round; 200 rows at -0.5, plus one at 1",
            noise="seeded",
        ),
        Case(
            "onecluster",
            "onecluster",
            _onecluster,
            1_000,
            "80 rows at -0.5 and 80 at 0.5, plus one at -0.5",
            noise="seeded",
        ),
        Case(
            "private selection: the comparison",
            "private selection",
            _private_selection,
            4_000,
            f"candidates at c = (0.5, ..., 0.5) and -c in d = {SELECTION_D}; {SELECTION_ROWS} rows at 0, plus one at c",
        ),
        Case(
            "FastLloyd at user level",
            "user level",
            _user_level,
            1_500,
            f"40 users of {USER_ROWS} rows at -0.5, plus one user with {USER_OWN} rows at 0.999 "
            f"(max_rows_per_user={USER_ROWS})",
        ),
        Case("Subsampled SuLloyd (rate 0.1)", "Subsampled", _subsampled, 1_500, "2000 rows at -0.45, plus one at 1"),
        Case(
            "local randomizer: randomized response",
            "local",
            _randomized_response,
            6_000,
            "one user holding value 0 vs 1 of 4",
            discrete=True,
            noise="device",
        ),
        Case(
            "local randomizer: one coordinate",
            "local",
            _one_coordinate,
            6_000,
            "one user's row -1 vs +1",
            discrete=True,
            noise="device",
        ),
        Case(
            "shuffled randomized response",
            "shuffle",
            _shuffled_count,
            20_000,
            f"{SHUFFLE_USERS} users holding 0, or one of them 1; central (1, {SHUFFLE_DELTA:g})",
            discrete=True,
            noise="device",
        ),
        Case(
            "federated round: server's view",
            "federated",
            _federated,
            150,
            "party 0 holds 50 rows at -0.5, or those plus one at 0.999; party 1 holds 50 at 0.5",
        ),
    ]
}


def _halved(*kinds):
    return lambda: scaled_noise(0.5, kinds)


CONTROLS: dict[str, Control] = {
    c.name: c
    for c in [
        Control(CASES["Laplace mechanism"], "noise / 2", _halved("laplace")),
        Control(CASES["Gaussian mechanism"], "noise / 2", _halved("gaussian")),
        Control(CASES["exponential mechanism (permute-and-flip)"], "scale / 2", _halved("exponential")),
        Control(CASES["implicit exponential mechanism (Gumbel)"], "scale / 2", _halved("exponential"), draws=8_000),
        Control(CASES["NoisyAVG"], "sigma / 5", lambda: scaled_noise(0.2, ("gaussian",))),
        Control(CASES["private box (magnitudes)"], "noise / 2", _halved("gaussian")),
        Control(CASES["FastLloyd"], "noise / 2", _halved("gaussian"), draws=1_000),
        Control(CASES["FastLloyd (far rows clipped)"], "far rows not clipped", unclipped_domain, draws=1_000),
        Control(
            CASES["FastLloyd at user level"], "one row's sensitivity for m rows", row_sensitivity_for_users, draws=300
        ),
        # 1,600 draws: with the listing floor of sparse releases the control showed 1.78 against the claim 1.67 at 800
        Control(CASES["greedy (histogram)"], "noise / 2", _halved("gaussian"), draws=1_600),
        Control(CASES["evolve"], "noise / 2", _halved("gaussian")),
        Control(CASES["maxcover"], "noise / 2", _halved("gaussian", "laplace", "exponential"), draws=700),
        Control(CASES["private selection: the comparison"], "noise / 2", _halved("gaussian")),
        Control(CASES["maxcover without final round"], "clipping to the bounds dropped", unclipped_domain),
        Control(CASES["local randomizer: randomized response"], "epsilon x 2", lambda: overconfident_devices(2.0)),
        Control(CASES["shuffled randomized response"], "epsilon_0 x 2", lambda: overconfident_devices(2.0)),
    ]
}
