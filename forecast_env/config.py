"""Loading and validation of the YAML configuration sections (corpus, events, env, benchmark).

The defaults are the repository's `configs/*.yaml`; the package reads them as `forecast_env/defaults/`
(a symbolic link to `../configs`, so there is one copy). A user file may hold one section's keys, or
several sections under their names (`corpus:`, `events:` ...). `--set section.key.sub=value` overrides
one value (YAML-parsed; `route_overrides` assigns each to its section, the section name may be left out
when the key is unambiguous). Every key must exist in the defaults and every value must have the
default's type: the error names the file, the key and what is allowed. `merge_settings` is the one
validator: the build recipes (`forecast_env.recipe`) are checked by it too, with their own `Schema`.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from forecast_env.enums import ENGINES, SEARCH_MODES, SPLITS
from forecast_env.errors import ConfigError

SECTIONS = ("corpus", "events", "env", "benchmark", "questions")

#: Keys whose values are restricted to a fixed set (dotted path inside the section).
ALLOWED: dict[str, dict[str, tuple[Any, ...]]] = {
    "corpus": {
        "embed.backend": ("torch", "onnx", "static"),
        "embed.quantize": (None, "int8", "int8-static"),
        "timestamps.visibility": ("conservative", "crawl", "publication"),
        "quality.profile": ("news", "paper"),
        "extract.body_mode": ("own", "trafilatura", "longer", "lean", "lean-no-escalation", "cascade"),  # body.BODY_MODES
        "execution.engine": ENGINES,
    },
    "events": {"screen.judge": ("offline", "llm")},
    "env": {
        "search_mode": SEARCH_MODES,
        "split": SPLITS,
        "reward_mode": ("episode", "step"),
    },
    "benchmark": {"engine": ENGINES, "split": SPLITS},
    "questions": {"replay": ("auto", "only", "off"), "llm.structured": ("json_schema", "json_object", "none")},
}

#: Keys whose value may be null or of another type than the default (dotted path -> accepted types).
FLEXIBLE: dict[str, dict[str, tuple[type, ...]]] = {
    "corpus": {
        "corpus_end": (str, date, type(None)),
        "corpus_start": (str, date),
        "embed.truncate_dim": (int, type(None)),
        "embed.quantize": (str, type(None)),
        "index.ann_nlist": (int, type(None)),
        "execution.workers": (int, type(None)),
        "execution.ray_address": (str, type(None)),
        "language.gate_max_score": (float, int, type(None)),
    },
    "events": {},
    "env": {},
    "benchmark": {
        "workers": (int, type(None)),
        "ray_address": (str, type(None)),
        "llm.model": (str, type(None)),
    },
    "questions": {
        "llm.model": (str, type(None)),
        "seeds.hosts": (list, type(None)),
        "verify.prompts": (dict,),
    },
}


#: Keys that were removed, with what to write instead (dotted path inside the section -> advice).
#: A removed key is a ConfigError naming its replacement, never silently ignored or remapped.
REMOVED: dict[str, dict[str, str]] = {
    "corpus": {
        "retrieval.hide": ("what agents may see is set per run in the env section (docs/design.md §3.hiding): "
                           "env.hide_leak_flagged (default true) and env.hide_market_quotes (default true; false "
                           "is the recorded market-quote ablation); `forecast-env search --show-hidden` shows "
                           "every article"),
    },
}


@dataclass(frozen=True)
class Schema:
    """The rules a mapping of settings follows besides its defaults' shape: a config section or a recipe.

    The defaults give every key and, where `types` says nothing, the type of its value. `subject` and
    `unknown` are how an error names a key (format fields: `name`, `path` the dotted key, `leaf` the
    key as written down to its first value, `allowed` the keys allowed beside it).
    """

    name: str
    #: keys whose value may be null or of another type than the default (dotted path -> accepted types)
    types: Mapping[str, tuple[type, ...]] = field(default_factory=dict)
    #: keys whose values are restricted to a fixed set
    choices: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    #: keys that were removed, with what to write instead
    removed: Mapping[str, str] = field(default_factory=dict)
    #: keys whose value, when not null, is a date written YYYY-MM-DD
    dates: frozenset[str] = frozenset()
    #: keys whose value is a list of strings, with what the strings are
    text_lists: Mapping[str, str] = field(default_factory=dict)
    #: keys whose value is a mapping of that config section's settings, merged as given (the section's
    #: own schema checks them when the section is loaded)
    sections: tuple[str, ...] = ()
    subject: str = "{name}.{path}"
    unknown: str = "unknown key {name}.{path!r}; allowed here: {allowed}"


def section_schema(section: str) -> Schema:
    """The schema of one config section."""
    return Schema(section, FLEXIBLE.get(section, {}), ALLOWED.get(section, {}), REMOVED.get(section, {}))


def removed_key(section: str, path: str) -> str | None:
    """The advice for a removed key of `section` (None when `path` was never removed)."""
    advice = REMOVED.get(section, {}).get(path)
    return f"{section}.{path} was removed: {advice}" if advice else None


def default_config(section: str) -> dict[str, Any]:
    """The packaged defaults of one section (`configs/<section>.yaml`)."""
    if section not in SECTIONS:
        raise ConfigError(f"unknown config section {section!r}; allowed: {', '.join(SECTIONS)}")
    text = resources.files("forecast_env").joinpath("defaults", f"{section}.yaml").read_text()
    return yaml.safe_load(text) or {}


def _type_ok(default: Any, value: Any, flexible: tuple[type, ...] | None) -> bool:
    if flexible is not None:
        return isinstance(value, flexible) and not (isinstance(value, bool) and bool not in flexible)
    if default is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, (str, date))
    if isinstance(default, list):
        return isinstance(value, list)
    if isinstance(default, dict):
        return isinstance(value, dict)
    return True


def _leaf(path: str, value: Any) -> str:
    """`path` continued down a mapping value's first keys to its first value (`relase.split`)."""
    while isinstance(value, Mapping) and value:
        key, value = next(iter(value.items()))
        path = f"{path}.{key}"
    return path


def _deep_update(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `base` with `update` merged in, mapping into mapping."""
    out = copy.deepcopy(dict(base))
    for k, v in update.items():
        out[k] = _deep_update(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def merge_settings(schema: Schema, base: dict[str, Any], update: Mapping[str, Any], where: str,
                   prefix: str = "") -> None:
    """Check `update` against `schema` and the keys of `base`, then write it into `base`.

    The one validator of config sections and recipes: an unknown or removed key, a value of the wrong
    type, outside its choices, not a date or not a list of strings raises a ConfigError that names
    `where` (a file, `--set ...`), the key and what is allowed.
    """
    for key, value in update.items():
        path = f"{prefix}{key}"
        subject = schema.subject.format(name=schema.name, path=path)
        if key not in base:
            advice = schema.removed.get(path)
            if advice:
                raise ConfigError(f"{where}: {subject} was removed: {advice}")
            allowed = ", ".join(sorted(str(k) for k in base))
            raise ConfigError(f"{where}: " + schema.unknown.format(name=schema.name, path=path,
                                                                    leaf=_leaf(path, value), allowed=allowed))
        default = base[key]
        if path in schema.sections:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {subject} must be a mapping of {path} settings")
            base[key] = _deep_update(default, value)
            continue
        flexible = schema.types.get(path)
        if isinstance(default, dict) and flexible is None and default:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {subject} must be a mapping, got {value!r}")
            merge_settings(schema, default, value, where, prefix=f"{path}.")
            continue
        if not _type_ok(default, value, flexible):
            want = " or ".join("null" if t is type(None) else t.__name__ for t in flexible) if flexible \
                else type(default).__name__
            raise ConfigError(f"{where}: {subject} must be {want}, got {value!r}")
        allowed_values = schema.choices.get(path)
        if allowed_values is not None and value not in allowed_values:
            raise ConfigError(
                f"{where}: {subject} = {value!r} is not allowed; choose one of {', '.join(map(str, allowed_values))}"
            )
        if isinstance(default, float) and isinstance(value, int):
            value = float(value)
        if isinstance(value, date):
            value = value.isoformat()
        if path in schema.dates and value is not None:
            try:
                date.fromisoformat(value)
            except ValueError:
                raise ConfigError(f"{where}: {subject} = {value!r} is not a date (YYYY-MM-DD)") from None
        if path in schema.text_lists and not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {subject} must be a list of {schema.text_lists[path]}")
        base[key] = value


def nest_keys(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys as a nested mapping (`{"a.b": 1, "a.c": 2}` -> `{"a": {"b": 1, "c": 2}}`); values stay as given."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        head, *rest = key.split(".")
        for part in reversed(rest):
            value = {part: value}
        out = _deep_update(out, {head: value})
    return out


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys to values")
    return data


def parse_override(item: str) -> tuple[str, Any]:
    """Parse one `key.sub=value` override (the value is read as YAML: 0.5, true, [1, 2], text)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set language.min_english_score=0.7")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, ValueError):  # ValueError: a date YAML cannot build, e.g. 2026-13-01
        value = raw
    return key.strip(), value


def flatten_keys(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted keys (`{"a": {"b": 1}}` -> `{"a.b": 1}`), the form `overrides` takes;
    an empty mapping stays a value."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            out.update(flatten_keys(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def load_config(
    section: str,
    files: Iterable[str | Path] | str | Path | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Defaults of `section`, updated by each file in turn, then by `overrides`; validated."""
    cfg = copy.deepcopy(default_config(section))
    if isinstance(files, (str, Path)):
        files = [files]
    for f in files or []:
        path = Path(f)
        data = _read_file(path)
        if any(k in SECTIONS for k in data):
            unknown = [k for k in data if k not in SECTIONS]
            if unknown:
                raise ConfigError(
                    f"{path}: top-level key {unknown[0]!r} is not a section; allowed: {', '.join(SECTIONS)}"
                )
            data = data.get(section) or {}
        merge_settings(section_schema(section), cfg, data, str(path))
    items: list[tuple[str, Any]]
    if overrides is None:
        items = []
    elif isinstance(overrides, Mapping):
        items = list(overrides.items())
    else:
        items = [parse_override(o) for o in overrides]
    for key, value in items:
        if key.startswith(f"{section}."):
            key = key[len(section) + 1 :]
        elif key.split(".", 1)[0] in SECTIONS:
            continue  # an override for another section
        merge_settings(section_schema(section), cfg, nest_keys({key: value}), f"--set {key}")
    return cfg


def route_overrides(overrides: Sequence[str], sections: Sequence[str] = SECTIONS) -> dict[str, list[str]]:
    """Assign each `--set` item to the section it configures, validated; a ConfigError names the bad key.

    An item is `section.key.sub=value`; the section may be left out when exactly one of `sections`
    (the sections the command reads) has the key's first part. An item for a section the command does
    not read, an ambiguous or unknown key, or a value of the wrong type is an error: nothing is
    silently ignored. Returns `section -> ["section.key=value", ...]` for every section in `sections`.
    """
    routed: dict[str, list[str]] = {s: [] for s in sections}
    reads = ", ".join(sections) if sections else "no configuration"
    for item in overrides:
        key, _ = parse_override(item)
        head = key.split(".", 1)[0]
        if head in SECTIONS:
            if head not in sections:
                raise ConfigError(f"--set {item!r}: this command does not read the {head!r} section; it reads {reads}")
            if "." not in key:
                raise ConfigError(f"--set {item!r}: name a key inside the section, e.g. --set {head}.KEY=VALUE; "
                                  f"keys of {head}: {', '.join(sorted(default_config(head)))}")
            routed[head].append(item)
            continue
        gone = next((m for s in SECTIONS if (m := removed_key(s, key))), None)
        if gone:  # a removed key written without its section (e.g. retrieval.hide)
            raise ConfigError(f"--set {item!r}: {gone}")
        owners = [s for s in sections if head in default_config(s)]
        if len(owners) > 1:
            raise ConfigError(f"--set {item!r}: {head!r} is a key of several sections ({', '.join(owners)}); "
                              f"name one, e.g. --set {owners[0]}.{item}")
        if not owners:
            allowed = "; ".join(f"{s}: {', '.join(sorted(default_config(s)))}" for s in sections)
            raise ConfigError(f"--set {item!r}: unknown key {head!r}; write --set SECTION.KEY=VALUE with a "
                              f"section this command reads ({reads}). Allowed keys: {allowed or 'none'}")
        routed[owners[0]].append(f"{owners[0]}.{item}")
    for section, items in routed.items():
        if items:
            load_config(section, overrides=items)  # unknown sub-keys and bad values fail here
    return routed


def config_hash(cfg: Mapping[str, Any]) -> str:
    """A short stable hash of a configuration (sorted-key JSON, sha256, 16 hex)."""
    blob = json.dumps(cfg, sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
