"""The built wheel (not only the editable install) imports under the one namespace."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHECK = """
import json, forecast_env, forecast_env.corpus_build, forecast_env.envs, forecast_env.agents, forecast_env.eval
from forecast_env.config import default_config
from forecast_env.cli.main import build_parser
import importlib, pkgutil
walked = [m.name for m in pkgutil.walk_packages(forecast_env.__path__, "forecast_env.")]
for name in walked:
    importlib.import_module(name)
mods = [forecast_env, forecast_env.corpus_build, forecast_env.envs, forecast_env.agents, forecast_env.eval]
print(json.dumps({"files": [m.__file__ for m in mods], "sections": sorted(default_config(s) and s for s in
      ("corpus", "events", "env", "benchmark")), "help": build_parser().format_help(),
      "walked": walked}))
"""


@pytest.mark.slow
def test_wheel_installs_and_imports_all_five(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        check=True, capture_output=True,
    )
    wheels = list(dist.glob("forecast_env-*.whl"))
    assert len(wheels) == 1
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # the wheel goes into the scratch venv; its dependencies are borrowed from this environment's
    # site-packages by path (a .pth path entry does not run this environment's editable finder)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheels[0])],
                   check=True, capture_output=True)
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # without PYTHONPATH: a checkout on it would be imported instead of the wheel
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([py, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    import json

    out = json.loads(proc.stdout)
    assert all(f.startswith(str(site)) for f in out["files"]), out["files"]
    assert out["sections"] == ["benchmark", "corpus", "env", "events"]
    assert "verify" in out["help"]
    # every module of the source tree is in the wheel
    for folder, prefix in (("forecast_env", "forecast_env"), ("corpus_build", "forecast_env.corpus_build"),
                           ("envs", "forecast_env.envs"), ("agents", "forecast_env.agents"), ("eval", "forecast_env.eval")):
        for src in (REPO / folder).rglob("*.py"):
            rel = src.relative_to(REPO / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            assert ".".join([prefix, *parts]) in out["walked"] + [prefix], src
