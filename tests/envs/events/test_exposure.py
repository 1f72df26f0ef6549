"""Cross-question exposure (docs/design.md §4): the detector's matching rules and bad inputs, the cut it
puts into the schedule, and the planted exposures of the `siblings` world (cut) against its neutral
mentions (not cut), read from truth.json."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from forecast_env.envs.events.exposure import (
    QuestionText,
    apply_cut,
    find_exposures,
    fold,
    option_cue,
    sentences,
    tokens,
)
from forecast_env.envs.events.schedule import build_schedule
from forecast_env.envs.events.tables import load_events
from tests.support.siblings import truth_exposures

D0 = date(2026, 3, 1)


def Q(eid: str, question: str, options: list[str], description: str = "", first: date = D0,
      last: date = D0 + timedelta(days=30)) -> QuestionText:
    return QuestionText(eid, question, description, tuple(options), first, last)


BUNDLE = Q("b", "Who will win the Veltria presidential election?", ["Ana Moreau", "Alan Brandt", "Al Kim"])


def exposed(*qs: QuestionText) -> dict:
    return find_exposures(list(qs)).exposures


# ---------------------------------------------------------------------------------------------
# the option rule
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("title", [
    "Will President-elect Ana Moreau name a cabinet by May?",
    "After Ana Moreau's win in the election, will the currency rise?",
    "Will the currency rise now that Ana Moreau has won the election?",
    "Will Ana Moreau, the winner of the election, visit Kestia?",
    "Will new president Ana Moreau visit Kestia?",
    "Ana Moreau took the Veltria presidential election: will the currency rise?",  # issue 31: held-out phrasings
    "With Ana Moreau confirmed as the winner of the election, will the currency rise?",
    "Ana Moreau captured the presidency: will the currency rise?",
])
def test_presupposing_titles_expose_the_bundle(title: str) -> None:
    e = exposed(BUNDLE, Q("f", title, ["Yes", "No"], first=D0 + timedelta(days=5)))
    assert "b" in e and e["b"].by == "f" and e["b"].day == D0 + timedelta(days=5)
    assert e["b"].rule == "option" and e["b"].options == ("Ana Moreau",)


@pytest.mark.parametrize("title", [
    "Will Ana Moreau attend the debate?",
    "If Ana Moreau wins the election, will the currency rise?",
    "Will Ana Moreau win by more than ten points?",
    "Will Ana Moreau be elected with a majority?",
    "Ana Moreau named a running mate: will the polls move?",  # X acting, not X chosen
    "Ana Moreau took part in the election debate: will the polls move?",  # "took" without a contest taken
    "Ana Moreau took the lead in the election race: will the polls move?",
    "Ana Moreau took questions on the election: will the polls move?",
    "If Ana Moreau took the election, would the currency rise?",
])
def test_neutral_mentions_do_not_expose(title: str) -> None:
    assert exposed(BUNDLE, Q("f", title, ["Yes", "No"])) == {}


def test_naming_every_option_with_a_cue_is_not_a_strict_subset() -> None:
    text = "After Ana Moreau won round one, Alan Brandt won round two and Al Kim won round three, who leads?"
    assert exposed(BUNDLE, Q("f", text, ["Yes", "No"])) == {}


def test_substring_names_do_not_match_inside_other_words() -> None:
    # "Al" must not match inside "Alan": only Alan Brandt is named
    e = exposed(BUNDLE, Q("f", "Will President-elect Alan Brandt name a cabinet?", ["Yes", "No"]))
    assert e["b"].options == ("Alan Brandt",)
    small = Q("s", "Who wins?", ["Al", "Bea", "Cy"])
    assert exposed(small, Q("f", "Will President-elect Alan Brandt resign?", ["Yes", "No"])) == {}
    assert exposed(small, Q("f", "Will President-elect Al resign?", ["Yes", "No"]))["s"].options == ("Al",)
    # a shorter name inside a longer matched one does not count on its own
    nested = Q("n", "Who wins?", ["Smith", "John Smithers", "Lee"])
    assert exposed(nested, Q("f", "Will champion John Smithers retire?", ["Yes", "No"]))["n"].options == \
        ("John Smithers",)


def test_accents_html_and_entities_are_folded() -> None:
    assert fold("<p>Jos&eacute; P&Eacute;REZ</p>").split() == ["jose", "perez"]
    q = Q("a", "Who will lead the council?", ["José Pérez", "Zoë Lindqvist", "Ørjan Berg"])
    e = exposed(q, Q("f", "Will the council meet?", ["Yes", "No"],
                     description="<p>After <b>Jose Perez</b>&#39;s victory, the council reconvenes.</p>"))
    assert e["a"].options == ("José Pérez",) and e["a"].where == "description"
    # a non-Latin name
    q2 = Q("c", "Кто победит?", ["Иван Петров", "Анна Смирнова"])
    assert exposed(q2, Q("g", "Will President-elect Иван Петров visit Kyiv?", ["Yes", "No"]))["c"].options == \
        ("Иван Петров",)


def test_empty_identical_and_generic_labels_are_skipped_and_reported() -> None:
    bad = Q("x", "Who wins?", ["", "Bob Ray", "bob ray", "Other", "Cleo Wu"])
    rep = find_exposures([bad, Q("f", "Will President-elect Cleo Wu act?", ["Yes", "No"])])
    why = {(e, w): y for e, w, y in rep.skipped}
    assert why[("x", "")] == "empty_label"
    assert why[("x", "Bob Ray")] == "identical_labels" and why[("x", "bob ray")] == "identical_labels"
    assert ("x", "Other") not in why  # generic options are simply not distinctive
    assert rep.exposures["x"].options == ("Cleo Wu",)
    assert rep.skipped_counts() == {"empty_label": 1, "identical_labels": 2}


def test_words_every_option_shares_are_not_distinctive() -> None:
    q = Q("p", "Which party wins?", ["Party Blue", "Party Green", "Party Red"])
    # "the winner Party" names no option: the shared word alone is not a name
    assert exposed(q, Q("f", "Will the winner party govern alone?", ["Yes", "No"])) == {}
    assert exposed(q, Q("f", "Will Green, the winner, govern alone?", ["Yes", "No"]))["p"].options == ("Party Green",)


def test_option_cue_reads_both_sides() -> None:
    w = tokens(fold("after ana's win the mood lifted"))
    assert option_cue(w, 1, 2) is not None
    w = tokens(fold("whether ana won is unclear"))
    assert option_cue(w, 1, 2) is None


def test_sentences_keep_initials_together() -> None:
    assert sentences("Will the U.S. invade by Dec. 31? Yes.")[0][:5] == ["will", "the", "u", "s", "invade"]


# ---------------------------------------------------------------------------------------------
# the event rule (Yes/No questions)
# ---------------------------------------------------------------------------------------------


YESNO = Q("y", "Will Hamas agree to disarm by March 31?", ["Yes", "No"])


@pytest.mark.parametrize("text", [
    "After Hamas agreed to disarm, will Israel withdraw?",
    "Now that Hamas did not agree to disarm, will talks resume?",
])
def test_a_settled_event_exposes_the_yes_no_question(text: str) -> None:
    e = exposed(YESNO, Q("f", text, ["Yes", "No"], first=D0 + timedelta(days=3)))
    assert e["y"].rule == "event" and e["y"].day == D0 + timedelta(days=3)


@pytest.mark.parametrize("text", [
    "Will Hamas agree to disarm by June 30?",  # a later deadline in the series: nothing is settled
    "If Hamas agreed to disarm, would Israel withdraw?",
    "Will Israel withdraw if Hamas agrees to disarm?",
    "Will Hamas leaders meet in Doha?",
])
def test_open_or_conditional_statements_do_not_expose(text: str) -> None:
    assert exposed(YESNO, Q("f", text, ["Yes", "No"])) == {}


def test_exposure_starts_when_a_dated_paragraph_is_shown() -> None:
    desc = "Resolves Yes if the Fed acts.\n\nUpdate (2026-03-12): Hamas agreed to disarm on March 11."
    e = exposed(YESNO, Q("f", "Will Israel withdraw?", ["Yes", "No"], description=desc))
    assert e["y"].day == date(2026, 3, 12) and e["y"].where == "description"
    # an undated amendment is never shown (docs/design.md §5), so it exposes nothing
    undated = "Resolves Yes if the Fed acts.\n\nUpdate: Hamas agreed to disarm."
    assert exposed(YESNO, Q("f", "Will Israel withdraw?", ["Yes", "No"], description=undated)) == {}
    # a paragraph dated after the exposer's last listed day is never shown
    late = "Resolves.\n\nUpdate (2026-05-20): Hamas agreed to disarm."
    assert exposed(YESNO, Q("f", "Will Israel withdraw?", ["Yes", "No"], description=late)) == {}


def test_first_exposer_wins_and_self_never_counts() -> None:
    a = Q("f1", "After Hamas agreed to disarm, will Israel withdraw?", ["Yes", "No"], first=D0 + timedelta(days=9))
    b = Q("f2", "After Hamas agreed to disarm, will Egypt mediate?", ["Yes", "No"], first=D0 + timedelta(days=4))
    e = exposed(YESNO, a, b)
    assert (e["y"].by, e["y"].day) == ("f2", D0 + timedelta(days=4))
    me = Q("m", "After Ana Moreau's win, who will win the Veltria presidential election?", ["Ana Moreau", "Alan Brandt"])
    assert exposed(me) == {}


def test_the_rule_never_sees_a_label() -> None:
    import dataclasses

    assert "label" not in {f.name for f in dataclasses.fields(QuestionText)}


def test_speed_path_indexes_names_instead_of_pairs() -> None:
    # 2,000 bundles with unrelated names: no question names another's option, so no candidate pair
    qs = [Q(f"e{i}", f"Who wins contest {i}?", [f"Name{i}a Person", f"Name{i}b Person", f"Name{i}c Person"])
          for i in range(2000)]
    rep = find_exposures(qs)
    assert rep.candidate_pairs == 0 and rep.exposures == {}


# ---------------------------------------------------------------------------------------------
# the cut
# ---------------------------------------------------------------------------------------------


def test_exposure_cut_keeps_whole_bins_a_prefix_and_steps_total() -> None:
    start, end = date(2026, 3, 1), date(2026, 4, 10)
    opts = ["A", "B"]
    uncut = build_schedule(start, None, end, opts, {}, {}, None)
    assert uncut.steps_total == 5
    for k in range(0, 45):
        day = start + timedelta(days=k)
        s = build_schedule(start, None, end, opts, {}, {}, apply_cut(end, day))
        assert s.steps_total == uncut.steps_total
        assert [x.forecast_date for x in s.steps] == [x.forecast_date for x in uncut.steps[: len(s.steps)]]
        assert all(x.bin_last < day for x in s.steps)
        nxt = uncut.steps[len(s.steps)] if len(s.steps) < len(uncut.steps) else None
        assert nxt is None or nxt.bin_last >= day
    assert apply_cut(None, None) is None and apply_cut(date(2026, 1, 5), date(2026, 1, 9)) == date(2026, 1, 5)


# ---------------------------------------------------------------------------------------------
# the sample world's plants (truth.json)
# ---------------------------------------------------------------------------------------------


def _tables(ws: Path) -> tuple[dict, pl.DataFrame, dict]:
    t = load_events(ws)
    ev = {r["event_id"]: r for r in t.events.iter_rows(named=True)}
    exc = {r["event_id"]: r for r in t.excluded.iter_rows(named=True)}
    return ev, t.schedule, exc


def test_planted_exposures_are_cut_and_neutral_mentions_are_not(siblings) -> None:
    truth = truth_exposures(siblings["world"])
    kinds = {x["kind"] for x in truth}
    assert kinds == {"winner_followup", "settled_yesno", "series_recount", "neutral", "late"}
    ev, sched, exc = _tables(siblings["on"])
    ev_off, sched_off, _ = _tables(siblings["off"])
    n_cut = removed = 0
    for x in truth:
        q = x["exposed"]
        if x["expect"] == "none":
            assert q in ev and ev[q]["exposure_day"] is None and ev[q]["cut_by"] != "cross_question", x
            assert sched.filter(pl.col("event_id") == q).height == sched_off.filter(pl.col("event_id") == q).height
            continue
        start = date.fromisoformat(x["from"])
        if q in exc:  # exposed before its first bin ended (possibly by an earlier question)
            assert exc[q]["reason"] == "exposed_early", x
            continue
        e = ev[q]
        assert e["exposure_day"] is not None and e["exposure_day"] <= start, x
        if e["exposure_day"] == start:
            assert e["exposed_by"] == x["by"], x
        rows = sched.filter(pl.col("event_id") == q)
        assert rows.filter(pl.col("bin_last") >= e["exposure_day"]).height == 0
        assert rows["steps_total"].to_list() == sched_off.filter(pl.col("event_id") == q)["steps_total"].to_list()[
            : rows.height]
        if x["expect"] == "no_cut":  # exposure after the last scheduled date: nothing to cut
            assert rows.height == sched_off.filter(pl.col("event_id") == q).height, x
            assert e["cut_by"] != "cross_question"
        else:
            assert e["cut"] <= e["exposure_day"], x  # the exposure day joined the cut
            removed += rows.height < sched_off.filter(pl.col("event_id") == q).height
            n_cut += 1
    assert n_cut >= 8 and removed >= n_cut // 2  # most plants open inside the schedule and take dates off it


def test_the_rule_changes_nothing_else(siblings) -> None:
    ev, sched, exc = _tables(siblings["on"])
    ev_off, sched_off, _ = _tables(siblings["off"])
    assert set(ev) | {k for k, r in exc.items() if r["reason"] == "exposed_early"} == set(ev_off)
    for eid, r in ev.items():
        a = sched.filter(pl.col("event_id") == eid).sort("step")
        b = sched_off.filter(pl.col("event_id") == eid).sort("step")
        assert r["steps_total"] == ev_off[eid]["steps_total"]
        assert a["forecast_date"].to_list() == b["forecast_date"].to_list()[: a.height]  # a prefix
        if r["exposure_day"] is None or r["cut_by"] != "cross_question":
            assert a.height == b.height


def test_the_report_has_the_cross_question_row(siblings) -> None:
    rep = json.loads((siblings["on"] / "events" / "report.json").read_text())
    cq = rep["polymarket"]["schedule_rules"]["cross_question"]
    assert cq["enabled"] and cq["events_cut"] >= 8 and cq["steps_cut"] >= cq["events_cut"]
    assert all({"event_id", "day", "by", "words"} <= set(r) for r in cq["exposures"])
    md = (siblings["on"] / "events" / "report.md").read_text()
    assert "| cross_question (another question gives the answer away) |" in md
    manifest = json.loads((siblings["on"] / "events" / "manifest.json").read_text())
    assert "adding events" in json.dumps(manifest)
    off = json.loads((siblings["off"] / "events" / "report.json").read_text())
    assert off["polymarket"]["schedule_rules"]["cross_question"] == {"enabled": False}


def test_another_source_added_later_cuts_stored_events(siblings, tmp_path: Path) -> None:
    """Importing questions whose text gives away a stored Polymarket bundle's winner re-cuts it."""
    import shutil

    from forecast_env.envs.events.build import import_questions
    from tests.support.siblings import events_config

    ws = tmp_path / "ws"
    shutil.copytree(siblings["off"], ws)
    ev, sched, _ = _tables(ws)
    window_end = {"train": date(2026, 3, 1), "eval": date(2026, 6, 1)}

    def first_bin_end(r: dict) -> date:
        return sched.filter(pl.col("event_id") == r["event_id"]).sort("step")["bin_last"][0]

    multi = next(r for r in ev.values() if r["type"] == "multi" and r["steps_offered"] >= 2
                 and first_bin_end(r) + timedelta(days=12) < window_end[r["split"]])
    cut_day = first_bin_end(multi) + timedelta(days=1)  # after the first bin: one bin stays
    winner = multi["label"]
    line = {"id": "follow", "question": f"Will President-elect {winner} visit the capital?", "options": ["Yes", "No"],
            "open_date": cut_day.isoformat(), "close_date": (cut_day + timedelta(days=10)).isoformat(),
            "resolved_option": "Yes"}
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(line) + "\n")
    import_questions(path, ws, config=events_config(True), progress=False)
    ev2, sched2, _ = _tables(ws)
    r = ev2[multi["event_id"]]
    assert r["exposure_day"] == cut_day and r["exposed_by"] == "q-follow" and r["cut_by"] == "cross_question"
    after = sched2.filter(pl.col("event_id") == multi["event_id"])
    assert after.height == 1 and after["bin_last"].max() < cut_day
    assert r["steps_total"] == multi["steps_total"]


def test_a_text_older_than_the_question_recounts_history() -> None:
    """A background paragraph written before q was asked ("no country has ever left NATO") is not q's outcome."""
    q = Q("n", "Will any country leave NATO in 2026?", ["Yes", "No"], first=date(2026, 1, 10))
    old = Q("m", "Will the alliance grow?", ["Yes", "No"], first=date(2025, 6, 1),
            description="History: no country has ever left NATO since its founding.")
    assert exposed(q, old) == {}
    # the same words in a question asked after q opened do count
    new = Q("k", "Will the alliance grow?", ["Yes", "No"], first=date(2026, 1, 20),
            description="After one country left NATO in January, members met.")
    assert exposed(q, new)["n"].day == date(2026, 1, 20)
    # an old question whose dated update, shown after q was asked, states it counts from that update
    upd = Q("u", "Will the alliance grow?", ["Yes", "No"], first=date(2025, 6, 1), last=date(2026, 6, 1),
            description="Background.\n\nUpdate (2026-02-03): one country left NATO on February 2.")
    assert exposed(q, upd)["n"].day == date(2026, 2, 3)


def test_world_mode_keeps_an_exposed_question_listed_unscored(siblings) -> None:
    """docs/design.md §5: an exposed question stays listed after its exposure day, scored only before it; the
    exposing question is listed as always (never hidden or delayed)."""
    from forecast_env.envs.world import load_world

    ev, _, _ = _tables(siblings["on"])
    checked = 0
    for split in ("train", "eval"):
        world = load_world(siblings["on"], split)
        by_id = {q.question_id: q for q in world.questions}
        for qid, q in by_id.items():
            e = ev[qid]
            if e["cut_by"] != "cross_question" or not (q.first_day < e["exposure_day"] <= q.last_day):
                continue
            after = [d for d in (e["exposure_day"] + timedelta(days=k) for k in range(3)) if d <= q.last_day]
            assert after and all(q.listed_on(d) for d in after)  # still listed after the exposure day
            assert all(d < e["exposure_day"] for d in q.scheduled)  # scored only before it
            by = by_id.get(e["exposed_by"])
            if by is not None:
                assert by.listed_on(e["exposure_day"])  # the exposing question is listed that day
            checked += 1
    assert checked >= 3
