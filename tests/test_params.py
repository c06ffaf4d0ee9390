"""Parameters are declared per algorithm (algorithms.params) and checked once, before anything is planned."""

import math

import numpy as np
import pytest

from privclust import KMeans
from privclust.algorithms import ALGORITHMS
from privclust.algorithms.auto import CHOICES
from privclust.algorithms.params import (
    ESTIMATOR_DEFAULTS,
    MAX_ITER,
    Boolean,
    Integer,
    Interval,
    OneOf,
    check_params,
    table,
)
from privclust.federated.server import Job
from privclust.privacy.budget import Budget, PrivacyAccountant

X = np.random.default_rng(0).uniform(-1, 1, (300, 2))
NON_DEFAULT = {"max_iter": 3, "alpha": 0.5, "radius_strategy": "constant", "postprocess": "none"}


def _refused(message, **kwargs):
    ledger = PrivacyAccountant(Budget(10.0, 1e-3))
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=(-1, 1), accountant=ledger, **kwargs).fit(X)
    assert ledger.spends == []  # refused before anything was released, not even a row count


@pytest.mark.parametrize(
    "algorithm, option",
    [
        ("greedy", "alpha"),
        ("greedy", "max_iter"),
        ("maxcover", "max_iter"),
        ("onecluster", "postprocess"),
        ("glloyd", "radius_strategy"),
        ("sulloyd", "alpha"),
        ("nonprivate-lloyd", "postprocess"),
    ],
)
def test_an_option_the_algorithm_does_not_take_is_refused_naming_it(algorithm, option):
    _refused(f"algorithm='{algorithm}' does not take {option}", algorithm=algorithm, **{option: NON_DEFAULT[option]})


@pytest.mark.parametrize("algorithm", sorted(set(ALGORITHMS) - {"auto"}))
def test_every_option_an_algorithm_does_not_take_is_refused(algorithm):
    taken = table(algorithm).options
    for option, value in NON_DEFAULT.items():
        if option not in taken:
            with pytest.raises(ValueError, match=f"does not take {option}"):
                check_params(algorithm, {option: value})
        else:
            assert check_params(algorithm, {option: value})[option] == value


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_the_estimator_defaults_are_every_algorithms(algorithm):
    checked = check_params(algorithm, {**ESTIMATOR_DEFAULTS, "params": None})
    assert checked == check_params(algorithm, {})
    assert check_params(algorithm, checked) == checked  # checking checked values changes nothing


@pytest.mark.parametrize("option", sorted(set(NON_DEFAULT) - {"max_iter"}))  # max_iter: ignored, with a warning
def test_auto_refuses_before_its_noisy_count_what_a_candidate_does_not_take(option):
    # The greedy, one of auto's choices, takes none of the four: auto would have ignored the option
    # whenever it chose the greedy, and found out only after releasing its noisy count.
    refusing = next(name for name, _ in CHOICES.values() if option not in table(name).options)
    _refused(f"algorithm='auto' may choose '{refusing}', which does not take {option}", **{option: NON_DEFAULT[option]})


def test_auto_takes_only_what_every_candidate_takes():
    candidates = {name for name, _ in CHOICES.values()}
    assert set(table("auto").candidates) == candidates
    for option, value in NON_DEFAULT.items():
        if all(option in table(name).options for name in candidates):
            check_params("auto", {option: value})
        else:
            with pytest.raises(ValueError, match="algorithm='auto' may choose"):
                check_params("auto", {option: value})


def test_the_estimator_and_the_federated_server_share_one_iteration_cap():
    _refused(f"max_iter must be an integer between 1 and {MAX_ITER} ", algorithm="fastlloyd", max_iter=MAX_ITER + 1)
    with pytest.raises(ValueError, match=f"between 1 and {MAX_ITER} "):
        Job(2, 1.0, 1e-6, [-1, 1], max_iter=MAX_ITER + 1, algorithm="fastlloyd")
    assert Job(2, 1.0, 1e-6, [-1, 1], max_iter=MAX_ITER, algorithm="fastlloyd").max_iter == MAX_ITER


def test_a_federated_glloyd_job_refuses_an_alpha_it_would_ignore():
    with pytest.raises(ValueError, match="algorithm='glloyd' does not take alpha"):
        Job(2, 1.0, 1e-6, [-1, 1], algorithm="glloyd", alpha=0.5)
    Job(2, 1.0, 1e-6, [-1, 1], algorithm="fastlloyd", alpha=0.5)


@pytest.mark.parametrize(
    "algorithm, params, message",
    [
        ("onecluster", {"shifts": 0}, "shifts must be an integer between 1 and"),  # was read as the default 30
        ("maxcover", {"final_lloyd": "no"}, "final_lloyd must be True or False"),  # was read as True
        ("greedy", {"selection": ""}, "selection must be one of"),  # was read as the default
        ("fastlloyd", {"init_share": 0.5}, "needs init='greedy' or 'mean'"),
        ("greedy", {"nonsense": 1}, r"unknown greedy parameters \['nonsense'\]; it accepts \['z', 'levels'"),
    ],
)
def test_algorithm_params_are_checked_before_anything_is_spent(algorithm, params, message):
    _refused(message, algorithm=algorithm, algorithm_params=params)


def test_constraints_say_what_they_want():
    with pytest.raises(ValueError, match=r"^x must be a number in \(0, 1\], got 0$"):
        Interval(0, 1, closed="right").check("x", 0)
    with pytest.raises(ValueError, match=r"^x must be a positive finite number, got inf$"):
        Interval(0, math.inf, closed="neither").check("x", math.inf)
    with pytest.raises(ValueError, match=r"^n must be an integer between 1 and 3, got 2.0$"):
        Integer(1, 3).check("n", 2.0)
    with pytest.raises(ValueError, match=r"^n must be an integer >= 1, got True$"):
        Integer().check("n", True)
    with pytest.raises(ValueError, match=r"^how must be one of \('a', 'b'\), got 'c'$"):
        OneOf(("a", "b")).check("how", "c")
    with pytest.raises(ValueError, match=r"^flag must be True or False, got 1$"):
        Boolean().check("flag", 1)
    assert Boolean().check("flag", np.bool_(True)) is True
    assert Interval(0, 1).check("x", 1) == 1.0 and isinstance(Integer().check("n", np.int64(2)), int)
