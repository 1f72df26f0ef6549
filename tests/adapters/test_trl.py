"""The TRL environment class, and TRL's own `GRPOTrainer` training a tiny model on the environment's rewards.

Nothing is downloaded: the model is a randomly initialised causal LM built from a config here, its tokenizer a
byte-level BPE trained here with `tokenizers` on the very transcripts it learns from, its chat template TRL's
own Qwen3 template (TRL refuses templates that cannot render tool calls). A random model never emits a tool
call, so every reward would be the same and GRPO would have nothing to learn from: a short supervised warm
start on the scripted agents' tool-call transcripts comes first, then GRPO runs on CPU for one optimizer step.
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import polars as pl
import pytest

from forecast_env import scoring
from forecast_env.envs.events.build import load_events
from tests.support.leaks import SCORE_KEYS, nested_keys

trl = pytest.importorskip("trl", reason="the trl extra is not installed (pip install -c constraints.txt -e '.[trl]')")

from forecast_env.adapters.trl import ForecastToolEnv, ForecastTRL, scripted_chat  # noqa: E402

TOOLS = {"search", "open_article", "notebook_add", "notebook_supersede", "forecast"}
#: Small budgets and caps keep the transcripts (and so the test) short.
ENV = {"max_calls_per_date": 6, "search_k": 2, "article_chars": 300}


def _labels(ws: Path) -> dict[str, str]:
    ev = load_events(ws).events
    return dict(zip(ev["event_id"].to_list(), ev["label"].to_list()))


def _brier(probs: list[float], options: list[str], label: str) -> float:
    """The date's Brier, computed here from the recorded report and the events table (docs/design.md §6)."""
    return scoring.brier(dict(zip(options, probs)), label, options)


def test_public_methods_are_exactly_the_tools_and_reset_clears_everything(micro_events: Path) -> None:
    import gymnasium
    from transformers.utils import get_json_schema

    assert not issubclass(ForecastToolEnv, gymnasium.Env)
    # what TRL 1.16 turns into tools: every public function of the class, inherited ones too
    public = {n for n, _ in inspect.getmembers(ForecastToolEnv, predicate=inspect.isfunction) if not n.startswith("_")}
    assert public - {"reset", "get_reward"} == TOOLS
    envs = ForecastTRL(micro_events, split="train", env=ENV, run_id="trl-contract")
    env = envs()
    for name in TOOLS:
        schema = get_json_schema(getattr(env, name))["function"]  # typed arguments and docstrings TRL can read
        props = schema["parameters"]["properties"]
        assert props and all(p.get("description") for p in props.values())
        assert not {"date", "as_of", "forecast_date"} & set(props)  # the date is the environment's

    rows = envs.rows()
    labels = _labels(micro_events)
    first, second = rows[0], rows[1]
    assert env.reset(**first) is None
    hits = json.loads(env.search(query="the question", k=2))
    assert hits["error"] is None and hits["forecast_date"] == first["forecast_date"]
    env.notebook_add(claim="a claim", date_observed=first["forecast_date"], doc_ids=[])
    report = {o: (i + 1.0) for i, o in enumerate(_options(envs, first))}
    receipt = json.loads(env.forecast(probabilities=report))
    assert receipt["tool_result"]["recorded"] and not SCORE_KEYS & nested_keys(receipt)
    assert json.loads(env.search(query="again"))["error"]  # the unit is over: no further call is played
    opts = _options(envs, first)
    norm = scoring.normalize_report(report, opts).probs
    assert env.get_reward() == pytest.approx(-scoring.brier(norm, labels[first["event_id"]], opts), abs=1e-12)

    # a new rollout starts from nothing: no notebook, full budget, the new row's date
    env.reset(**second)
    fresh = json.loads(env.open_article(doc_id="no-such-doc"))
    assert fresh["forecast_date"] == second["forecast_date"]
    assert fresh["budget_left"] == ENV["max_calls_per_date"] - 1
    assert env._session is not None and env._session.env.unwrapped._notebook.to_list() == []
    # a rollout that never forecasts gets the environment's uniform fallback
    opts2 = _options(envs, second)
    uniform = {o: 1 / len(opts2) for o in opts2}
    assert env.get_reward() == pytest.approx(-scoring.brier(uniform, labels[second["event_id"]], opts2), abs=1e-12)
    rec = envs.close()
    assert rec["engine"] == "trl" and rec["session"] == "per_date" and rec["rollouts_recorded"] == 2


def test_whole_event_rows_carry_the_notebook_and_score_every_date(micro_events: Path) -> None:
    envs = ForecastTRL(micro_events, split="train", unit="event", env=ENV, run_id="trl-events")
    rows = envs.rows()
    assert len(rows) == len(envs.run.episodes) and all(r["step"] is None for r in rows)
    ep = max(envs.run.episodes, key=lambda e: len(e.dates))
    row = next(r for r in rows if r["event_id"] == ep.event_id)
    env = envs()
    env.reset(**row)
    env.notebook_add(claim="kept across dates", date_observed=row["forecast_date"], doc_ids=[])
    label, briers = _labels(micro_events)[ep.event_id], []
    for d in ep.dates:
        report = [1.0 + i for i in range(len(d.options))]  # a list aligned with the options
        obs = json.loads(env.forecast(probabilities=report))
        assert not SCORE_KEYS & nested_keys(obs)
        if d is not ep.dates[-1]:  # the next date's full observation, the notebook carried (memory on)
            assert obs["forecast_date"] != d.day.isoformat() and obs["notebook"][0]["claim"] == "kept across dates"
        briers.append(scoring.brier(scoring.normalize_report(report, list(d.options)).probs, label, list(d.options)))
    assert env.get_reward() == pytest.approx(-sum(briers) / len(briers), abs=1e-12)
    assert envs.close()["session"] == "episode"


def _options(envs: ForecastTRL, row: dict) -> list[str]:
    ep = next(e for e in envs.run.episodes if e.event_id == row["event_id"])
    return list(next(d for d in ep.dates if d.step == row["step"]).options)


# ---------------------------------------------------------------------------------------------
# TRL's GRPOTrainer, end to end
# ---------------------------------------------------------------------------------------------

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
           "</tool_response>", "<think>", "</think>"]


def _tokenizer(texts: list[str]):
    """A byte-level BPE trained on `texts`, with TRL's Qwen3 chat template (tool calls in <tool_call> tags)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_chat_template

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=1200, special_tokens=SPECIAL, show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  padding_side="left")
    tok.chat_template = qwen3_chat_template
    return tok


def _forecast_rate(model, tok, rows: list[dict], tools: list, template: str) -> float:
    """The share of sampled first turns (as GRPOTrainer samples them) that parse as a forecast tool call."""
    import torch
    from trl.chat_template_utils import parse_response

    model.eval()
    ok = total = 0
    with torch.no_grad():
        for row in rows:
            prompt = tok.apply_chat_template(row["prompt"], tools=tools, add_generation_prompt=True, tokenize=True,
                                             return_dict=True, chat_template=template)["input_ids"]
            out = model.generate(torch.tensor([prompt] * 2), max_new_tokens=60, do_sample=True, temperature=1.0,
                                 pad_token_id=tok.pad_token_id)
            for seq in out[:, len(prompt):].tolist():
                calls = parse_response(tok, seq, prefix=prompt, tools=tools).get("tool_calls") or []
                ok += any(c.get("function", {}).get("name") == "forecast" for c in calls)
                total += 1
    model.train()
    return ok / total


def _warm_start(model, tok, chats: list[list[dict]], tools: list, rows: list[dict], max_steps: int = 480,
                check_every: int = 40, target: float = 0.5) -> float:
    """Supervised steps on the assistant turns of the transcripts, rendered as GRPOTrainer renders rollouts, until
    at least `target` of sampled first turns are well-formed forecast calls (checked every `check_every` steps,
    so the warm start does not depend on how fast this machine's arithmetic converges)."""
    import torch
    from trl.chat_template_utils import add_response_schema, get_training_chat_template

    template = get_training_chat_template(tok)
    add_response_schema(tok)  # the parser GRPOTrainer would set for TRL's Qwen3 template
    batches = []
    for chat in chats:
        enc = tok.apply_chat_template(chat, tools=tools, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True, chat_template=template)
        ids = torch.tensor([enc["input_ids"]])
        batches.append((ids, ids.masked_fill(torch.tensor([enc["assistant_masks"]]) == 0, -100)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    rate = 0.0
    for i in range(max_steps):
        ids, labels = batches[i % len(batches)]
        model(input_ids=ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
        if (i + 1) % check_every == 0 and (i + 1) >= 2 * check_every:
            rate = _forecast_rate(model, tok, rows, tools, template)
            if rate >= target:
                break
    return rate


@pytest.mark.slow
def test_grpo_trainer_trains_on_the_environments_rewards(micro_events: Path, tmp_path: Path) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from forecast_env.agents import make_agent
    from forecast_env.eval.report.render import build_report

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread beats several contending ones
    try:
        torch.manual_seed(0)
        # 1. scripted transcripts: two of the package's agents play every training row (in their own run);
        # reports as lists aligned with the options, which a model this small learns to write in a few steps
        warm = ForecastTRL(micro_events, split="train", env=ENV, label="warm-start", run_id="trl-warm-start")
        rows = warm.rows()
        chats = [scripted_chat(warm, row, make_agent(name, workspace=micro_events, split="train"), aligned=True)
                 for row in rows for name in ("base_rate", "uniform")]
        tool_env = warm()
        tools = [getattr(tool_env, n) for n in sorted(TOOLS)]
        assert warm.close()["rollouts_recorded"] == len(chats)
        assert all(m["tool_calls"][0]["function"]["name"] == "forecast" for c in chats for m in c if m.get("tool_calls"))

        from trl.chat_template_utils import qwen3_chat_template

        plain = _tokenizer(["<|im_start|>"])  # renders the transcripts for BPE training
        plain.chat_template = qwen3_chat_template
        tok = _tokenizer([plain.apply_chat_template(c, tools=tools, tokenize=False) for c in chats])
        config = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=8192,
                             tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        model = Qwen3ForCausalLM(config)
        assert _warm_start(model, tok, chats, tools, rows) >= 0.5
        before = {n: p.detach().clone() for n, p in model.named_parameters()}

        # 2. GRPO on the environment's rewards (get_reward), every rollout recorded in the training run
        envs = ForecastTRL(micro_events, split="train", env=ENV, run_id="trl-grpo")
        received: list[tuple[str, int, int, float]] = []

        class Recorded(ForecastToolEnv):
            """Notes each reward TRL receives, with the rollout it scored (no new public method)."""

            def get_reward(self) -> float:
                session = self._session
                reward = super().get_reward()
                assert session is not None
                received.append((session.event_id, session.step, session.rollout, reward))
                return reward

        args = GRPOConfig(output_dir=str(tmp_path / "grpo"), use_cpu=True, bf16=False, fp16=False, seed=0,
                          per_device_train_batch_size=16, num_generations=8, max_steps=1, learning_rate=5e-3,
                          max_completion_length=768, max_tool_calling_iterations=4, beta=0.0, temperature=1.0,
                          logging_steps=1, report_to="none", save_strategy="no", dataloader_num_workers=0)
        trainer = GRPOTrainer(model=model, args=args, processing_class=tok, train_dataset=envs.dataset(),
                              environment_factory=lambda: Recorded(envs.run))
        trainer.train()
        rec = envs.close()
    finally:
        torch.set_num_threads(threads)

    assert trainer.state.global_step == args.max_steps
    logs = [h for h in trainer.state.log_history if "reward_std" in h]
    assert any(h["tools/call_frequency"] > 0 for h in logs)  # the model called the environment's tools
    # rewards varied within a group (GRPO's advantages are not all zero): the trainer had a signal
    assert any(h["frac_reward_zero_std"] < 1 for h in logs)
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(p.detach().cpu(), before[n])]
    assert changed

    # the rewards TRL trained on are the environment's scores of the recorded rollouts
    assert len(received) == args.max_steps * args.per_device_train_batch_size
    labels = _labels(micro_events)
    parts = {(p["event_id"], p["rollout"]): p for p in envs.run.run.parts()}
    assert len(parts) == len(received) == rec["rollouts_recorded"]
    for event_id, step, rollout, reward in received:
        (row,) = [f for f in parts[(event_id, rollout)]["forecasts"] if f["step"] == step]
        assert reward == pytest.approx(-_brier(row["probs"], row["options"], labels[event_id]), abs=1e-12)
        assert reward == pytest.approx(-row["brier"], abs=1e-12)
    assert len({r for *_, r in received}) > 1
    assert rec["engine"] == "trl" and rec["session"] == "per_date" and rec["status"] == "complete"
    forecasts = pl.read_parquet(envs.run_dir / "forecasts.parquet")
    assert forecasts.height == len(received)
    build_report(envs.run_dir)  # the report reads the training run like any other
    assert (envs.run_dir / "report.md").exists()
