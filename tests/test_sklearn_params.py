"""scikit-learn's and diffprivlib's KMeans parameters on privclust.KMeans (privclust.compat, docs/sklearn.md)."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import load_iris

from privclust import Budget, KMeans, PrivacyAccountant, PrivacyLeakWarning, _parallel
from privclust.algorithms import lloyd as lloyd_module
from privclust.compat import CompatibilityWarning

LLOYD_FAMILY = ["fastlloyd", "glloyd", "sulloyd", "nonprivate-lloyd"]


def compat_warnings(caught):
    return [w for w in caught if issubclass(w.category, CompatibilityWarning)]


def fit_quietly(model, X, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # seeded noise, the baseline: said elsewhere
        return model.fit(X, **kwargs)


@pytest.fixture
def starts(monkeypatch):
    """The centers each Lloyd run starts from (unit box), recorded where the algorithms call run_lloyd."""
    seen = []

    def record(ctx, plan, centers, *args, **kwargs):
        seen.append(centers.copy())
        return run_lloyd(ctx, plan, centers, *args, **kwargs)

    run_lloyd = lloyd_module.run_lloyd
    monkeypatch.setattr(lloyd_module, "run_lloyd", record)
    return seen


# --- init: public centers start the Lloyd family, free -----------------------------------------------


@pytest.mark.parametrize("algorithm", LLOYD_FAMILY)
def test_an_array_init_is_the_start_in_data_units_and_costs_nothing(blobs, starts, algorithm):
    X = blobs[0] * [5.0, 50.0] + [5.0, 50.0]  # the blobs in [0, 10] x [0, 100]
    bounds = [(0.0, 10.0), (0.0, 100.0)]
    init = np.array([[2.0, 25.0], [7.5, 30.0], [5.0, 80.0]])
    given = init.copy()
    with_start = fit_quietly(KMeans(3, bounds=bounds, algorithm=algorithm, init=init, random_state=0), X)
    np.testing.assert_allclose(starts[-1], [[-0.6, -0.5], [0.5, -0.4], [0.0, 0.6]])  # init in the unit box
    np.testing.assert_array_equal(init, given)  # the caller's array is not changed
    without = fit_quietly(KMeans(3, bounds=bounds, algorithm=algorithm, random_state=0), X)
    assert not np.allclose(starts[-1], starts[-2])  # the default start is another
    assert with_start.privacy_spent_.epsilon == without.privacy_spent_.epsilon  # no budget for the start
    assert with_start.privacy_spent_.delta == without.privacy_spent_.delta
    if algorithm != "nonprivate-lloyd":  # the same releases (the baseline stops when its centers are stable)
        assert [s.label for s in with_start.privacy_spent_.steps] == [s.label for s in without.privacy_spent_.steps]


def test_nonprivate_lloyd_from_an_init_is_scikit_learns_lloyd_from_it(blobs):
    X = blobs[0]
    init = np.array([[-0.2, -0.2], [0.2, -0.2], [0.0, 0.2]])
    ours = fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="nonprivate-lloyd", init=init), X)
    theirs = SkKMeans(3, init=init, n_init=1, tol=0.0, max_iter=100).fit(X)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, atol=1e-9)


def test_an_init_outside_the_bounds_is_clipped_into_them(blobs, starts):
    init = np.array([[-3.0, 0.0], [0.0, 7.0], [0.5, 0.5]])
    fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", init=init, random_state=0), blobs[0])
    np.testing.assert_array_equal(starts[-1], [[-1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])


def test_an_init_starts_from_a_privately_found_box(blobs, starts):
    X = blobs[0] * 40.0 + 100.0  # about [76, 124]^2; no bounds declared: a share of the budget finds the box
    init = np.array([[76.0, 80.0], [122.0, 84.0], [100.0, 124.0]])
    model = fit_quietly(KMeans(3, algorithm="fastlloyd", init=init, random_state=0), X)
    box = model.fit_info_["domain"]
    expected = 2.0 * (init - np.asarray(box["lower"])) / (np.asarray(box["upper"]) - np.asarray(box["lower"])) - 1.0
    np.testing.assert_allclose(starts[-1], np.clip(expected, -1, 1))
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9


@pytest.mark.parametrize("algorithm", ["greedy", "maxcover", "onecluster"])
def test_algorithms_that_do_not_start_from_centers_refuse_an_init_before_spending(blobs, algorithm):
    accountant = PrivacyAccountant(Budget(10.0, 1e-3))
    model = KMeans(3, bounds=(-1, 1), algorithm=algorithm, init=np.zeros((3, 2)), accountant=accountant)
    with pytest.raises(ValueError, match=f"algorithm='{algorithm}' does not take init"):
        model.fit(blobs[0])
    assert accountant.spends == []


def test_auto_runs_fastlloyd_from_an_init(blobs, starts):
    X = blobs[0]  # 2-d, k = 3: auto would choose FastLloyd from its mean start without a start of the user's
    init = np.array([[-0.5, -0.5], [0.5, -0.5], [0.0, 0.5]])
    model = KMeans(3, bounds=(-1, 1), init=init).fit(X)
    assert model.fit_info_["auto"]["chose"] == "fastlloyd" and "init" in model.fit_info_["auto"]["because"]
    np.testing.assert_array_equal(starts[-1], init)
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9
    without = KMeans(3, bounds=(-1, 1)).fit(X).fit_info_
    assert without["auto"]["algorithm"] == "fastlloyd" and without["init"]["start"] == "noisy mean"


@pytest.mark.parametrize("model", ["local", "shuffle"])
def test_one_round_models_refuse_an_init_before_spending(blobs, model):
    accountant = PrivacyAccountant(Budget(10.0, 1e-3))
    with pytest.raises(ValueError, match="only the greedy can use, and it takes no start"):
        KMeans(3, bounds=(-1, 1), init=np.zeros((3, 2)), privacy_model=model, accountant=accountant).fit(blobs[0])
    assert accountant.spends == []


@pytest.mark.parametrize(
    "init, error, message",
    [
        (np.zeros((2, 2)), ValueError, "a 3 x 2 array, got 2 x 2"),
        (np.zeros((3, 3)), ValueError, "a 3 x 2 array, got 3 x 3"),
        (np.zeros(3), ValueError, "2-d array"),
        (np.array([[0.0, np.nan]] * 3), ValueError, "finite"),
        ([["a", "b"]] * 3, ValueError, "array of numbers"),
        ("kmeans", ValueError, "init must be None, an array of public centers"),
        (lambda X, k, rng: X[:k], TypeError, "called with the private rows"),
    ],
)
def test_bad_inits_are_refused_before_any_row_is_read(blobs, init, error, message):
    accountant = PrivacyAccountant(Budget(10.0, 1e-3))
    with pytest.raises(error, match=message):
        KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", init=init, accountant=accountant).fit(blobs[0])
    assert accountant.spends == []


def test_a_bad_init_with_a_private_box_is_refused_before_the_box_is_found(blobs):
    accountant = PrivacyAccountant(Budget(10.0, 1e-3))
    with pytest.raises(ValueError, match="a 3 x 2 array, got 2 x 2"):
        KMeans(3, algorithm="fastlloyd", init=np.zeros((2, 2)), accountant=accountant).fit(blobs[0])
    assert accountant.spends == []  # not even the box's releases


@pytest.mark.parametrize("algorithm", ["fastlloyd", "glloyd", "sulloyd"])
def test_an_init_plans_the_same_spends(algorithm):
    with_start = KMeans(3, bounds=(-1, 1), algorithm=algorithm, init=np.zeros((3, 2))).planned_spends(2)
    assert with_start == KMeans(3, bounds=(-1, 1), algorithm=algorithm).planned_spends(2)


def test_auto_from_an_init_plans_fastlloyd_only():
    plans = KMeans(3, bounds=(-1, 1), init=np.zeros((3, 2))).planned_spends(2)
    assert len(plans) == 1 and [s.label for s in plans[0]] == ["row count", "Lloyd iterations"]
    assert len(KMeans(3, bounds=(-1, 1)).planned_spends(3)) == 2  # without: every plan the rule may choose in 3-d


def test_a_public_start_and_a_private_one_are_not_both_taken(blobs):
    with pytest.raises(ValueError, match="give one of them"):
        KMeans(
            3, bounds=(-1, 1), algorithm="fastlloyd", init=np.zeros((3, 2)), algorithm_params={"init": "greedy"}
        ).fit(blobs[0])


# --- what is accepted and ignored, with one warning -----------------------------------------------


def test_sklearns_data_dependent_starts_and_restarts_are_ignored_with_one_warning(blobs):
    X = blobs[0]
    plain = fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", random_state=1), X)
    sklearn_style = KMeans(
        3, bounds=(-1, 1), algorithm="fastlloyd", random_state=1, init="k-means++", n_init=10, tol=1e-4
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sklearn_style.fit(X)
    [warning] = compat_warnings(caught)
    text = str(warning.message)
    assert "init='k-means++'" in text and "n_init=10" in text and "tol=0.0001" in text
    assert "reads the data" in text and "share of the budget" in text  # why, for each
    assert warning.filename == __file__  # at the user's line
    np.testing.assert_array_equal(sklearn_style.cluster_centers_, plain.cluster_centers_)  # ignored indeed
    assert sklearn_style.privacy_spent_.epsilon == plain.privacy_spent_.epsilon


def test_a_fit_checks_the_ignored_parameters_once(blobs, monkeypatch):
    from privclust import estimator

    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return ignored(*args, **kwargs)

    ignored = estimator.ignored
    monkeypatch.setattr(estimator, "ignored", counted)
    model = KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", random_state=1, n_init=10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(blobs[0])
    assert len(calls) == 1 and len(compat_warnings(caught)) == 1


def test_auto_takes_sklearns_max_iter_and_ignores_it_with_the_warning(blobs):
    X = blobs[0]
    plain = fit_quietly(KMeans(3, bounds=(-1, 1), random_state=1), X)
    for given in (dict(max_iter=300), dict(max_iter=300, algorithm="lloyd")):  # sklearn's default, its name
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = KMeans(3, bounds=(-1, 1), random_state=1, **given).fit(X)
        assert any("max_iter=300" in str(w.message) for w in compat_warnings(caught))
        np.testing.assert_array_equal(model.cluster_centers_, plain.cluster_centers_)  # ignored indeed
    with pytest.raises(ValueError, match="max_iter must be an integer"):
        KMeans(3, bounds=(-1, 1), max_iter=0).fit(X)  # still checked
    lloyd = fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", max_iter=3, random_state=1), X)
    assert lloyd.n_iter_ == 3  # honoured where it means something


@pytest.mark.parametrize(
    "params",
    [
        dict(n_init=1),
        dict(n_init="auto"),
        dict(tol=None),
        dict(copy_x=False),
        dict(copy_x=True),
        dict(verbose=0),
        dict(n_jobs=1),
        dict(init=None),
    ],
)
def test_what_is_honoured_gives_no_compatibility_warning(blobs, params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        KMeans(3, bounds=(-1, 1), **params).fit(blobs[0])
    assert compat_warnings(caught) == []


def test_copy_x_false_still_leaves_x_unchanged(blobs):
    X = blobs[0] * 3.0  # rows outside the bounds: they are clipped, in copies
    given = X.copy()
    fit_quietly(KMeans(3, bounds=(-1, 1), copy_x=False, random_state=0), X)
    np.testing.assert_array_equal(X, given)


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(n_init=0), "n_init must be an integer >= 1, 'auto' or None"),
        (dict(n_init="many"), "n_init must be an integer >= 1, 'auto' or None"),
        (dict(tol=-1.0), r"tol \(or None\) must be a number in \[0, inf\)"),
        (dict(tol="small"), r"tol \(or None\) must be a number in \[0, inf\)"),
        (dict(verbose=-1), "verbose must be an integer >= 0"),
        (dict(copy_x="yes"), "copy_x must be True or False"),
        (dict(n_jobs=0), "n_jobs must be a non-zero integer"),
        (dict(n_jobs=1.5), "n_jobs must be a non-zero integer"),
    ],
)
def test_bad_values_are_refused_before_any_row_is_read(blobs, params, message):
    accountant = PrivacyAccountant(Budget(10.0, 1e-3))
    with pytest.raises(ValueError, match=message):
        KMeans(3, bounds=(-1, 1), accountant=accountant, **params).fit(blobs[0])
    assert accountant.spends == []


# --- algorithm="lloyd" / "elkan": scikit-learn's names, never a non-private fit ------------------


@pytest.mark.parametrize("name", ["lloyd", "elkan"])
def test_sklearns_algorithm_names_fit_privately_with_a_warning(blobs, name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = KMeans(3, bounds=(-1, 1), epsilon=0.5, algorithm=name).fit(blobs[0])
    assert not [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]  # no "not private" anywhere
    [warning] = compat_warnings(caught)
    assert f"algorithm={name!r}" in str(warning.message) and "nonprivate-lloyd" in str(warning.message)
    assert model.privacy_spent_.epsilon <= 0.5 + 1e-9
    assert "auto" in model.fit_info_  # privclust's default private algorithm ran
    assert model.get_params()["algorithm"] == name  # the parameter is kept as given (clone, grid search)


def test_the_baseline_has_its_own_name_and_a_shared_budget_still_refuses_it(blobs):
    with pytest.warns(PrivacyLeakWarning, match="non-private baseline"):
        model = KMeans(3, bounds=(-1, 1), algorithm="nonprivate-lloyd").fit(blobs[0])
    assert model.privacy_spent_.epsilon == float("inf")


# --- verbose, n_jobs, sample_weight ----------------------------------------------------------------


def test_verbose_prints_the_plans_progress_on_stderr(blobs, capsys):
    model = fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", verbose=1, random_state=0), blobs[0])
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith("privclust.KMeans: fitting algorithm='fastlloyd', k=3, epsilon=1")
    assert [line for line in lines if "iteration" in line and " of " in line] == [
        f"privclust.KMeans: iteration {t} of {model.n_iter_}" for t in range(1, model.n_iter_ + 1)
    ]
    assert lines[-1].startswith(f"privclust.KMeans: done after {model.n_iter_} iteration(s); spent (epsilon=1")
    fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", random_state=0), blobs[0])
    assert capsys.readouterr().err == ""  # verbose=0: silent


def test_verbose_keeps_the_users_callback(blobs, capsys):
    calls = []
    model = KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", verbose=2, random_state=0)
    fit_quietly(model, blobs[0], callback=lambda done, planned: calls.append((done, planned)))
    assert calls and calls[-1][0] == calls[-1][1]
    assert "iteration 1 of" in capsys.readouterr().err


@pytest.mark.parametrize("n_jobs", [1, 2, -1])
def test_n_jobs_sets_the_fits_threads(blobs, n_jobs, monkeypatch):
    monkeypatch.setattr(_parallel.os, "cpu_count", lambda: 3)
    seen = []
    model = KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", n_jobs=n_jobs, random_state=0)
    fit_quietly(model, blobs[0], callback=lambda done, planned: seen.append(_parallel.n_workers()))
    assert set(seen) == {3 if n_jobs == -1 else n_jobs}
    assert _parallel.n_workers() == 3  # restored after the fit


def _thread_counts():
    """(the process-wide BLAS counts, this thread's OpenMP counts) of the libraries loaded here (real ones)."""
    libraries = _parallel._controller().lib_controllers
    shared = sorted({lib.get_num_threads() for lib in libraries if not _parallel._per_thread(lib)})
    return shared, sorted({lib.get_num_threads() for lib in libraries if _parallel._per_thread(lib)})


@pytest.mark.parametrize("first_out", ["smaller", "larger"])
def test_fits_in_two_threads_share_the_process_blas_and_keep_their_own_openmp(first_out):
    """Real libraries: OpenBLAS (numpy's and scipy's wheels, pthreads) has one thread count per process, libgomp one
    per thread.  Two blocks with different limits in two threads, the main thread holding threadpoolctl's control
    (it set the count last): while both are inside the process runs BLAS at the smaller limit, each thread OpenMP at
    its own; the one left alone gets its own BLAS limit; when both are out the count the process had is back.
    (threadpoolctl ignored the limits of threads other than the main one, and the last block out put back the count
    it had found, another block's, for good.)"""
    import threading

    from threadpoolctl import ThreadpoolController

    libraries = _parallel._controller().lib_controllers
    assert any(_parallel._per_thread(lib) for lib in libraries), "libgomp (scikit-learn's OpenMP) is loaded"
    assert any(not _parallel._per_thread(lib) for lib in libraries), "numpy's OpenBLAS (pthreads) is loaded"
    limits = {"A": 1, "B": 3}
    first = "A" if first_out == "smaller" else "B"
    last = "B" if first == "A" else "A"
    inside, out, seen = {n: threading.Event() for n in "AB"}, threading.Event(), {}
    both_read = threading.Barrier(2, timeout=10)  # neither leaves before both have read the counts with both in

    def fit(name):
        other = "B" if name == "A" else "A"
        with _parallel.limited_threads(limits[name]):
            inside[name].set()
            inside[other].wait(10)
            seen[f"{name} with both in"] = _thread_counts()
            both_read.wait()
            if name == last:
                out.wait(10)
                seen[f"{name} alone"] = _thread_counts()
        seen[f"{name} after"] = _thread_counts()[1]
        if name == first:
            out.set()

    with ThreadpoolController().limit(limits=2):  # the process's count, which the fits' 1 and 3 must not leave behind
        threads = [threading.Thread(target=fit, args=(name,)) for name in "AB"]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        after = _thread_counts()
    assert seen["A with both in"] == ([1], [1]) and seen["B with both in"] == ([1], [3])
    assert seen[f"{last} alone"] == ([limits[last]], [limits[last]])
    assert seen["A after"] == seen["B after"] == after[1]  # each thread's OpenMP back to what it had
    assert after[0] == [2] and _parallel._shared_limits == []


def test_fits_in_two_threads_give_what_they_give_alone_and_leave_blas_as_they_found_it(blobs):
    import threading

    def fit(n_jobs):
        return fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", n_jobs=n_jobs, random_state=4), blobs[0])

    before = _thread_counts()
    alone = {n: fit(n).cluster_centers_ for n in (1, 3)}
    together = {}
    threads = [threading.Thread(target=lambda n=n: together.update({n: fit(n).cluster_centers_})) for n in (1, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for n in (1, 3):
        np.testing.assert_array_equal(together[n], alone[n])
    assert _thread_counts() == before and _parallel._shared_limits == []


def test_n_jobs_does_not_change_the_result(blobs):
    one = fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", n_jobs=1, random_state=4), blobs[0])
    two = fit_quietly(KMeans(3, bounds=(-1, 1), algorithm="fastlloyd", n_jobs=2, random_state=4), blobs[0])
    np.testing.assert_allclose(one.cluster_centers_, two.cluster_centers_, rtol=0, atol=1e-12)


def test_sample_weight_is_refused_before_any_row_is_read(blobs):
    accountant = PrivacyAccountant(Budget(10.0, 1e-3))
    model = KMeans(3, bounds=(-1, 1), accountant=accountant)
    with pytest.raises(ValueError, match="sample_weight is not supported: .*public bound on the weights"):
        model.fit(blobs[0], sample_weight=np.ones(len(blobs[0])))
    assert accountant.spends == []
    with pytest.raises(ValueError, match="sample_weight"):
        model.fit_predict(blobs[0], sample_weight=np.ones(len(blobs[0])))
    fit_quietly(KMeans(3, bounds=(-1, 1), random_state=0), blobs[0], sample_weight=None)  # None: unweighted


def test_the_new_parameters_are_parameters(blobs):
    model = KMeans(3, init=np.zeros((3, 2)), n_init=4, tol=0.1, verbose=1, copy_x=False, n_jobs=2)
    params = model.get_params()
    assert params["n_init"] == 4 and params["tol"] == 0.1 and params["verbose"] == 1
    assert params["copy_x"] is False and params["n_jobs"] == 2
    np.testing.assert_array_equal(clone(model).init, np.zeros((3, 2)))


# --- diffprivlib's documented KMeans, with only the import changed ---------------------------------


def test_diffprivlib_kmeans_example_runs_with_only_the_import_changed():
    # As diffprivlib documents its KMeans (epsilon; bounds as (min, max) with one entry per dimension in
    # each; n_clusters), on Iris with its public measurement ranges.  The one change:
    # from diffprivlib.models import KMeans
    from privclust import KMeans

    X, y = load_iris(return_X_y=True)
    clf = KMeans(epsilon=1.0, bounds=([4.0, 2.0, 1.0, 0.0], [8.0, 4.5, 7.0, 2.5]), n_clusters=3)
    clf.fit(X)
    labels = clf.predict(X)

    assert clf.cluster_centers_.shape == (3, 4)
    assert np.all(clf.cluster_centers_ >= [4.0, 2.0, 1.0, 0.0]) and np.all(clf.cluster_centers_ <= [8, 4.5, 7, 2.5])
    assert labels.shape == (150,) and set(labels) <= {0, 1, 2}
    assert clf.privacy_spent_.epsilon <= 1.0 + 1e-9
    assert clf.inertia_ >= 0 and clf.n_iter_ >= 1


def test_diffprivlib_code_with_sklearns_parameters_runs_with_one_warning():
    # diffprivlib takes scikit-learn's parameters (**unused_args) and warns that it ignores them; so does
    # privclust, for the ones it cannot honour.  Was a TypeError for each.
    from privclust import KMeans

    X, _ = load_iris(return_X_y=True)
    clf = KMeans(
        epsilon=1.0,
        bounds=([4.0, 2.0, 1.0, 0.0], [8.0, 4.5, 7.0, 2.5]),
        n_clusters=3,
        init="k-means++",
        n_init=10,
        tol=1e-4,
        verbose=0,
        copy_x=True,
        algorithm="lloyd",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels = clf.fit_predict(X)
    [warning] = compat_warnings(caught)
    assert "algorithm='lloyd'" in str(warning.message) and "n_init=10" in str(warning.message)
    assert labels.shape == (150,)
    assert clf.privacy_spent_.epsilon <= 1.0 + 1e-9
