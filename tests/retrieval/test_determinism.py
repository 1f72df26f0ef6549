"""Same dense answers on any machine (issue 31 item 1): one child process per setting (FAISS reads
FAISS_SIMD_LEVEL, OpenMP and OpenBLAS their variables at load), months past FAISS's database-parallel
size (flat float32 12,000 rows, float16 11,000, IVF sq8 12,000) with exact and near duplicates; every
answer's ids, order and score bits must equal the reference setting's (benchmarks/retrieval/determinism.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.retrieval import determinism as bd
from forecast_env.retrieval.ann import fixed_dot

#: the reference setting: one thread, this CPU's highest FAISS SIMD level (AVX512 where it has it), so the
#: guarantee runs on any x86 CPU with at least two levels (AVX2 and NONE) instead of skipping without AVX512
REFERENCE_LEVEL = next(lvl for lvl in ("AVX512", "AVX2", "NONE") if not bd.cpu_levels()[lvl])
REFERENCE = {"OMP_NUM_THREADS": "1", "FAISS_SIMD_LEVEL": REFERENCE_LEVEL, "OPENBLAS_NUM_THREADS": "1"}


def runnable(envs: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, str]]:
    """The settings whose SIMD level this CPU has, and the levels skipped with the reason."""
    levels = bd.cpu_levels()
    skipped = {lvl: why for lvl, why in levels.items() if why}
    return [e for e in envs if not levels[e["FAISS_SIMD_LEVEL"]]], skipped


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory) -> Path:
    return bd.make_fixture(tmp_path_factory.mktemp("determinism"), dim=96, light=True)


def test_fixed_dot_is_one_number_whatever_the_order():
    """The deterministic score does not depend on the order of the dimensions (an integer sum), and is
    within d * 2^-40 of the exact inner product."""
    rng = np.random.default_rng(0)
    x = bd.month_vectors(50, 1, 384)
    q = bd._unit(rng.standard_normal((1, 384)))[0]
    perm = rng.permutation(384)
    a, b = fixed_dot(x, q), fixed_dot(x[:, perm], q[perm])
    assert a.tobytes() == b.tobytes()
    exact = [sum(float(u) * float(v) for u, v in zip(row, q)) for row in x]  # float64, close to exact
    assert np.max(np.abs(a - np.asarray(exact))) < 384 * 2.0 ** -40 + 1e-13


def test_threads_and_simd_levels_give_the_same_dense_answers(fixture_dir):
    """OMP threads 1 vs 8, FAISS SIMD levels AVX512 (where the CPU has it) / AVX2 / NONE, OpenBLAS Nehalem kernels: identical
    ids, order and score bits for one-query and batched searches, k = 10 and 50, whole, partial and
    hidden-row ranges. Reports which levels ran."""
    envs, skipped = runnable([
        REFERENCE,
        REFERENCE | {"OMP_NUM_THREADS": "8"},
        REFERENCE | {"FAISS_SIMD_LEVEL": "NONE", "OMP_NUM_THREADS": "2"},
        REFERENCE | {"FAISS_SIMD_LEVEL": "AVX2", "OMP_NUM_THREADS": "8", "OPENBLAS_CORETYPE": "Nehalem"},
    ])
    if len(envs) < 2 or envs[0] != REFERENCE:
        pytest.skip(f"this CPU runs too few FAISS SIMD levels: {skipped}")
    ran = sorted({e["FAISS_SIMD_LEVEL"] for e in envs})
    print(f"SIMD levels run: {ran}; skipped: {skipped or 'none'}")
    ref = bd.run_probe(fixture_dir, envs[0])
    assert ref["_env"]["simd"] == REFERENCE_LEVEL and len(ref["dense_one_k10"]) == 40
    for env in envs[1:]:
        got = bd.run_probe(fixture_dir, env)
        assert got["_env"]["simd"] == env["FAISS_SIMD_LEVEL"]  # the level really was forced
        bad = {name: v for name, v in bd.diff(ref, got).items()
               if v["other_ids"] or v["other_order"] or v["other_scores"]}
        assert not bad, (env, bad)


def test_the_probe_sees_the_differences_of_float32_scoring(fixture_dir):
    """The same probe with today's FAISS float32 scores (exact=False): another SIMD level changes scores
    (so the test above would fail if the deterministic scoring were not used)."""
    envs, skipped = runnable([REFERENCE, REFERENCE | {"FAISS_SIMD_LEVEL": "NONE"}])
    if len(envs) < 2:
        pytest.skip(f"this CPU runs too few FAISS SIMD levels: {skipped}")
    ref = bd.run_probe(fixture_dir, envs[0], exact=False)
    got = bd.run_probe(fixture_dir, envs[1], exact=False)
    assert sum(v["other_scores"] for v in bd.diff(ref, got).values()) > 0


@pytest.mark.benchmark
def test_full_matrix(tmp_path):
    """Every setting of benchmarks.retrieval.determinism's matrix (threads 1 / 2 / 8, SIMD levels, OpenBLAS threads and
    core types; onnx and static query encoders; BM25, dense and hybrid through Searcher): 0 differences."""
    d = bd.make_fixture(tmp_path / "full")
    report = bd.matrix(d, full=True)
    assert report["runs"] and bd.differing(report) == 0, report
