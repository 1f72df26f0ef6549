"""Near-duplicate questions: the vetting's blocked sparse / matrix pair search against the obvious pairwise loop.

    python -m benchmarks.questions.duplicates [--n 2000] [--dup-share 0.2] [--repeat 3]

N generated question texts (templated sentences with random names, a `dup-share` of them reworded copies of an
earlier one) and random unit vectors (the embedding step is the encoder's cost, measured elsewhere) go through
`questions.vet._jaccard_pairs` and `_cosine_pairs` (row blocks, sparse intersection counts, matrix products) and
through the obvious loop over all pairs (Python set Jaccard, numpy dot per pair). Both must find the same pairs;
the script prints the time of each, best of `--repeat`.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

SUBJECTS = ["the central bank", "the city council", "the national team", "the ruling party", "the regulator",
            "the union", "the festival jury", "the board of directors", "the space agency", "the court"]
VERBS = ["approve", "reject", "announce", "complete", "win", "lose", "cut", "raise", "delay", "sign"]
OBJECTS = ["the budget", "the merger", "interest rates", "the final", "the launch", "the treaty", "the strike deal",
           "the award", "the new stadium plan", "the appeal"]


def texts(n: int, dup_share: float, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    for i in range(n):
        if out and rng.random() < dup_share:
            base = rng.choice(out)
            out.append(base.replace("Will", "Will", 1).rstrip("?") + " this year?")
        else:
            name = f"{rng.choice('ABCDEFGHJKLMNPRSTVW')}{rng.randint(10, 99)}"
            out.append(f"Will {rng.choice(SUBJECTS)} of {name} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
                       f"by {rng.randint(1, 28)} {rng.choice(['March', 'April', 'May'])}?")
    return out


def naive_pairs(sets: list[frozenset], vectors: np.ndarray, jac: float, cos: float) -> set[tuple[int, int]]:
    from forecast_env.questions.vet import shingle_jaccard

    out = set()
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            if shingle_jaccard(sets[i], sets[j]) >= jac or float(vectors[i] @ vectors[j]) >= cos:
                out.add((i, j))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--dup-share", type=float, default=0.2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from forecast_env.questions.vet import _cosine_pairs, _jaccard_pairs, shingles

    qs = texts(args.n, args.dup_share)
    sets = [shingles(q) for q in qs]
    rng = np.random.default_rng(0)
    vec = rng.normal(size=(args.n, 384)).astype(np.float32)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    best = {"blocked": float("inf"), "naive": float("inf")}
    found = {}
    for _ in range(args.repeat):
        t = time.perf_counter()
        fast = {(i, j) for i, j, _ in _jaccard_pairs(sets, 0.6)} | {(i, j) for i, j, _ in _cosine_pairs(vec, 0.85)}
        best["blocked"] = min(best["blocked"], time.perf_counter() - t)
        t = time.perf_counter()
        slow = naive_pairs(sets, vec, 0.6, 0.85)
        best["naive"] = min(best["naive"], time.perf_counter() - t)
        found = {"blocked": len(fast), "naive": len(slow), "same": fast == slow}
    print({"n": args.n, "pairs": found, "seconds": {k: round(v, 3) for k, v in best.items()},
           "speedup": round(best["naive"] / best["blocked"], 1)})
    assert found["same"], "the blocked search and the pairwise loop disagree"


if __name__ == "__main__":
    main()
