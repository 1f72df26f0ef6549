"""MinHash signatures: our vectorized MinHasher vs datasketch.MinHash.update_batch (same hash, same values).

usage: python -m benchmarks.corpus.minhash_speed [n_docs] [words_per_doc]
"""

from __future__ import annotations

import random
import sys
import time

import datasketch
import numpy as np

from forecast_env.corpus_build.dedup import MinHasher, shingle_words


def main(n: int = 1000, words: int = 500) -> None:
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(20000)]
    texts = [" ".join(rng.choice(vocab) for _ in range(words)) for _ in range(n)]
    print(f"{n} docs x {words} words, 128 permutations, word 5-grams, 1 core")
    print(f"{'scheme':10s} {'hash':5s} {'ours docs/s':>12s} {'datasketch docs/s':>18s} {'speedup':>8s} equal")
    for scheme in ("legacy", "affine32"):
        for hname in ("fast", "sha1"):
            hasher = MinHasher(128, 1, scheme, hname)
            t0 = time.perf_counter()
            ours = [hasher.signature(t) for t in texts]
            t_ours = time.perf_counter() - t0
            m = min(n, 300)
            t0 = time.perf_counter()
            ref = []
            for t in texts[:m]:
                w = shingle_words(t)
                mh = datasketch.MinHash(num_perm=128, seed=1, hashfunc=hasher.hashfunc(), scheme=scheme)
                mh.update_batch([" ".join(w[i : i + 5]).encode() for i in range(len(w) - 4)])
                ref.append(mh.hashvalues)
            t_ref = (time.perf_counter() - t0) * n / m
            equal = all(np.array_equal(a.astype(np.uint64), b) for a, b in zip(ref, ours))
            print(f"{scheme:10s} {hname:5s} {n / t_ours:12.0f} {n / t_ref:18.0f} {t_ref / t_ours:8.1f} {equal}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
