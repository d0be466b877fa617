"""``check`` at scale: one pass in blocks, rows never held whole, exact verdicts, and a report that says
what was sampled. The verdicts are compared with brute force (whole tables held in memory, every row
compared) and with the criteria judged on evidence built the pre-streaming way (the whole table of positions
0 .. 2L - 1 as one array, every row hashed whole)."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from posenc.analysis import properties
from posenc.analysis._work import Rows
from posenc.analysis.check import check
from posenc.analysis.collisions import collisions
from posenc.analysis.criteria import CRITERIA, Evidence
from posenc.analysis.encodings import builder, naive_table
from posenc.analysis.hashes import bits, earliest_equal, key_hashes, normalised, refine_hashes, row_hashes
from posenc.analysis.rounding import dot_product_tolerance

SETTING = {"base": 10000.0, "shift": 0.0, "scale": 1.0, "layout": "interleaved", "odd": "zero"}


def _first_repeat(rows: np.ndarray) -> tuple[int | None, int | None, int]:
    """Brute force: the first row equal (bit for bit, ±0 equal) to an earlier one, that row, and the number
    of distinct rows, by sorting the rows' bytes."""
    raw = np.ascontiguousarray(normalised(rows)).view(np.uint8).reshape(len(rows), -1)
    _, first, inverse = np.unique(raw, axis=0, return_index=True, return_inverse=True)
    earliest = first[inverse.ravel()]
    repeats = np.flatnonzero(earliest != np.arange(len(rows)))
    if not len(repeats):
        return None, None, len(first)
    return int(repeats[0]), int(earliest[repeats[0]]), len(first)


def _brute_force(length: int, d_model: int, dtype: str, compute: str) -> dict[str, object]:
    """The verdicts (and exact figures) of every criterion from whole tables: every row compared, every
    value read, dot products of every pair at offsets 1 .. 16 and at 48 further offsets."""
    make = posenc.table if compute == "exact" else naive_table
    rows = make(2 * length, d_model, dtype=dtype, **SETTING)
    first, earlier, distinct = _first_repeat(rows[:length])
    later_first = _first_repeat(rows)[0]
    tolerance = dot_product_tolerance(d_model, np.dtype(rows.dtype) if dtype != "bfloat16" else rows.dtype)
    top_low = float(np.abs(rows[:length].astype(np.float64)).max())
    top_high = float(np.abs(rows[length:].astype(np.float64)).max())

    def deviation(lo: int, hi: int) -> float:
        worst = 0.0
        f = rows[lo:hi].astype(np.float64)
        for k in [*range(1, 17), *range(17, hi - lo, max(1, (hi - lo) // 48))]:
            measured = np.einsum("ij,ij->i", f[:-k], f[k:])
            expected = properties.closed_form_dot_product(k, d_model)
            worst = max(worst, float(np.abs(measured - expected).max()))
        return worst

    again = make(length, d_model, dtype=dtype, **SETTING)
    return {
        "unique": first is None,
        "first_collision": first,
        "equals": earlier,
        "distinct": distinct,
        "consistent": bool(np.array_equal(bits(again), bits(rows[:length]))),
        "generalises": top_high <= 1.0
        and (later_first is None or later_first < length)
        and deviation(length, 2 * length) <= tolerance,
        "bounded": top_low <= 1.0,
        "max_abs": top_low,
        "deterministic": bool(np.array_equal(bits(again), bits(rows[:length]))),
        "shift_invariant": deviation(0, length) <= tolerance,
    }


@pytest.mark.parametrize(
    ("dtype", "compute"), [("float32", "exact"), ("bfloat16", "exact"), ("bfloat16", "dtype")]
)
def test_verdicts_at_50k_match_brute_force(dtype: str, compute: str) -> None:
    length, d_model = 50_000, 64
    expected = _brute_force(length, d_model, dtype, compute)
    report = check(length, d_model, dtype=dtype, compute=compute)
    found = {c.name: c for c in report.criteria}
    for name in ("unique", "consistent", "generalises", "bounded", "deterministic", "shift_invariant"):
        assert found[name].passed == expected[name], name
    assert found["unique"].data["first_collision"] == expected["first_collision"]
    assert found["unique"].data["equals"] == expected["equals"]
    assert found["unique"].data["distinct"] == expected["distinct"]
    assert found["bounded"].figure == expected["max_abs"]
    if compute == "dtype":  # the usual code in bfloat16: position 257 takes the encoding of 256
        assert (expected["first_collision"], expected["equals"]) == (257, 256)


def _held_evidence(length: int, d_model: int, dtype: str, compute: str) -> Evidence:
    """Evidence as check built it before it streamed: one array of positions 0 .. 2L - 1, hashed whole."""
    setting = {**SETTING, "dtype": np.dtype(dtype) if dtype != "bfloat16" else posenc.table(0, 2).dtype}
    setting["dtype"] = posenc.table(0, 2, dtype=dtype).dtype
    build = builder(d_model, start=0, compute=compute, **setting)
    rows = build(0, 2 * length)
    return Evidence(length, d_model, setting, compute, rows, row_hashes(rows), build)


@pytest.mark.parametrize(
    ("length", "d_model", "dtype", "compute"),
    [(50_000, 64, "float32", "exact"), (20_000, 64, "float16", "dtype"), (3_000, 33, "float16", "exact")],
)
def test_report_matches_the_held_table(length: int, d_model: int, dtype: str, compute: str) -> None:
    report = check(length, d_model, dtype=dtype, compute=compute)
    evidence = _held_evidence(length, d_model, dtype, compute)
    before = [definition.judge(evidence) for definition in CRITERIA]
    assert [(c.name, c.passed, c.figure, c.detail, c.data) for c in report.criteria] == [
        (c.name, c.passed, c.figure, c.detail, c.data) for c in before
    ]


def test_report_says_what_was_sampled() -> None:
    report = check(50_000, 64)
    assert len(report.notes) == 2
    assert "all 100,000 rows by 128-bit hashes" in report.notes[0]
    assert "consistent and bounded read every value" in report.notes[0]
    assert report.notes[1].startswith(
        "sampled: the dot products of shift_invariant and generalises, up to 4,096"
    )
    text = report.as_text()
    assert "how it was measured:" in text
    assert text.splitlines()[-1] == "all 6 criteria pass"
    assert report.as_dict()["notes"] == list(report.notes)


def test_report_says_deterministic_was_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(properties, "RECOMPUTE_WHOLE", 1 << 10)
    monkeypatch.setattr(properties, "WINDOWS", 4)
    monkeypatch.setattr(properties, "WINDOW_ROWS", 64)
    windows = properties.recomputed_windows(2000, 16)
    assert windows == [(0, 64), (968, 1032), (1936, 2000)]  # the first, the middle, the last
    report = check(2000, 16)
    assert report.passed
    assert report.notes[2] == (
        "sampled: deterministic recomputed 3 windows of 64 rows (192 of 2,000 rows, the first, the last and "
        "the middle included; each as a table of its own and inside a longer one) and 64 rows by encode, "
        "not the whole table again and in two halves"
    )


def test_large_lengths_say_deterministic_is_sampled() -> None:
    assert properties.recomputed_windows(200_000, 512) is None  # below 2**27 values: the whole table
    windows = properties.recomputed_windows(1_000_000, 512)
    assert windows is not None and len(windows) == 15 and windows[0] == (0, 4096)  # the middle is one
    assert windows[-1] == (1_000_000 - 4096, 1_000_000)
    assert (500_000 - 2048, 500_000 + 2048) in windows


def test_earliest_equal_matches_unique() -> None:
    rng = np.random.default_rng(7)
    for high in (3, 1 << 40):
        hashes = rng.integers(0, high, size=(5000, 2)).astype(np.uint64)
        keys = np.ascontiguousarray(hashes).view(np.dtype((np.void, 16))).ravel()
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        earliest, distinct = earliest_equal(hashes)
        assert earliest.tolist() == first[inverse.ravel()].tolist()
        assert distinct == len(first)


def test_key_hashes_refined_find_exactly_the_repeated_rows() -> None:
    rows = np.zeros((6, 40), np.float32)
    rows[:, -1] = [1, 2, 1, 3, 2, 4]  # equal first columns: told apart by the whole row
    rows[5, 0] = -0.0
    rows[4, 0] = 5.0  # its own key
    hashes = key_hashes(rows)
    assert refine_hashes(hashes, lambda index: rows[index]) == 5
    earliest, distinct = earliest_equal(hashes)
    assert earliest.tolist() == [0, 1, 0, 3, 4, 5]
    assert distinct == 5
    assert earliest.tolist() == earliest_equal(row_hashes(rows))[0].tolist()


@pytest.mark.parametrize(("dtype", "layout"), [("bfloat16", "interleaved"), ("float16", "sin_cos")])
def test_usual_code_collisions_match_brute_force(dtype: str, layout: str) -> None:
    found = collisions(5000, 64, dtype=dtype, layout=layout, compute="dtype", start=7)
    rows = naive_table(5000, 64, dtype=dtype, layout=layout, start=7)
    first, earlier, distinct = _first_repeat(rows)
    assert (found.first, found.earlier, found.distinct) == (7 + first, 7 + earlier, distinct)


def test_rows_read_like_the_table() -> None:
    length, d_model = 20_000, 16
    table = posenc.table(length, d_model)
    build = builder(d_model, start=0, compute="exact", **SETTING, dtype="float32")

    def fill(lo: int, hi: int, out: np.ndarray) -> np.ndarray:
        out[...] = build(lo, hi)
        return out

    rows = Rows(build, length, d_model, np.dtype(np.float32), fill=fill)
    assert np.array_equal(np.asarray(rows[100:9000]), table[100:9000])
    assert np.array_equal(rows[np.array([5, 19_999, 5, 0])], table[[5, 19_999, 5, 0]])
    other = bits(table).copy()
    other[12_345, 3] ^= 1
    assert int(np.count_nonzero(other != bits(rows))) == 1
    assert int(np.count_nonzero(bits(rows) == other)) == length * d_model - 1


@pytest.mark.parametrize(
    ("d_model", "dtype", "options"),
    [
        (64, "float32", {}),
        (64, "bfloat16", {}),
        (33, "float16", {"odd": "literal"}),
        (16, "float32", {"scale": 3.0}),
    ],
)
def test_margin_first_bounded_by_the_fastest_pairs(
    monkeypatch: pytest.MonkeyPatch, d_model: int, dtype: str, options: dict[str, object]
) -> None:
    from posenc.analysis import margin

    tight = margin.uniqueness_margin(6000, d_model, dtype=dtype, **options)
    monkeypatch.setattr(margin, "TIGHT_WORK", 0)  # every offset bounded by its 16 fastest pairs first
    assert margin.uniqueness_margin(6000, d_model, dtype=dtype, **options) == tight
    settings = {"base": 10000.0, "shift": 0.0, "scale": 1.0, "odd": "zero", **options}
    within = tight.distance + 0.01
    loose = margin.distance_lower_bounds(5999, d_model, within=within, **settings)
    exact = margin.distance_lower_bounds(5999, d_model, **settings)
    offsets = np.arange(1, 6000)
    true = properties.closed_form_distance(offsets, d_model, **settings)
    assert np.all(loose <= true + 1e-12)  # a lower bound of each exact distance
    assert np.all((loose == exact) | (loose > within))  # tight wherever it may matter


def _length_dependent(d_model: int):
    """build(lo, hi) of an encoding whose rows depend on the table's length (positions divided by it, as a
    normalised-position encoding would): the consistent criterion must fail it."""

    def build(lo: int, hi: int) -> np.ndarray:
        p = np.arange(lo, hi, dtype=np.float64)[:, None] / hi
        return np.repeat(np.sin(p), d_model, axis=1).astype(np.float32)

    return build


def test_consistent_compares_table_L_with_the_first_L_rows_of_table_2L():
    length, d_model = 16, 4
    build = _length_dependent(d_model)
    rows = np.vstack([build(0, length), build(length, 2 * length)])  # as the pass computes them: in blocks
    options = {**SETTING, "dtype": np.dtype(np.float32)}
    evidence = Evidence(length, d_model, options, "dtype", rows, key_hashes(rows), build)
    found = {c.name: c for c in CRITERIA}["consistent"].judge(evidence)
    assert not found.passed and found.figure > 0  # table(16) is not the first 16 rows of table(32)
    assert found.detail.startswith("table(16) and the first 16 rows of table(32) differ in ")


def test_consistent_past_its_memory_compares_the_longest_pair_that_fits_and_says_so(monkeypatch):
    from posenc.analysis import criteria

    monkeypatch.setattr(criteria, "PAIR_BYTES", 2 * 64 * 4 * 100)  # table(2L') of 64 float32 columns: L' 100
    report = check(300, 64)
    detail = {c.name: c for c in report.criteria}["consistent"].detail
    assert detail.startswith("table(100) and the first 100 rows of table(200) are identical bit for bit")
    assert "(L = 100, not 300: the longest pair of tables whose longer one fits in 0 MiB)" in detail
    assert "consistent and bounded read every value" not in report.notes[0]
    said = "sampled: consistent compared table(100) with the first 100 rows of table(200), not table(300)"
    assert any(note.startswith(said) for note in report.notes)


@pytest.mark.parametrize(("length", "d_model", "dtype"), [(2**17, 2, "float32"), (8, 2**17, "bfloat16")])
def test_a_check_holds_no_more_memory_than_it_asks_for_up_front(length, d_model, dtype):
    import tracemalloc

    from posenc.analysis.check import working_memory

    tracemalloc.start()
    try:
        check(length, d_model, dtype=dtype)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= working_memory(length, d_model, posenc.validation.dtype(dtype))


def test_a_check_that_needs_more_memory_than_there_is_is_refused_before_work(monkeypatch):
    monkeypatch.setattr(posenc.validation, "available_memory", lambda: 1 << 30)
    with pytest.raises(
        ValueError, match=r"length=100 with d_model=1048576 needs 1\.[0-9] GiB .* lower length"
    ):
        check(100, 2**20)  # it was killed by the system at 22 GB (the dot products' rows held at once)
