"""The verifiers (the seed's four): quality, ambiguity and resolvability must reach their required rating;
the triviality forecast is recorded and never filtered on. Each is a configurable prompt
(`verify.prompts.<name>`: a file replacing `questions/prompts/verify_<name>.md`) whose verdict is kept
on the draft (`Draft.verdicts`). They run in the configured order and stop at the first failure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from forecast_env.questions.model import RecordedModel
from forecast_env.questions.records import SCALES, Draft, Drop, forecast_schema, rating_schema
from forecast_env.questions.store import prompt_text

VERIFIERS = ("quality", "ambiguity", "resolvability", "triviality")


def _fields(d: Draft) -> dict[str, str]:
    return {"date": d.date.isoformat(), "question": d.question, "options": "; ".join(d.options),
            "criteria": d.criteria, "resolution_date": d.resolution_date.isoformat()}


def verify_draft(model: RecordedModel, draft: Draft, cfg: Mapping[str, Any]) -> Draft:
    """Rate `draft` with each configured verifier; set its status to verified, or drop it with the verifier's name."""
    vc = cfg["verify"]
    for name in vc["verifiers"]:
        if name not in VERIFIERS:
            raise ValueError(f"questions.verify.verifiers: unknown verifier {name!r}; choose from {VERIFIERS}")
        prompt = prompt_text(f"verify_{name}", {f"verify_{k}": v for k, v in (vc["prompts"] or {}).items()})
        messages = [{"role": "user", "content": prompt.format(**_fields(draft))}]
        if name == "triviality":
            obj, _ = model.ask_json(messages, forecast_schema(draft.options), "verify:triviality")
            draft.verdicts[name] = obj["probabilities"] if obj is not None else None
            continue
        scale = SCALES[name]
        obj, _ = model.ask_json(messages, rating_schema(scale), f"verify:{name}")
        if obj is None:
            draft.verdicts[name] = None
            draft.drop = Drop("verify", f"{name}_unreadable", "no schema-valid verdict after one correction")
            break
        draft.verdicts[name] = {"rating": obj["rating"], "reason": str(obj.get("reason") or "")[:500]}
        need = str(vc["require"].get(name, scale[0]))
        if scale.index(obj["rating"]) < scale.index(need):
            draft.drop = Drop("verify", name, f"rated {obj['rating']!r} (needs {need!r}): "
                                              f"{json.dumps(str(obj.get('reason') or '')[:200])}")
            break
    draft.status = "dropped" if draft.drop else "verified"
    return draft
