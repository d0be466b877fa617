"""Harvest "near-midpoint" test cases from the exact core and write them to tests/data/near_midpoints.json.

    .venv/bin/python scripts/harvest_near_midpoints.py                 # rewrites the committed file (~2 min)
    .venv/bin/python scripts/harvest_near_midpoints.py --max-kb 0      # no size budget: ~40/15 per set

A near-midpoint case is a position whose exact sin/cos value in some column lies very close to a rounding
midpoint of the output format (halfway between two adjacent float32, float16 or bfloat16 values): the
hardest roundings, those on which an algorithm that is only *nearly* exact goes wrong. A new implementation
of the algorithm (the portable one, a kernel) can be checked against these rows bit for bit.

How: for each option set of ``OPTION_SETS`` the core encodes many positions in float64 (within ~1 ulp):
the integers 0 .. 200000, random integers with |p| < 2**31, random float32 timesteps in [0, 1000] and a
few random float64 reals below 2**31. The distance of every value from the nearest midpoint of each format
is read off its float64 bits, and the nearest (position, column) pairs are kept. Each is then evaluated
in mpmath at 60 digits: its true distance ranks it, and the whole row of every stored case is rounded
from mpmath and compared with ``posenc.encode`` in that dtype; a disagreement is reported (and the script
exits with status 1). Position 0, 1, ±(2**31 - 1), 0.5, float32(999.999) and 1e-6 are stored too, as
ordinary cases, for the narrowest option sets.

Every stored row is a full ``posenc.encode([position], d_model, ...)[0]``, so the rows of the wide option
sets are large (a float32 row of width 1024 is ~11 kB of JSON). ``--max-kb`` (default 145) shares that
many kilobytes out among the (option set, dtype) pairs, in proportion to their caps ``--float32-count`` /
``--half-count`` (40 / 15 cases per pair), at least one case each: the narrow option sets keep many cases,
the widest only their nearest one or two. Without the budget the file would be ~1.5 MB. The scan takes
~100 s on 2 cores (``--values-per-set`` sets its size); the output is deterministic for a given
``--seed``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import ml_dtypes
import mpmath
import numpy as np

import posenc

OUTPUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "near_midpoints.json"

# (d_model, base, shift, scale, layout); odd="zero" throughout.
OPTION_SETS = [
    (512, 10000, 0, 1, "interleaved"),
    (320, 10000, 1, 1, "sin_cos"),
    (1024, 10000, 0, 1, "interleaved"),
    (64, 10000, 1, 1, "cos_sin"),
    (128, 500000.0, 0, 1, "sin_cos"),
    (256, 10000, 0, 1000.0, "interleaved"),
]
# (significand bits incl. the implicit one, smallest normal exponent, NumPy dtype, bit-pattern view).
FORMATS = {
    "float32": (24, -126, np.dtype(np.float32), np.uint32),
    "float16": (11, -14, np.dtype(np.float16), np.uint16),
    "bfloat16": (8, -126, np.dtype(ml_dtypes.bfloat16), np.uint16),
}
ORDINARY = [0, 1, 2**31 - 1, -(2**31 - 1), 0.5, float(np.float32(999.999)), 1e-6]
ORDINARY_SETS = 1  # the ordinary positions go with this many of the narrowest option sets
RANGE_END = 200_000  # every integer 0 .. RANGE_END - 1 is scanned
VALUES_PER_SET = 300_000_000  # random positions per option set and kind: this many values / d_model
FLOAT64_REALS = 2_000  # random float64 positions per option set
CANDIDATES = 48  # nearest (position, column) pairs kept per option set, dtype and kind for mpmath
BLOCK_VALUES = 1 << 21  # values encoded at once
DIGITS = 60


class Candidate(NamedTuple):
    position: int | float
    column: int
    estimate: float  # relative distance from the midpoint, from the float64 value


class Case(NamedTuple):
    options: tuple[Any, ...]
    dtype: str
    position: int | float
    column: int
    distance: float
    bits: list[int]
    ordinary: bool = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--seed", type=int, default=20240607)
    parser.add_argument("--max-kb", type=float, default=145.0, help="size budget of the file; 0: none")
    parser.add_argument("--float32-count", type=int, default=40, help="most near cases per set, float32")
    parser.add_argument("--half-count", type=int, default=15, help="most near cases per set, 16-bit")
    parser.add_argument("--values-per-set", type=int, default=VALUES_PER_SET)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    pools: dict[tuple[int, str], list[Case]] = {}
    failures: list[str] = []
    for number, options in enumerate(OPTION_SETS):
        candidates = scan(options, rng, args.values_per_set)
        for dtype, kinds in candidates.items():
            ranked = rank(options, dtype, kinds)
            pools[number, dtype] = ranked
        print(f"{options}: scanned ({time.perf_counter() - start:.0f} s)", file=sys.stderr)

    caps = {dtype: args.float32_count if dtype == "float32" else args.half_count for dtype in FORMATS}
    chosen = allocate(pools, caps, args.max_kb * 1000 - ordinary_bytes())
    cases = [case for key in sorted(chosen) for case in chosen[key]]
    narrowest = sorted(range(len(OPTION_SETS)), key=lambda k: OPTION_SETS[k][0])[:ORDINARY_SETS]
    for number in narrowest:
        for dtype in FORMATS:
            cases.extend(ordinary_case(OPTION_SETS[number], dtype, p) for p in ORDINARY)
    for case in cases:
        failures.extend(verify(case))

    write(args.output, cases, args)
    size = args.output.stat().st_size
    print(f"wrote {len(cases)} cases, {size / 1000:.1f} kB, to {args.output}", file=sys.stderr)
    for dtype in FORMATS:
        near = [c.distance for c in cases if c.dtype == dtype and not c.ordinary]
        print(f"  {dtype}: {len(near)} near cases, nearest {min(near):.3g}", file=sys.stderr)
    print(f"  in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    for failure in failures:
        print("DISAGREEMENT:", failure, file=sys.stderr)
    return 1 if failures else 0


# --- the scan ----------------------------------------------------------------------------------------


def scan(options: tuple[Any, ...], rng: np.random.Generator, values_per_set: int) -> dict[str, dict]:
    """The nearest candidates of each dtype and position kind ("integer", "real") for one option set."""
    d_model = options[0]
    count = max(1, values_per_set // d_model)
    sources = {
        "integer": [
            np.arange(RANGE_END, dtype=np.int64),
            rng.integers(-(2**31 - 1), 2**31, size=count, dtype=np.int64),
        ],
        "real": [
            rng.uniform(0.0, 1000.0, size=count).astype(np.float32).astype(np.float64),
            rng.uniform(0.0, 2.0**31, size=FLOAT64_REALS),
        ],
    }
    best: dict[str, dict] = {dtype: {} for dtype in FORMATS}
    step = max(1, BLOCK_VALUES // d_model)
    pool = ThreadPoolExecutor(len(FORMATS))  # NumPy releases the GIL: the dtypes share the cores
    for kind, arrays in sources.items():
        positions = np.concatenate(arrays)
        found: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {dtype: [] for dtype in FORMATS}
        for lo in range(0, len(positions), step):
            block = positions[lo : lo + step]
            values = encode(block, options, "float64").reshape(-1)

            def nearest(dtype: str, values: np.ndarray = values) -> tuple[np.ndarray, np.ndarray]:
                distance = midpoint_distance(values, *FORMATS[dtype][:2])
                where = np.argpartition(distance, CANDIDATES)[:CANDIDATES]
                return distance[where], where

            for dtype, (distance, where) in zip(FORMATS, pool.map(nearest, FORMATS), strict=True):
                rows, columns = np.divmod(where, d_model)
                found[dtype].append((distance, block[rows], columns))
        for dtype, parts in found.items():
            distance, where, columns = (np.concatenate(part) for part in zip(*parts, strict=True))
            order = np.argsort(distance, kind="stable")
            picked: list[Candidate] = []
            seen: set[float] = set()
            for k in order:
                if float(where[k]) in seen:
                    continue  # one column per position: a second would store the same row again
                seen.add(float(where[k]))
                position = int(where[k]) if kind == "integer" else float(where[k])
                picked.append(Candidate(position, int(columns[k]), float(distance[k])))
                if len(picked) == CANDIDATES:
                    break
            best[dtype][kind] = picked
    pool.shutdown()
    return best


def midpoint_distance(values: np.ndarray, precision: int, emin: int) -> np.ndarray:
    """Relative distance of each float64 value from the nearest rounding midpoint of a binary format with
    ``precision`` significant bits and smallest normal exponent ``emin``, read off the float64 bits.

    The float64 significand keeps 53 bits; the format keeps ``precision`` of them (fewer below 2**emin),
    so the rest, the *tail*, is a midpoint exactly when it is 100...0. Its distance from that pattern, over
    the significand, is the relative distance from the midpoint. Zero comes out far (512) from any.
    """
    bits = np.abs(values).view(np.uint64)
    significand = ((bits & np.uint64((1 << 52) - 1)) | np.uint64(1 << 52)).astype(np.float64)
    distance = _tail_distance(bits, 53 - precision) / significand
    # Below 2**emin the format keeps fewer bits (subnormals): redo those few with their own tails.
    small = np.flatnonzero(bits < np.uint64((emin + 1023) << 52))
    if small.size:
        below = emin + 1023 - (bits[small] >> np.uint64(52)).astype(np.int64)
        lost = np.minimum(53 - precision + below, 62).astype(np.uint64)
        distance[small] = _tail_distance(bits[small], lost) / significand[small]
    return distance


def _tail_distance(bits: np.ndarray, lost: Any) -> np.ndarray:
    """|tail - 100...0| of the low ``lost`` bits of each pattern (``lost`` a scalar or an array)."""
    one = np.uint64(1)
    lost = np.asarray(lost, dtype=np.uint64)
    tail = (bits & ((one << lost) - one)).astype(np.int64)
    return np.abs(tail - (one << (lost - one)).astype(np.int64))


def encode(positions: Any, options: tuple[Any, ...], dtype: str) -> np.ndarray:
    d_model, base, shift, scale, layout = options
    return posenc.encode(
        positions, d_model, base=base, shift=shift, scale=scale, layout=layout, odd="zero", dtype=dtype
    )


# --- exact values -------------------------------------------------------------------------------------


def exact_row(options: tuple[Any, ...], position: int | float) -> list[mpmath.mpf]:
    """The exact row (to ~60 digits): sin/cos of p ω_i placed as ``layout`` says; odd widths end in 0."""
    d_model, layout = options[0], options[4]
    n = d_model // 2
    row = [mpmath.mpf(0)] * d_model
    with mpmath.workdps(DIGITS):
        p = mpmath.mpf(position)
        for i in range(n):
            angle = p * frequency(options, i)
            sin, cos = mpmath.sin(angle), mpmath.cos(angle)
            if layout == "interleaved":
                row[2 * i], row[2 * i + 1] = sin, cos
            elif layout == "sin_cos":
                row[i], row[n + i] = sin, cos
            else:
                row[i], row[n + i] = cos, sin
    return row


def exact_value(options: tuple[Any, ...], position: int | float, column: int) -> mpmath.mpf:
    """One column of :func:`exact_row`."""
    d_model, layout = options[0], options[4]
    n = d_model // 2
    if column >= 2 * n:
        return mpmath.mpf(0)
    if layout == "interleaved":
        i, sine = column // 2, column % 2 == 0
    else:
        i, sine = column % n, (column < n) == (layout == "sin_cos")
    with mpmath.workdps(DIGITS):
        angle = mpmath.mpf(position) * frequency(options, i)
        return mpmath.sin(angle) if sine else mpmath.cos(angle)


def frequency(options: tuple[Any, ...], i: int) -> mpmath.mpf:
    """ω_i = scale · base ** (-i / (n - shift)) in the current mpmath precision."""
    d_model, base, shift, scale, _ = options
    exponent = -mpmath.mpf(i) / (d_model // 2 - mpmath.mpf(shift))
    return mpmath.mpf(scale) * mpmath.power(mpmath.mpf(base), exponent)


def round_exact(value: mpmath.mpf, dtype: str) -> tuple[float, float]:
    """``value`` correctly rounded (to nearest, ties to even) to ``dtype``, and its relative distance from
    the nearest rounding midpoint."""
    precision, emin = FORMATS[dtype][:2]
    if value == 0:
        return 0.0, 1.0
    with mpmath.workdps(DIGITS):
        sign, magnitude = (-1.0 if value < 0 else 1.0), abs(value)
        exponent = int(mpmath.frexp(magnitude)[1])  # magnitude in [2**(exponent-1), 2**exponent)
        quantum = max(exponent, emin + 1) - precision
        scaled = mpmath.ldexp(magnitude, -quantum)
        below = mpmath.floor(scaled)
        fraction = scaled - below
        if abs(fraction - mpmath.mpf(0.5)) < mpmath.mpf(10) ** (-DIGITS + 15):
            raise ArithmeticError(f"{value} is too near a midpoint for {DIGITS} digits")
        midpoint = below + mpmath.mpf(0.5)
        distance = float(abs(scaled - midpoint) / abs(midpoint))
        # The nearest midpoint may lie in the binade below (value just above a power of two).
        if fraction < mpmath.mpf(0.5) and below == 2 ** (precision - 1) and exponent > emin + 1:
            distance = min(distance, float(abs(scaled - (below - mpmath.mpf(0.25))) / (below - 0.25)))
        rounded = below + 1 if fraction > mpmath.mpf(0.5) else below
        return sign * math.ldexp(float(rounded), quantum), distance


def bit_patterns(values: list[float] | np.ndarray, dtype: str) -> list[int]:
    _, _, np_dtype, view = FORMATS[dtype]
    return np.asarray(values, dtype=np.float64).astype(np_dtype).view(view).tolist()


# --- choosing and checking -----------------------------------------------------------------------------


def rank(options: tuple[Any, ...], dtype: str, kinds: dict[str, list[Candidate]]) -> list[Case]:
    """The candidates of one option set and dtype by their true distance, integers and reals taking turns
    (the nearest first), as cases with the row the core computes."""
    lists = []
    for candidates in kinds.values():
        scored = []
        for candidate in candidates:
            _, distance = round_exact(exact_value(options, candidate.position, candidate.column), dtype)
            scored.append((distance, candidate))
        scored.sort(key=lambda item: item[0])
        lists.append(scored)
    lists.sort(key=lambda scored: scored[0][0])
    merged = [item for pair in zip(*lists, strict=False) for item in pair]
    rows = encode([c.position for _, c in merged], options, dtype)
    return [
        Case(options, dtype, c.position, c.column, distance, bit_patterns(row, dtype))
        for (distance, c), row in zip(merged, rows, strict=True)
    ]


def case_bytes(case: Case) -> int:
    return len(case_json(case)) + 2


def ordinary_bytes() -> int:
    """An estimate of the bytes of the ordinary cases (their rows, at the widest bit patterns)."""
    narrowest = sorted(d for d, *_ in OPTION_SETS)[:ORDINARY_SETS]
    per_value = {"float32": 11, "float16": 6, "bfloat16": 6}
    return sum(len(ORDINARY) * (d * per_value[dtype] + 190) for d in narrowest for dtype in FORMATS)


def allocate(pools: dict[tuple[int, str], list[Case]], caps: dict[str, int], budget: float) -> dict:
    """Share ``budget`` bytes out among the (option set, dtype) pairs in proportion to their dtype's cap:
    each pair keeps its nearest cases that fit in its share (at least one, at most the cap); no budget
    (<= 0) keeps the caps."""
    keep = {key: cases[: caps[key[1]]] for key, cases in pools.items()}
    if budget <= 0:
        return keep

    def take(share: float) -> dict:
        result = {}
        for key, cases in keep.items():
            total, count = 0, 0
            for case in cases:
                total += case_bytes(case)
                if total > share * caps[key[1]] and count:
                    break
                count += 1
            result[key] = cases[:count]
        return result

    def size(chosen: dict) -> int:
        return sum(case_bytes(c) for cases in chosen.values() for c in cases)

    low, high = 0.0, budget
    for _ in range(40):  # bisect the largest share (bytes per unit of cap) that fits the budget
        middle = (low + high) / 2
        low, high = (middle, high) if size(take(middle)) <= budget else (low, middle)
    return take(low)


def ordinary_case(options: tuple[Any, ...], dtype: str, position: int | float) -> Case:
    """An ordinary position's row; its column is the one nearest to a midpoint."""
    row = encode([position], options, dtype)[0]
    distances = [round_exact(value, dtype)[1] for value in exact_row(options, position)]
    column = int(np.argmin(distances))
    bits = bit_patterns(row, dtype)
    return Case(options, dtype, position, column, distances[column], bits, ordinary=True)


def verify(case: Case) -> list[str]:
    """Compare the stored row (the core's) with the mpmath row correctly rounded, column by column."""
    rounded = [round_exact(value, case.dtype)[0] for value in exact_row(case.options, case.position)]
    expected = bit_patterns(rounded, case.dtype)
    return [
        f"{case.options} {case.dtype} position {case.position!r} column {k}: core {got:#x}, mpmath {want:#x}"
        for k, (got, want) in enumerate(zip(case.bits, expected, strict=True))
        if got != want
    ]


# --- output --------------------------------------------------------------------------------------------


def case_json(case: Case) -> str:
    d_model, base, shift, scale, layout = case.options
    position = case.position if isinstance(case.position, int) else {"hex": float(case.position).hex()}
    item = {
        "d_model": d_model,
        "base": base,
        "shift": shift,
        "scale": scale,
        "layout": layout,
        "dtype": case.dtype,
        "position": position,
        "column": case.column,
        "distance": float(f"{case.distance:.3g}"),
        "bits": case.bits,
    }
    return json.dumps(item, separators=(",", ":"))


ABOUT = (
    "Near-midpoint cases harvested from posenc's exact core by scripts/harvest_near_midpoints.py "
    "(rerun: .venv/bin/python scripts/harvest_near_midpoints.py). Each case is one row "
    "posenc.encode([position], d_model, base=base, shift=shift, scale=scale, layout=layout, odd='zero', "
    "dtype=dtype)[0], stored as its raw bit patterns ('bits': uint32 for float32, uint16 for float16 and "
    "bfloat16). 'position' is an integer (|p| < 2**31) or a real given exactly as {'hex': float.hex()} "
    "of a float64. 'column' is the column whose exact value lies nearest to a rounding midpoint of the "
    "dtype (halfway between two adjacent representable values) and 'distance' that relative distance "
    "|exact - midpoint| / |midpoint| (from mpmath at 60 digits; for the ordinary positions 0, 1, "
    "+-(2**31 - 1), 0.5, float32(999.999) and 1e-6 it is just the row's nearest column). Every row was "
    "checked column by column against sin/cos of p * scale * base**(-i / (d_model // 2 - shift)) in "
    "mpmath at 60 digits, correctly rounded (ties to even). To keep the file small, the wide option "
    "sets keep only their nearest few cases."
)


def write(path: Path, cases: list[Case], args: argparse.Namespace) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    about = json.dumps(f"{ABOUT} Seed {args.seed}.")
    lines = ",\n".join(case_json(case) for case in cases)
    path.write_text(f'{{"about": {about},\n"cases": [\n{lines}\n]}}\n')


if __name__ == "__main__":
    sys.exit(main())
