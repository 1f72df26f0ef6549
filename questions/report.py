"""`questions report` and `questions why ID`: the funnel of the question pipeline, the resolvers' agreement, the
horizon / category / label distributions, the tokens per accepted question, and examples of each drop."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from forecast_env.errors import QuestionsError
from forecast_env.questions.records import Draft
from forecast_env.questions.store import QuestionFiles, read_drafts, write_info
from forecast_env.store import atomic_write_text

#: the funnel's order: where a draft can stop, from the seed to acceptance
STAGE_ORDER = ("draft", "verify", "vet:post_D_text", "vet:duplicate", "pending", "resolve", "vet:public_at_D",
               "vet:exposed", "vet:balance")


def _records(files: QuestionFiles) -> list[Draft]:
    drafts = read_drafts(files.resolved) or read_drafts(files.drafts)
    if not drafts:
        raise QuestionsError(f"{files.root}: no questions; run `forecast-env questions generate` first")
    return drafts


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def _stage(d: Draft) -> str:
    if d.status == "pending":
        return "pending"
    if d.drop is None:
        return "accepted" if d.status == "accepted" else f"status:{d.status}"
    return f"vet:{d.drop.reason}" if d.drop.stage == "vet" else d.drop.stage


def funnel(drafts: list[Draft], seeds: int) -> list[dict[str, Any]]:
    """Rows (stage, reason, dropped, remaining) from the seeds to the accepted questions."""
    real = [d for d in drafts if d.question]
    rows: list[dict[str, Any]] = [{"stage": "seeds", "reason": "", "dropped": 0, "remaining": seeds}]
    lost = Counter(d.drop.reason for d in drafts if not d.question and d.drop)
    rows += [{"stage": "seeds", "reason": r, "dropped": n, "remaining": None} for r, n in sorted(lost.items())]
    remaining = len(real)
    rows.append({"stage": "drafts", "reason": "", "dropped": 0, "remaining": remaining})
    by_stage: dict[str, Counter[str]] = {}
    for d in real:
        s = _stage(d)
        by_stage.setdefault(s, Counter())[d.drop.reason if d.drop else s] += 1
    for stage in STAGE_ORDER:
        for reason, n in sorted(by_stage.get(stage, Counter()).items()):
            remaining -= n
            rows.append({"stage": stage, "reason": reason, "dropped": n, "remaining": remaining})
    unresolved = sum(by_stage.get(f"status:{s}", Counter()).total() for s in ("verified", "resolved", "draft"))
    if unresolved:
        remaining -= unresolved
        rows.append({"stage": "not yet resolved", "reason": "run questions resolve", "dropped": unresolved,
                     "remaining": remaining})
    rows.append({"stage": "accepted", "reason": "", "dropped": 0, "remaining": remaining})
    return rows


def agreement(drafts: list[Draft]) -> dict[str, Any]:
    """How often the resolvers agreed, and why votes did not count."""
    voted = [d for d in drafts if d.votes]
    unanimous = pairs = agree = 0
    problems: Counter[str] = Counter()
    for d in voted:
        valid = [v.answer for v in d.votes if v.valid]
        problems.update(v.problem for v in d.votes if v.problem)
        if len(valid) >= 2:
            unanimous += len(set(valid)) == 1
            for i in range(len(valid)):
                for j in range(i + 1, len(valid)):
                    pairs += 1
                    agree += valid[i] == valid[j]
    return {"questions_voted": len(voted), "unanimous": unanimous,
            "pairwise_agreement": round(agree / pairs, 4) if pairs else None,
            "tiebreaks": sum(1 for d in voted if len(d.votes) > 3), "vote_problems": dict(sorted(problems.items()))}


def distributions(accepted: list[Draft]) -> dict[str, Any]:
    """Horizon, category, label, answer position and route of the accepted questions."""
    def bucket(days: int) -> str:
        for hi, name in ((7, "<=7"), (14, "8-14"), (30, "15-30"), (60, "31-60")):
            if days <= hi:
                return name
        return ">60"

    binary = [d for d in accepted if d.kind == "binary"]
    yes = sum(1 for d in binary if d.resolved == "Yes")
    return {"horizon_days": dict(sorted(Counter(bucket((d.resolution_date - d.date).days) for d in accepted).items())),
            "category": dict(sorted(Counter(d.category or "none" for d in accepted).items())),
            "route": dict(sorted(Counter(d.route for d in accepted).items())),
            "binary": len(binary), "yes_share": round(yes / len(binary), 4) if binary else None,
            "answer_position": dict(sorted(Counter(str(d.options.index(d.resolved)) for d in accepted
                                                   if d.resolved in d.options).items())),
            "options": dict(sorted(Counter(str(len(d.options)) for d in accepted).items()))}


def questions_report(workspace: str | Path) -> dict[str, Any]:
    """The report as a dict (see the module docstring)."""
    files = QuestionFiles.of(workspace)
    drafts = _records(files)
    gen, res = _load(files.generate_info), _load(files.resolve_info)
    seeds = sum((gen.get("seeds") or {}).values())
    accepted = [d for d in drafts if d.status == "accepted"]
    tokens = int((gen.get("usage") or {}).get("total_tokens") or 0) + int((res.get("usage") or {}).get("total_tokens") or 0)
    examples: dict[str, list[dict[str, str]]] = {}
    for d in drafts:
        if d.drop and len(examples.setdefault(f"{d.drop.stage}:{d.drop.reason}", [])) < 2:
            examples[f"{d.drop.stage}:{d.drop.reason}"].append(
                {"qid": d.qid, "question": d.question[:200], "detail": d.drop.detail[:300]})
    by_route = {}
    for route, n in sorted((gen.get("seeds") or {}).items()):
        acc = sum(1 for d in accepted if d.route == route)
        by_route[route] = {"seeds": n, "drafts": sum(1 for d in drafts if d.route == route and d.question),
                           "verified": sum(1 for d in drafts if d.route == route and d.question
                                           and (d.status in ("verified", "pending", "resolved", "accepted")
                                                or (d.drop is not None and d.drop.stage not in ("draft", "verify")))),
                           "accepted": acc, "yield_per_1000_seeds": round(1000 * acc / n, 2) if n else None}
    return {"model": gen.get("model"), "routes": gen.get("routes"), "dates": gen.get("dates"), "seeds": seeds,
            "by_route": by_route,
            "drafts": sum(1 for d in drafts if d.question), "accepted": len(accepted),
            "yield_per_1000_seeds": round(1000 * len(accepted) / seeds, 2) if seeds else None,
            "funnel": funnel(drafts, seeds), "agreement": agreement(drafts), "distributions": distributions(accepted),
            "balance": res.get("balance"),
            "tokens": {"generate": gen.get("usage"), "resolve": res.get("usage"), "total": tokens,
                       "per_accepted": round(tokens / len(accepted), 1) if accepted else None},
            "examples": dict(sorted(examples.items()))}


def render(rep: dict[str, Any]) -> str:
    """The report as Markdown."""
    lines = ["# Questions from the news", "",
             f"Model **{rep['model']}**, routes {', '.join(rep['routes'] or [])}, dates {' .. '.join(rep['dates'] or [])}.",
             f"Seeds **{rep['seeds']}**, drafts **{rep['drafts']}**, accepted **{rep['accepted']}** "
             f"(yield {rep['yield_per_1000_seeds']} per 1,000 seed articles).",
             "", "| route | seeds | drafts | past the verifiers | accepted | per 1,000 seeds |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r} | {v['seeds']} | {v['drafts']} | {v['verified']} | {v['accepted']} | {v['yield_per_1000_seeds']} |"
              for r, v in rep["by_route"].items()]
    lines += ["", "## Funnel", "", "| stage | reason | dropped | remaining |", "|---|---|---:|---:|"]
    lines += [f"| {r['stage']} | {r['reason']} | {r['dropped']} | {'' if r['remaining'] is None else r['remaining']} |"
              for r in rep["funnel"]]
    ag = rep["agreement"]
    lines += ["", "## Resolvers", "", f"{ag['questions_voted']} questions voted on; {ag['unanimous']} unanimous; "
              f"pairwise agreement {ag['pairwise_agreement']}; {ag['tiebreaks']} needed the tie-breaker.",
              "Votes that did not count: " + (", ".join(f"{k} {v}" for k, v in ag["vote_problems"].items()) or "none") + "."]
    di = rep["distributions"]
    lines += ["", "## Accepted questions", ""]
    for key in ("horizon_days", "category", "route", "options", "answer_position"):
        lines.append(f"- {key.replace('_', ' ')}: " + (", ".join(f"{k} {v}" for k, v in di[key].items()) or "none"))
    lines.append(f"- Yes share of {di['binary']} Yes/No questions: {di['yes_share']}")
    tok = rep["tokens"]
    lines += ["", "## Tokens", "", f"{tok['total']} model tokens in all; {tok['per_accepted']} per accepted question.",
              "", "## Examples of each drop", ""]
    for reason, items in rep["examples"].items():
        for it in items:
            lines.append(f"- `{reason}` {it['qid']}: {it['question'] or '(no question)'} ({it['detail']})")
    return "\n".join(lines) + "\n"


def write_questions_report(workspace: str | Path) -> dict[str, Any]:
    """Write WS/questions/report.{json,md}; returns the report."""
    files = QuestionFiles.of(workspace)
    rep = questions_report(workspace)
    write_info(files.report_json, rep)
    atomic_write_text(files.report_md, render(rep))
    return rep


def explain_question(workspace: str | Path, qid: str) -> dict[str, Any]:
    """Everything about one question (`g-` event ids accepted): where it stopped and why, its verdicts and votes."""
    files = QuestionFiles.of(workspace)
    key = qid[2:] if qid.startswith("g-") else qid
    for d in _records(files):
        if d.qid == key:
            out = d.to_dict()
            out["stage"] = _stage(d)
            out["event_id"] = f"g-{d.qid}" if d.status == "accepted" else None
            return out
    raise QuestionsError(f"no question {qid!r} in {files.root}; `forecast-env questions report` lists them")
