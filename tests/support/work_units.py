"""The work units of a pytest-xdist run (`make test`): the tests that one worker runs together.

xdist's `--dist loadgroup` marks a group by renaming its tests' node ids (`item._nodeid`), which pytest 9.2 no
longer reads (a node id is `item._id`), so its groups are silently lost. Instead each worker writes the groups
it collected (tests/conftest.py) into the run's folder, and the controller schedules with xdist's scope
scheduling over them: a test in no group is a unit of its own, and the units start in collection order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

#: the groups of the collected tests ({node id: group}), in the folder of the run
UNITS_FILE = "xdist-units.json"


def write_units(config: pytest.Config, units: dict[str, str]) -> None:
    """On a worker: the groups of the tests it collected, for the controller (every worker writes the same)."""
    basetemp = config.option.basetemp  # xdist gives a worker the controller's basetemp / its own id
    if not basetemp:
        return
    path = Path(basetemp).parent / UNITS_FILE
    tmp = path.with_name(f".{UNITS_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(units))
    os.replace(tmp, path)


def read_units(config: pytest.Config) -> dict[str, str]:
    """On the controller: the groups the workers wrote ({} when none did)."""
    factory = getattr(config, "_tmp_path_factory", None)  # how xdist itself finds the workers' basetemp
    path = factory.getbasetemp() / UNITS_FILE if factory is not None else None
    return json.loads(path.read_text()) if path is not None and path.exists() else {}


class UnitScheduling(LoadScopeScheduling):
    """xdist's scope scheduling whose scopes are the groups the workers wrote (a test without one alone)."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self._units: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        """The unit of `nodeid` (read once the workers have collected: the first call comes after that)."""
        if self._units is None:
            self._units = read_units(self.config)
        return self._units.get(nodeid, nodeid)
