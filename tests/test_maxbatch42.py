"""Session 42 fixes of ``memsched max-batch``'s search over the sizes a network accepts (`search_accepted`):
(1) when every doubled size 1, 2, 4, ... is refused (sizes that must be multiples of 3), the sizes near them
and then every size from 1 up are tried, so accepted sizes are reached, not "runs at none"; (2) where the
accepted sizes are more than 2 x `MAX_NEAR` apart inside the bracket (unet with 6 levels at --step 1: multiples
of 64), the sizes skipped as refused are scanned afterwards, so the answer is the largest accepted size that
fits, not a smaller one. The number of sizes asked is bounded (`max_probes`); when the bounded scans leave
sizes untried, the answer (or the error) says which.

The search is checked against the brute-force answer over many sets of accepted sizes; the CLI tests
replace `max_batch.probe_size` by a table of verdicts (milliseconds each), as in test_maxbatch41."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

pytest.importorskip("torch")

from memsched.experiments.commands import max_batch  # noqa: E402
from memsched.experiments.commands.max_batch import Probe, search_accepted  # noqa: E402
from memsched.solvers.errors import InputError  # noqa: E402

#: a search of image sides whose probes `fake_probes` answers (--tolerance 0: the exact largest)
SIDES = ("max-batch", "unet", "--depth", "2", "--batch", "2", "--vary", "image-size", "--solver", "store-all",
         "--tolerance", "0", "--memory", "125209488")


def verdicts(accepted, fits_up_to: int, asked: list[int] | None = None):
    """`verdict(k)` of `search_accepted`: None where `accepted(k)` is false, else whether k <= `fits_up_to`."""
    def verdict(k: int) -> bool | None:
        if asked is not None:
            asked.append(k)
        return (k <= fits_up_to) if accepted(k) else None

    return verdict


def truth(accepted, fits_up_to: int, limit: int) -> int:
    """The largest accepted k in 1..limit with k <= fits_up_to (0: none), by brute force."""
    return max((k for k in range(1, limit + 1) if accepted(k) and k <= fits_up_to), default=0)


def probe(size: int, fits: bool) -> Probe:
    return Probe(size=size, fits=fits, status="optimal" if fits else "infeasible", budget=10**8, parameter_bytes=1000,
                 store_all_peak=1000 * size, store_all_time=10.0, makespan=10.0 if fits else None,
                 overhead=1.0 if fits else None, peak_memory=1000 * size if fits else None, bound=1.2, nodes=4,
                 solve_time_s=0.0)


def fake_probes(monkeypatch, accepted, fits_up_to: int) -> list[int]:
    """`max_batch.probe_size` refusing the sides `accepted` rejects (bad input naming --image-size, as unet's
    check) and fitting up to `fits_up_to` px; returns the list of sides built."""
    built: list[int] = []

    def fake(model, sizes, *, size, **kw):
        built.append(size)
        if not accepted(size):
            raise InputError(f"needs another image side than {size}", field="--image-size")
        return probe(size, size <= fits_up_to)

    monkeypatch.setattr(max_batch, "probe_size", fake)
    return built


# --- bug 1: no doubled size accepted -----------------------------------------------------------------------------

@pytest.mark.parametrize("m,fits_up_to,limit", [(3, 50, 100), (3, 2, 100), (5, 7, 64), (6, 200, 1000),
                                                (12, 10**6, 1000), (24, 500, 1000), (100, 700, 1000)])
def test_sizes_that_no_doubling_reaches_are_found(m, fits_up_to, limit):
    """Multiples of m (no power of two among them): the largest one that fits, and the smallest accepted
    size (m) when none fits; each size asked once, within `max_probes`."""
    asked: list[int] = []
    accepted = lambda k: k % m == 0  # noqa: E731
    best, smallest = search_accepted(verdicts(accepted, fits_up_to, asked), limit)
    assert best == truth(accepted, fits_up_to, limit)
    assert smallest == m
    assert len(asked) == len(set(asked)) <= max_batch.max_probes(limit)


def test_no_accepted_size_in_a_small_range_is_every_size_tried():
    """Nothing accepted in 1..256: every size was asked (the error can say "every multiple"), none left."""
    asked: list[int] = []
    untried: list[tuple[int, int]] = []
    assert search_accepted(verdicts(lambda k: False, 0, asked), 256, untried=untried) == (0, 0)
    assert sorted(asked) == list(range(1, 257)) and untried == []


def test_no_accepted_size_in_a_large_range_says_what_was_left():
    asked: list[int] = []
    untried: list[tuple[int, int]] = []
    assert search_accepted(verdicts(lambda k: False, 0, asked), 8192, untried=untried) == (0, 0)
    assert len(asked) <= max_batch.max_probes(8192) < 8192
    assert len(untried) == 1 and 1 < untried[0][0] and untried[0][1] == 8192


# --- bug 2: accepted sizes more than 2 x MAX_NEAR apart ----------------------------------------------------------

@pytest.mark.parametrize("m,fits_up_to,limit,want", [(64, 10**6, 700, 640), (64, 600, 700, 576), (34, 40, 1000, 34),
                                                     (34, 71, 700, 68), (100, 930, 1000, 900)])
def test_sparse_accepted_sizes_give_the_largest_that_fits(m, fits_up_to, limit, want):
    """unet with 6 levels at --step 1 takes multiples of 64: all fit up to 700, the answer is 640 (it was
    512: 700 and the sizes near it refused, the bracket was cut there)."""
    asked: list[int] = []
    untried: list[tuple[int, int]] = []
    accepted = lambda k: k % m == 0  # noqa: E731
    assert search_accepted(verdicts(accepted, fits_up_to, asked), limit, untried=untried)[0] == want
    assert untried == [] and len(asked) == len(set(asked)) <= max_batch.max_probes(limit)


def accepted_sets():
    """Lattices (multiples of m) above a smallest size and below a largest one: the refusals of unet, vit,
    inception, and of a network taking one size only."""
    for m in (1, 3, 4, 5, 24, 34, 40, 64, 100):
        for low in (1, 75, 300):
            for high in (None, 120, 500):
                yield f"{m}|{low}|{high}", lambda k, m=m, low=low, high=high: (
                    k % m == 0 and k >= low and (high is None or k <= high))


@pytest.mark.parametrize("name,accepted", list(accepted_sets()))
def test_search_is_exact_or_says_what_it_left(name, accepted):
    """Against brute force, every limit and fit: exact (tolerance 0) unless sizes were left untried, and then
    the answer is an accepted size that fits; never more than `max_probes` sizes."""
    for limit in (7, 100, 256, 1000):
        accepted_sizes = [k for k in range(1, limit + 1) if accepted(k)]
        for fits_up_to in {0, 1, 50, 150, 333, 640, 10**6, *accepted_sizes[:2], *accepted_sizes[-2:]}:
            asked: list[int] = []
            untried: list[tuple[int, int]] = []
            best, smallest = search_accepted(verdicts(accepted, fits_up_to, asked), limit, untried=untried)
            want = truth(accepted, fits_up_to, limit)
            if untried:
                assert best == 0 or (accepted(best) and best <= fits_up_to), (name, limit, fits_up_to)
            else:
                assert best == want, (name, limit, fits_up_to, best, want)
                if not best:
                    assert smallest == (accepted_sizes[0] if accepted_sizes else 0), (name, limit, fits_up_to)
            assert len(asked) == len(set(asked)) <= max_batch.max_probes(limit)


def test_the_stated_bound():
    """The docs' numbers: 916 sizes at most for 256 sizes searched (8192 px at --step 32), 1444 for 65536."""
    assert max_batch.max_probes(256) == 916 and max_batch.max_probes(65536) == 1444
    assert max_batch.MAX_SCAN == 256


# --- the command -------------------------------------------------------------------------------------------------

def test_cli_sides_that_are_multiples_of_3_steps(monkeypatch):
    """Sides that must be multiples of 96 px at --step 32 (k = 1, 2, 4, ... all refused): largest 960, not
    "runs at none"."""
    fake_probes(monkeypatch, lambda side: side % 96 == 0, 1000)
    code, out, err = run_cli(*SIDES, "--step", "32", "--limit", "2000")
    assert code == 0, err
    assert "largest image-size: 960 (overhead" in out
    assert "      64  refused  needs another image side" in out


def test_cli_sides_64_apart_at_step_1(monkeypatch):
    fake_probes(monkeypatch, lambda side: side % 64 == 0, 10**6)
    code, out, err = run_cli(*SIDES, "--step", "1", "--limit", "700", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["largest"] == 640 and answer["untried"] is None and answer["status"] == "complete"


def test_cli_every_side_refused_says_every_multiple_was_tried(monkeypatch):
    built = fake_probes(monkeypatch, lambda side: False, 0)
    code, out, err = run_cli(*SIDES, "--step", "32", "--limit", "2048")
    assert code == 2 and out == "", err
    assert sorted(built) == list(range(32, 2049, 32))
    line = err.strip()
    assert "--vary image-size: unet runs at none of the image sides tried (64 sides: 32, 64, 96, 128, 160, 192, " \
           "..., 1984, 2016, 2048 px: every multiple of --step 32 up to 2048 px)" in line
    assert "not all tried" not in line


def test_cli_every_side_refused_in_a_large_range_says_what_was_left(monkeypatch):
    built = fake_probes(monkeypatch, lambda side: False, 0)
    code, out, err = run_cli(*SIDES, "--step", "1", "--limit", "8192")
    assert code == 2 and out == "", err
    assert len(built) <= max_batch.max_probes(8192)
    assert "runs at none of the image sides tried (" in err and "every multiple" not in err
    assert f"to 8192 were not all tried (the network refused the sizes around them; the search scans at most " \
           f"{max_batch.MAX_SCAN})" in err


def test_cli_answer_with_sizes_left_is_a_lower_bound(monkeypatch):
    """Sides up to 40 px only, all fitting, at --step 1 up to 2000 px: 40, and the sides above that the
    bounded scan left are named (text and JSON)."""
    fake_probes(monkeypatch, lambda side: side <= 40, 10**6)
    code, out, err = run_cli(*SIDES, "--step", "1", "--limit", "2000")
    assert code == 0, err
    assert "largest image-size: 40 (at least; image sizes " in out
    assert " to 2000 were not all tried (the network refused the sizes around them" in out
    code, out, _ = run_cli(*SIDES, "--step", "1", "--limit", "2000", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["largest"] == 40
    assert 40 < answer["untried"]["from"] < 2000 and answer["untried"]["to"] == 2000


def test_cli_nothing_fits_with_smaller_sides_left(monkeypatch):
    """Sides from 3000 px (--step 1), none fitting: exit 1, and the line says that the sides below the
    smallest one found were not all tried, instead of calling it the smallest side it runs at."""
    fake_probes(monkeypatch, lambda side: side >= 3000, 10)
    code, out, err = run_cli(*SIDES, "--step", "1", "--limit", "8192")
    assert code == 1, err
    assert "(the smallest side found that it runs at; image sizes " in err
    assert " to 2999 were not all tried" in err and "(the smallest side it runs at)" not in err
