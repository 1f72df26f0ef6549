"""The base-rate agent: label frequencies of another split than the one evaluated, by option count.

For binary events whose options are Yes/No the rate is the share of "Yes" labels (by name, so the
option order does not matter); otherwise P(label at position i | K options), counted over train
events with K options. Counts are Laplace-smoothed ((c_i + 1) / (n + K)), so a K never seen in
training gives the uniform forecast.

The rates are never fitted on the labels they are evaluated on (docs/design.md §5): evaluated on
`eval` they come from `train`, evaluated on `train` they come from `eval`, and a run over `all`
is refused (there is no other split to fit on). Only the fitting split's rows are ever read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from forecast_env.agents.base import forecast_action, parse_observation, uniform_probabilities
from forecast_env.errors import ForecastEnvError, WorkspaceError
from forecast_env.store import Workspace

YES_NO = frozenset({"yes", "no"})


def _is_yes_no(options: Iterable[str]) -> bool:
    opts = [str(o).strip().lower() for o in options]
    return len(opts) == 2 and set(opts) == YES_NO


@dataclass
class BaseRates:
    """Counts of train labels: Yes/No by name, others by (K, position)."""

    yes: int = 0
    yes_no_total: int = 0
    by_position: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    totals: Counter = field(default_factory=Counter)

    def probabilities(self, options: list[str]) -> dict[str, float]:
        """Laplace-smoothed base rates over the offered `options`."""
        k = len(options)
        if k == 0:
            return {}
        if _is_yes_no(options):
            p_yes = (self.yes + 1) / (self.yes_no_total + 2)
            return {o: (p_yes if o.strip().lower() == "yes" else 1.0 - p_yes) for o in options}
        n = self.totals.get(k, 0)
        if n == 0:
            return uniform_probabilities(options)
        counts = self.by_position[k]
        return {o: (counts.get(i, 0) + 1) / (n + k) for i, o in enumerate(options)}


def fit_base_rates(train_events: Iterable[Mapping[str, Any]]) -> BaseRates:
    """Count the labels of train events (dicts with `options` and `label`)."""
    rates = BaseRates()
    for ev in train_events:
        options = [str(o) for o in (ev.get("options") or [])]
        label = ev.get("label")
        if label is None or label not in options:
            continue
        if _is_yes_no(options):
            rates.yes_no_total += 1
            rates.yes += int(str(label).strip().lower() == "yes")
        else:
            k = len(options)
            rates.totals[k] += 1
            rates.by_position[k][options.index(label)] += 1
    return rates


FIT_SPLIT = {"eval": "train", "train": "eval"}


def fit_split(evaluated: str | None) -> str:
    """The split whose labels give the rates for a run over `evaluated` (None: eval)."""
    evaluated = evaluated or "eval"
    if evaluated not in FIT_SPLIT:
        raise ForecastEnvError(f"agent 'base_rate' cannot be evaluated on split {evaluated!r}: its rates would be "
                               "fitted on the labels it is scored on; run it on 'eval' (fitted on train) or "
                               "'train' (fitted on eval)")
    return FIT_SPLIT[evaluated]


def read_split_events(workspace: str | Path, split: str = "train") -> list[dict[str, Any]]:
    """The rows (options, label) of one split of `WS/events/events.parquet`; other rows are never read."""
    path = Workspace.at(workspace).events_table("events")
    if not path.exists():
        raise WorkspaceError(f"{workspace}: no events table at {path}; build it with `forecast-env events build`")
    table = pq.read_table(path, columns=["split", "options", "label"], filters=[("split", "=", split)])
    return table.select(["options", "label"]).to_pylist()


class BaseRateAgent:
    """Forecasts the train split's label frequencies for the offered options, with no tool calls."""

    name = "base_rate"
    world_refresh = False  # in world mode one forecast per question stands

    def question_plan(self, view: dict) -> Generator[dict, dict, None]:
        """World mode: the base rates for one question."""
        yield forecast_action(self.rates.probabilities(list(view["options"])))

    def __init__(self, rates: BaseRates, fitted_on: str = "train") -> None:
        self.rates = rates
        self.fitted_on = fitted_on

    @classmethod
    def from_workspace(cls, workspace: str | Path, split: str | None = None) -> BaseRateAgent:
        """Rates fitted for a run over `split` (None: eval), on the other split's labels."""
        fitted_on = fit_split(split)
        return cls(fit_base_rates(read_split_events(workspace, fitted_on)), fitted_on)

    def reset(self, *, seed: int | None = None) -> None:
        return None

    def act(self, observation: str, info: dict) -> dict:
        obs = parse_observation(observation, info)
        return forecast_action(self.rates.probabilities(list(obs["options"])))

    async def aact(self, observation: str, info: dict) -> dict:
        return self.act(observation, info)
