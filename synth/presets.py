"""Sizes of the sample worlds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """How big a sample world is. Planted events and pages are always present (`plant_copies` each)."""

    name: str
    n_train: int  # good events inside the train window
    n_eval: int  # good events inside the eval window
    plant_copies: int  # copies of each planted (excluded) event kind
    articles_per_event: tuple[int, int]  # min, max news articles per event
    n_distractors: int  # unrelated articles
    records_per_warc: int  # response records per WARC file
    bench_articles: int = 0  # > 0: write the article store directly (Parquet), no WARC files
    max_days: int = 40  # longest good event, in days
    #: cross-question exposure plants (synth/exposure_plants.py): "" none, "design" or "held_out" phrasings
    exposure_plants: str = ""
    #: per good (non-planted) event: articles that report its outcome after it closes (synth/corpus.py `outcome_docs`)
    outcome_reports: int = 0


PRESETS: dict[str, Preset] = {
    "micro": Preset("micro", n_train=3, n_eval=4, plant_copies=1, articles_per_event=(8, 12),
                    n_distractors=70, records_per_warc=90, max_days=24),
    "tiny": Preset("tiny", n_train=30, n_eval=34, plant_copies=1, articles_per_event=(20, 28),
                   n_distractors=1000, records_per_warc=300, max_days=40),
    # the one-world acceptance gate of `make test` (tests/eval/test_acceptance.py): as many events as `tiny`, few
    # distractors and short news, so that it builds in a fraction of the time
    "gate": Preset("gate", n_train=30, n_eval=34, plant_copies=0, articles_per_event=(10, 14),
                   n_distractors=150, records_per_warc=250, max_days=28),
    "small": Preset("small", n_train=85, n_eval=90, plant_copies=2, articles_per_event=(60, 80),
                    n_distractors=6500, records_per_warc=500, max_days=45),
    # cross-question exposure plants (follow-ups naming open questions' answers, neutral mentions): the phrasings the
    # build's cue list was designed on, and held-out ones to report it on (tests/envs/events/test_exposure.py)
    "siblings": Preset("siblings", n_train=14, n_eval=14, plant_copies=0, articles_per_event=(8, 12),
                       n_distractors=100, records_per_warc=250, max_days=30, exposure_plants="design"),
    "siblings_heldout": Preset("siblings_heldout", n_train=14, n_eval=14, plant_copies=0, articles_per_event=(8, 12),
                               n_distractors=100, records_per_warc=250, max_days=30, exposure_plants="held_out"),
    # the design phrasings on more events and a light corpus: enough follow-up exposures in both splits for audit check
    # 6's probe to have power (the 14 + 14 of `siblings` leave too few exposed dates; benchmarks/log/2026-12-01-cross-question-exposure.md)
    "siblings_large": Preset("siblings_large", n_train=40, n_eval=40, plant_copies=0, articles_per_event=(2, 3),
                             n_distractors=20, records_per_warc=250, max_days=30, exposure_plants="design"),
    # outcome reports: two articles per good event, 6 h to 4 days after its close, stating the realised outcome, so
    # that questions generated from the news can be resolved from it and graded against the truth
    "questions": Preset("questions", n_train=8, n_eval=8, plant_copies=0, articles_per_event=(6, 9),
                        n_distractors=60, records_per_warc=250, max_days=30, outcome_reports=2),
    # the question pipeline at a size its audit probes and the baselines can read (benchmarks/questions/pipeline_cost.py)
    "questions_large": Preset("questions_large", n_train=40, n_eval=40, plant_copies=0, articles_per_event=(6, 9),
                              n_distractors=200, records_per_warc=250, max_days=30, outcome_reports=2),
    "bench": Preset("bench", n_train=3, n_eval=3, plant_copies=0, articles_per_event=(30, 40),
                    n_distractors=0, records_per_warc=0, bench_articles=1_000_000, max_days=40),
}
