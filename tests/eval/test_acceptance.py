"""The acceptance gate is honest: the agent does not read with the generator's words, and reading the news
beats the blind uniform forecast on a world whose phrasing the agent never saw (docs/design.md §7).

* The two phrasing banks of the sample world share no content word.
* The retrieval agent's cue lexicon is the Pattern polarity lexicon shipped in the `textblob` wheel, nothing
  added: a cue phrase (or a word) of a bank copied into the agent fails
  `test_agent_reads_bank_phrases_only_through_general_words`.
* One world (make test) and three worlds (make bench): retrieval - uniform Brier, event-clustered 95%
  bootstrap interval below 0.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks.envs import acceptance  # one home for building the worlds and the figures
from forecast_env.agents import retrieval
from forecast_env.agents.lexicon import MIN_POLARITY, NEGATORS, cue_lexicon, lexicon_path, pattern_lexicon
from forecast_env.synth import phrasing
from forecast_env.synth.phrasing import BANK_B, content_words, expansions
from forecast_env.synth.presets import PRESETS
from forecast_env.synth.prose import event_article
from forecast_env.synth.scenarios import SCENARIOS
from forecast_env.synth.world import build_events


def _bank_a_templates() -> list[str]:
    return [t for sc in SCENARIOS for t in (*sc.yes, *sc.no, *sc.pro, *sc.headlines)]


def test_phrasing_banks_share_no_content_word():
    a = content_words(_bank_a_templates())
    b = content_words(phrasing.all_cue_templates(BANK_B) + list(BANK_B.headlines))
    assert len(a) > 300 and len(b) > 60
    assert not a & b, sorted(a & b)


def test_agent_lexicon_is_the_general_resource_unchanged():
    """The agent's cue table is the shipped Pattern file, re-read here independently: per word form the
    mean polarity of its senses, single words with |mean| >= MIN_POLARITY, negators left out."""
    import xml.etree.ElementTree as ET
    from collections import defaultdict
    from importlib.util import find_spec

    path = lexicon_path()
    assert path.parent.parent == Path(next(iter(find_spec("textblob").submodule_search_locations)))
    senses = defaultdict(list)
    for w in ET.parse(path).getroot().iter("word"):
        senses[w.get("form").lower()].append(float(w.get("polarity")))
    assert len(senses) > 1400 and sum(map(len, senses.values())) > 2800  # the shipped file, not a hand-made list
    shipped = {f: sum(v) / len(v) for f, v in senses.items()}
    assert pattern_lexicon() == shipped
    lex = cue_lexicon()
    expected = {w: v for w, v in shipped.items()
                if re.fullmatch(r"[a-z][a-z'-]*", w) and abs(v) >= MIN_POLARITY and w not in {"no", "not", "never",
                                                                                            "hardly", "nor", "without"}}
    assert lex == expected
    assert lex == retrieval._CUE_WEIGHT  # what the agent actually uses
    assert not {n for n in NEGATORS if " " not in n} & set(lex)


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'’-]+", text)


@pytest.mark.parametrize("bank", ["a", "b"])
def test_agent_reads_bank_phrases_only_through_general_words(bank):
    """On every cue phrase of the evaluation bank the agent's balance is what the lexicon's words give, word
    by word: adding a phrase (or a word the lexicon lacks) of the bank to the agent changes some balance here."""
    lex = cue_lexicon()
    phrases = BANK_B.cue_phrases() if bank == "b" else {
        p for t in (t for sc in SCENARIOS for t in (*sc.yes, *sc.no, *sc.pro)) for p in expansions(t)}
    assert len(phrases) > 25
    for p in phrases:
        plain = re.sub(r"\$\{\w+\}", "X", p)
        words = _words(plain)
        expected = 0.0
        for i, w in enumerate(words):
            weight = lex.get(w.lower())
            if weight is not None:
                negated = any(n in {x.lower() for x in words[max(0, i - 3):i]} for n in ("not", "no", "never",
                                                                                        "hardly", "nor", "without"))
                expected += -weight if negated else weight
        assert retrieval.cue_balance(plain) == pytest.approx(expected, abs=1e-12), p
    unknown = {w.lower() for p in BANK_B.cue_phrases() for w in _words(p)} - set(pattern_lexicon())
    assert unknown and not unknown & set(retrieval._CUE_WEIGHT)


@pytest.mark.parametrize("bank", ["a", "b"])
def test_world_writes_its_evidence_with_its_bank(bank):
    """A bank-b world's event news carries bank-b cues and none of the scenario pools' directional
    sentences; a bank-a world's news carries no bank-b cue."""
    events = [e for e in build_events(PRESETS["micro"], 0, phrasing=bank) if not e.plant]
    b_cues = BANK_B.cue_phrases()
    pool_sentences = {x for sc in SCENARIOS for t in (*sc.yes, *sc.no, *sc.pro) for x in expansions(t) if "${" not in x}
    pool_words = content_words([t for sc in SCENARIOS for t in (*sc.yes, *sc.no, *sc.pro)])
    seen_b = 0
    for ev in events:
        k = len(ev.options)
        for frac in (0.1, 0.9):
            text = event_article(random.Random(frac), ev.scenario, ev.facts, np.full(k, 1 / k), frac)
            low = "\n".join([text.title, *text.paragraphs]).lower()
            hits = sum(c in low for c in b_cues)
            seen_b += hits
            if bank == "a":
                assert hits == 0
            if bank == "b":
                assert not any(x in low for x in pool_sentences)
    assert (seen_b > len(events)) if bank == "b" else seen_b == 0
    assert pool_words  # the pools exist (bank a)


def test_default_bank_follows_the_seed():
    assert [phrasing.default_bank(s) for s in range(4)] == ["a", "b", "a", "b"]
    with pytest.raises(ValueError, match="unknown phrasing bank 'c'"):
        phrasing.check_bank("c")


@pytest.mark.slow
@pytest.mark.timeout(1800)  # builds a world: a few minutes on 2 idle cores, much longer on a shared machine
def test_retrieval_beats_uniform_on_one_world(gate_events, gate_episode_forecasts):
    """The one-world gate of `make test`: on the `gate` world of conftest's GATE_SEED (64 events, train and
    eval: no agent here is fitted), retrieval - uniform (Brier, event-clustered 95% interval) lies below 0.
    The world and its run are session fixtures (tests/conftest.py), built once per run."""
    fig = acceptance.figures(gate_episode_forecasts)
    assert fig["n_events"] >= 60, fig
    assert acceptance.verdict([(f"gate world {gate_events.parent.name}", fig)]) == [], fig


@pytest.mark.benchmark  # three gate worlds: many minutes on 2 cores (benchmarks/log/2026-11-30-acceptance.md)
@pytest.mark.timeout(5400)
def test_acceptance_three_worlds(capsys):
    """`make bench`: gate worlds of seeds 0, 1, 2 (banks a, b, a); retrieval beats uniform in each, and the
    pooled interval lies below 0 (the benchmark script's own verdict; it prints the RESULTS.md table)."""
    with capsys.disabled():
        assert acceptance.main(["--preset", "gate", "--seeds", "0,1,2", "--split", "all"]) == 0
