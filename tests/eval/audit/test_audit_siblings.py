"""Audit check 6 `siblings` (docs/design.md §8): FAIL on the planted follow-ups of the `siblings` world with
the rule off, PASS with it on; the audit's own detector; the probe's power on a simulated table. (Check 1 on
the exposure day: test_audit_schedule.py; the `siblings` fixture: conftest.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from forecast_env.eval.audit.run import FAIL, PASS, run_audit
from forecast_env.eval.audit.siblings import (
    cued,
    key_words,
    normalize,
    probe_power,
    run_sibling_probe,
    simulated_rows,
    stated_outcome,
)
from forecast_env.eval.audit.structure import ProbeSettings
from tests.support.audit_data import SIBLINGS_FAST
from tests.support.siblings import build_siblings


@pytest.fixture(scope="module")
def siblings_large(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_siblings(tmp_path_factory.mktemp("siblings-large-audit"), "siblings_large")


def test_check6_count_and_probe_both_fail_with_the_rule_off_on_the_large_world(siblings_large) -> None:
    """On `siblings_large` (enough exposed dates in both splits for the probe to have power) the rule
    off fails BOTH the count and the probe; the rule on passes the count and the probe does not FAIL."""
    off = run_audit(siblings_large["off"], "eval", checks=["siblings"], settings=SIBLINGS_FAST).check("siblings")
    assert off.verdict == FAIL and off.figures["count_share"] > 0.01, off.reason
    probe = off.figures["probe"]
    assert probe["verdict"] == FAIL and probe["ci_high"] < -0.01, probe
    assert probe["sibling_weights"]["stated_yes_pattern"] > 0 and probe["sibling_weights"]["past_sentence"] > 0
    assert any(f.startswith("count:") for f in off.failures) and any(f.startswith("probe:") for f in off.failures)
    on = run_audit(siblings_large["on"], "eval", checks=["siblings"], settings=SIBLINGS_FAST).check("siblings")
    assert on.verdict == PASS and on.figures["count_exposed_dates"] == 0, on.reason
    assert on.figures["probe"]["verdict"] != FAIL, on.figures["probe"]


@pytest.mark.parametrize("split", ["eval", "train"])
def test_check6_fails_with_the_rule_off_and_passes_with_it_on(siblings, split: str) -> None:
    """The 14 + 14 `siblings` world: the count fails with the rule off (its probe has too few exposed
    dates to tell, see the large world above) and passes with it on."""
    off = run_audit(siblings["off"], split, checks=["siblings"], settings=SIBLINGS_FAST).check("siblings")
    assert off.verdict == FAIL and off.figures["count_share"] > 0.01, off.reason
    assert off.examples and {"event_id", "date", "by", "words"} <= set(off.examples[0])
    assert off.figures["count_winner_vs_loser_cued"] > 2  # follow-ups name winners, not losers
    on = run_audit(siblings["on"], split, checks=["siblings", "schedule"], settings=SIBLINGS_FAST)
    c6 = on.check("siblings")
    assert c6.verdict == PASS and c6.figures["count_exposed_dates"] == 0, c6.reason
    assert c6.figures["probe"]["verdict"] != FAIL
    assert on.check("schedule").verdict == PASS, on.check("schedule").reason
    assert on.check("schedule").figures["events_with_exposure_day"] > 0
    bal = c6.figures["label_balance"]
    assert sum(bal["dates_cut"].values()) > 0 and sum(bal["dates_kept"].values()) > 0


def test_the_audit_detector_is_its_own(siblings) -> None:
    """A phrasing the build's cue list leaves out ("X claimed <contest>": the build needs no such verb, as "X
    claimed the election was stolen" reads the same way) is still counted by the audit."""
    s = normalize("Marlow Bay Herons claimed the Grand Rugby Championship title race: will it rain?")
    i = s.index("marlow")
    assert cued(s, i, i + len("marlow bay herons")) is not None
    from datetime import date

    from forecast_env.envs.events.exposure import QuestionText, find_exposures

    q = QuestionText("b", "Grand Rugby Championship title race", "", ("Marlow Bay Herons", "Ashby Wolves", "Oak FC"),
                     date(2026, 1, 1), date(2026, 2, 1))
    f = QuestionText("f", "Marlow Bay Herons claimed the Grand Rugby Championship title race: will it rain?", "",
                     ("Yes", "No"), date(2026, 1, 5), date(2026, 2, 1))
    assert find_exposures([q, f]).exposures == {}  # the build's list leaves this verb out


@pytest.fixture(scope="module")
def siblings_heldout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_siblings(tmp_path_factory.mktemp("siblings-heldout-audit"), "siblings_heldout")


def test_check6_passes_on_the_held_out_phrasings_with_the_rule_on(siblings_heldout) -> None:
    """issue 31 item 5: check 6 FAILed 1 of 64 train dates of `siblings_heldout` with the rule on. The date
    (pm-95888 on 2025-12-24, exposed by "Marlow Bay Herons took the Grand Rugby Championship title race: ...")
    was a true exposure (truth.json plants it, expect "cut") that the build's cue list missed; the build now
    reads "X took <contest>" and the headline passive "X confirmed as the winner of", so every planted exposure
    is cut and the count finds no date on either split."""
    from datetime import date

    from forecast_env.envs.events.tables import load_events
    from tests.support.siblings import truth_exposures

    t = load_events(siblings_heldout["on"])
    ev = {r["event_id"]: r for r in t.events.iter_rows(named=True)}
    exc = {r["event_id"]: r["reason"] for r in t.excluded.iter_rows(named=True)}
    for x in truth_exposures(siblings_heldout["world"]):
        q = x["exposed"]
        if x["expect"] == "none":
            assert ev[q]["exposure_day"] is None, x
        elif exc.get(q) != "exposed_early":
            assert ev[q]["exposure_day"] is not None and ev[q]["exposure_day"] <= date.fromisoformat(x["from"]), x
    for split in ("train", "eval"):
        c = run_audit(siblings_heldout["on"], split, checks=["siblings"], settings=SIBLINGS_FAST).check("siblings")
        assert c.figures["count_exposed_dates"] == 0 and c.examples == [], (split, c.examples)
        assert c.verdict == PASS, (split, c.reason)


@pytest.mark.parametrize("text, expect", [
    ("after ana moreau's win in the election, will x?", True),
    ("will president-elect ana moreau name a cabinet?", True),
    ("ana moreau, the new leader, speaks", True),
    ("will ana moreau attend the debate?", False),
    ("if ana moreau won, would x?", False),
    ("will ana moreau win the election?", False),
])
def test_audit_cues(text: str, expect: bool) -> None:
    i = text.index("ana moreau")
    assert (cued(text, i, i + len("ana moreau")) is not None) is expect


def test_audit_statements_of_yes_no_events() -> None:
    kw = key_words("Will the Doruria parliament pass the Housing Supply Act by May 3?")
    assert "may" not in kw and {"doruria", "parliament", "pass", "housing", "supply", "act"} <= set(kw)
    assert stated_outcome(normalize("After the Doruria parliament passed the Housing Supply Act, will x?"), kw) == "Yes"
    assert stated_outcome(normalize("The Doruria parliament did not pass the Housing Supply Act."), kw) == "No"
    assert stated_outcome(normalize("If the Doruria parliament passed the Housing Supply Act, would x?"), kw) is None
    assert stated_outcome(normalize("Will the Doruria parliament pass the Housing Supply Act by June?"), kw) is None


def test_audit_statements_tell_numbered_events_apart_and_need_the_events_own_verb() -> None:
    kw = key_words("Will the Tern-6 probe launch by November 16?")
    assert "6" in kw
    assert stated_outcome(normalize("Now that the Tern-6 probe launched, will x?"), kw) == "Yes"
    # another probe of the series, the number only in a deadline: not this event
    assert stated_outcome(normalize("After the Tern-2 probe launched by November 6, will x?"), kw) is None
    # the same event asked again beside someone else's win: a "won" in another clause states nothing
    assert stated_outcome(normalize("Will the Tern-6 probe launch by May 19, now that Lucia Okafor has won the "
                                    "search?"), kw) is None
    win = key_words("Will Ana Moreau win the Doruria election?")
    assert stated_outcome(normalize("Ana Moreau won the Doruria election."), win) == "Yes"


def test_probe_power_on_a_simulated_table() -> None:
    st = ProbeSettings(draws=400, seed=0)
    power = probe_power(st, n_events=600)
    assert power["leak_30pct"]["verdict"] == FAIL and power["no_leak"]["verdict"] != FAIL
    # with prominence alone (no sibling signal beyond the reference) the probe has nothing to add
    rows = simulated_rows(400, 0.0, seed=1)
    assert run_sibling_probe(rows, "train", "eval", st)["verdict"] != FAIL
