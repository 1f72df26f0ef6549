"""The ONNX embedding backend (docs/design.md §3): a transformer exported once with `torch.onnx`, run
by onnxruntime with the model's own fast tokenizer.

The exported graph is the transformer followed by the model's pooling (mean over the attention mask,
as sentence-transformers computes it, or the CLS token), so it returns one vector per text; callers
L2-normalize. The export is cached per machine (`model_cache`), keyed by the model's files, the opset,
the quantization (and for `int8-static` the calibration set's hash) and the torch version. BERT-family
graphs are first fused by onnxruntime's transformer optimizer (attention, GELU and layer norm become
single kernels).

Quantization (`embed.quantize`):
- null: float32; texts run in length-sorted batches (padding is masked, so batching changes a vector
  only in the last float bits).
- `int8`: dynamic int8 quantization of the MatMul weights, per output channel. Its activation scales
  are computed per run, so a batch would make a text's vector depend on the other texts in it (and a
  month's index on which articles share a batch): it embeds one text per run.
- `int8-static`: the weights of every projection (the fused attention's QKV, the attention output and
  both feed-forward layers) int8 per output channel, and the inputs of those projections quantized to
  uint8 with FIXED scales calibrated once (min/max over a packaged set of real-style news texts, each
  run alone, `calibration_texts.json`). A text's vector is then a function of its own text inside any
  batch, so it embeds length-sorted batches like float32. onnxruntime's own int8 kernels run it
  (`QuantizeLinear` + `QAttention` / `MatMulIntegerToFloat`); the graph rewrite is ours because
  `onnxruntime.quantization.quantize_static` cannot type the fused graph's contrib ops, and on the
  unfused graph it also quantizes the projections' outputs (cosine with torch 0.93 on articles).

Without `optimum`: it pins an older transformers than this project's.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from forecast_env.errors import ConfigError
from forecast_env.retrieval.model_cache import artifact_dir, build_once, read_meta

OPSET = 17
#: Bump when the export recipe changes, so cached exports are rebuilt.
EXPORT_VERSION = 2
#: onnxruntime's graph fusions that sessions leave out: its CPU SkipLayerNormalization kernel takes
#: about 5x the time of the Add + LayerNormalization it replaces (0.50 vs 0.10 ms for 256 x 384).
DISABLED_FUSIONS = ["SkipLayerNormFusion"]
#: Bump when the static quantization recipe changes (it is part of an int8-static export's cache key).
STATIC_VERSION = 1
QUANTIZE = (None, "int8", "int8-static")
BERT_FAMILY = ("bert", "roberta", "xlm-roberta", "distilbert", "electra")
#: The texts whose activation ranges fix an int8-static model's scales (packaged; hashed into the cache key).
CALIBRATION_TEXTS = Path(__file__).with_name("calibration_texts.json")
#: Tokens per calibration text (the default embed.max_seq_length; longer texts are cut there).
CALIBRATION_TOKENS = 256
#: At most this many (padded) tokens per run on CPU: two long articles, or many short texts. Larger runs
#: are slower per text on CPU (their activations leave the caches); a GPU takes `batch_size` texts.
BATCH_TOKENS = 512


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("torch", "transformers", "onnxruntime"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "none"
    return out


def _require_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise ConfigError(
            "embed.backend = 'onnx' needs onnxruntime, which is not installed: pip install onnxruntime onnx "
            "(or set embed.backend: torch)") from exc
    return onnxruntime


def _load_errors(ort: Any) -> tuple[type[BaseException], ...]:
    """What onnxruntime raises for a model file it cannot load (its own classes, not RuntimeError)."""
    state = ort.capi.onnxruntime_pybind11_state
    names = ("Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "NoModel", "NoSuchFile",
             "RuntimeException", "NotImplemented")
    return tuple(getattr(state, n) for n in names if hasattr(state, n)) + (OSError, ValueError, RuntimeError)


def pooling_mode(model_dir: Path) -> str:
    """`mean` or `cls`, from the sentence-transformers pooling config (mean when there is none)."""
    modules = Path(model_dir) / "modules.json"
    if modules.exists():
        for m in json.loads(modules.read_text()):
            if m.get("type", "").endswith("Pooling"):
                cfg = json.loads((Path(model_dir) / m["path"] / "config.json").read_text())
                if cfg.get("pooling_mode_cls_token"):
                    return "cls"
                if cfg.get("pooling_mode_mean_tokens"):
                    return "mean"
                raise ConfigError(f"{model_dir}: the ONNX backend supports mean or CLS pooling; this model pools "
                                  "otherwise: use embed.backend: torch")
    return "mean"


def calibration_texts() -> list[str]:
    """The packaged calibration set of an `int8-static` export."""
    texts = json.loads(CALIBRATION_TEXTS.read_text(encoding="utf-8"))
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
        raise ConfigError(f"{CALIBRATION_TEXTS}: expected a JSON list of non-empty texts; reinstall forecast-env")
    return texts


def calibration_hash() -> str:
    """A short hash of the calibration set (part of an int8-static export's cache key)."""
    return hashlib.sha256(CALIBRATION_TEXTS.read_bytes()).hexdigest()[:16]


def export_dir(model_name: str, model_dir: Path, quantize: str | None, opset: int = OPSET) -> Path:
    """The cache folder of this model's export."""
    params: dict[str, Any] = {"opset": opset, "quantize": quantize, "version": EXPORT_VERSION, **_versions()}
    if quantize == "int8-static":
        params |= {"calibration": calibration_hash(), "calibration_tokens": CALIBRATION_TOKENS,
                   "static_version": STATIC_VERSION}
    return artifact_dir("onnx", model_name, model_dir, params)


def export_onnx(model_name: str, model_dir: Path, quantize: str | None = None, opset: int = OPSET,
                rebuild: bool = False) -> Path:
    """Export (once) and return the cache folder holding `model.onnx` and `tokenizer.json`."""
    if quantize not in QUANTIZE:
        raise ConfigError(f"embed.quantize = {quantize!r} is not supported; choose null, int8 or int8-static")
    _require_onnxruntime()
    folder = export_dir(model_name, model_dir, quantize, opset)
    return build_once(folder, lambda tmp: _export(model_dir, tmp, quantize, opset), rebuild)


def _export(model_dir: Path, out: Path, quantize: str | None, opset: int) -> None:
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(model_dir)
    # eager attention traces to plain ops whose padding mask is an input, not a traced constant
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(f"{model_dir}: the ONNX backend needs a fast tokenizer (tokenizer.json); use embed.backend: torch")
    tokenizer.backend_tokenizer.save(str(out / "tokenizer.json"))
    pooling = pooling_mode(model_dir)
    with_types = "token_type_ids" in inspect.signature(model.forward).parameters

    class Pooled(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
            kw = {"token_type_ids": rest[0]} if rest else {}
            h = self.inner(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state
            if pooling == "cls":
                return h[:, 0]
            mask = attention_mask.unsqueeze(-1).to(h.dtype)
            return (h * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)

    # a padded row in the example, so that nothing traces the mask as all ones
    ids = torch.ones(2, 16, dtype=torch.long)
    mask = ids.clone()
    mask[1, 9:] = 0
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if with_types else [])
    args = (ids, mask) + ((torch.zeros_like(ids),) if with_types else ())
    raw = out / "raw.onnx"
    import warnings

    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(Pooled(model), args, str(raw), input_names=names, output_names=["embedding"],
                          dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in names}, "embedding": {0: "batch"}},
                          opset_version=opset, dynamo=False)
    graph = raw
    if config.model_type in BERT_FAMILY:
        from onnxruntime.transformers import optimizer

        fused = optimizer.optimize_model(str(raw), model_type="bert", num_heads=int(config.num_attention_heads),
                                         hidden_size=int(config.hidden_size), opt_level=1)
        _split_skip_layer_norms(fused.model)
        graph = out / "fused.onnx"
        fused.save_model_to_file(str(graph))
    final = out / "model.onnx"
    if quantize == "int8":
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(graph), str(final), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"],
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    max_len = int(getattr(config, "max_position_embeddings", 512))
    if config.model_type in ("roberta", "xlm-roberta"):
        max_len -= 2  # position ids start after the padding index
    extra: dict[str, Any] = {}
    if quantize == "int8-static":
        ranges = calibrate(graph, out / "tokenizer.json", names, calibration_texts(),
                           min(CALIBRATION_TOKENS, max_len))
        quantize_static_int8(graph, final, ranges)
        blob = json.dumps({"method": "minmax", "texts": len(calibration_texts()), "set_sha256": calibration_hash(),
                           "ranges": ranges}, indent=1, sort_keys=True)
        (out / "calibration.json").write_text(blob)
        extra = {"calibration_sha256": hashlib.sha256(blob.encode()).hexdigest()}
    elif quantize != "int8":
        os.replace(graph, final)
    for p in (raw, out / "fused.onnx"):
        p.unlink(missing_ok=True)
    meta = {"pooling": pooling, "inputs": names, "dim": int(config.hidden_size), "max_length": max_len,
            "model_bytes": final.stat().st_size, "pad_id": int(tokenizer.pad_token_id or 0),
            "quantize": quantize, "opset": opset, **extra}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))


def _split_skip_layer_norms(model: Any) -> None:
    """Replace each fused `SkipLayerNormalization(x, skip, gamma, beta, bias)` by `Add`s and a standard
    `LayerNormalization` (the same function; see DISABLED_FUSIONS for why)."""
    from onnx import helper

    nodes = []
    for node in model.graph.node:
        if node.op_type != "SkipLayerNormalization" or len([o for o in node.output if o]) != 1:
            nodes.append(node)
            continue
        x, skip, gamma, beta = node.input[:4]
        bias = node.input[4] if len(node.input) > 4 else ""
        eps = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "epsilon"), 1e-12)
        name = node.name or node.output[0]
        if bias:
            nodes.append(helper.make_node("Add", [x, bias], [f"{name}_biased"], name=f"{name}_bias"))
            x = f"{name}_biased"
        nodes.append(helper.make_node("Add", [x, skip], [f"{name}_sum"], name=f"{name}_skip"))
        nodes.append(helper.make_node("LayerNormalization", [f"{name}_sum", gamma, beta], [node.output[0]],
                                      name=f"{name}_norm", axis=-1, epsilon=float(eps)))
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def _quantized_nodes(model: Any) -> list[int]:
    """Positions of the projections an int8-static model quantizes: fused attention (its QKV weight) and
    every MatMul whose second input is a weight."""
    weights = {i.name for i in model.graph.initializer}
    return [i for i, n in enumerate(model.graph.node)
            if n.op_type == "Attention" or (n.op_type == "MatMul" and n.input[1] in weights)]


def calibrate(graph: Path, tokenizer_file: Path, inputs: Sequence[str], texts: Sequence[str],
              max_tokens: int) -> dict[str, list[float]]:
    """Min/max of the input of every quantized projection over `texts` (each run alone, cut at
    `max_tokens`), widened to include 0: {tensor name: [min, max]}."""
    import onnx
    import onnxruntime as ort
    from tokenizers import Tokenizer

    model = onnx.load(str(graph))
    names = sorted({model.graph.node[i].input[0] for i in _quantized_nodes(model)})
    if not names:
        raise ConfigError(f"{graph}: no MatMul or Attention with weights to quantize; use embed.quantize: int8 or null")
    for name in names:
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the tensors must survive
    opts.intra_op_num_threads = _threads()
    opts.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(tokenizer_file))
    tok.no_padding()
    tok.enable_truncation(int(max_tokens))
    lo = dict.fromkeys(names, 0.0)
    hi = dict.fromkeys(names, 0.0)
    for text in texts:
        ids = np.asarray([tok.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        for name, value in zip(names, session.run(names, feed)):
            lo[name] = min(lo[name], float(value.min()))
            hi[name] = max(hi[name], float(value.max()))
    return {n: [lo[n], hi[n]] for n in names}


def quantize_static_int8(graph: Path, out: Path, ranges: dict[str, list[float]]) -> None:
    """Rewrite a float graph with fixed activation scales: each quantized projection's input goes
    through `QuantizeLinear` (uint8, asymmetric, the calibrated range), its weight becomes int8
    (symmetric, one scale per output column), and the projection runs as `QAttention` or
    `MatMulIntegerToFloat` (float output, so the bias, GELU and layer norms stay float)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(graph))
    weights = {i.name: i for i in model.graph.initializer}
    targets = set(_quantized_nodes(model))
    added: list[Any] = []
    quantized_inputs: dict[str, tuple[str, str, str]] = {}
    nodes: list[Any] = []

    def activation(name: str) -> tuple[str, str, str]:
        if name not in quantized_inputs:
            if name not in ranges:
                raise ConfigError(f"{graph}: no calibrated range for {name!r}; delete the export and rebuild it")
            lo, hi = (float(v) for v in ranges[name])
            scale = max(hi - lo, 1e-8) / 255.0
            zero = int(np.clip(round(-lo / scale), 0, 255))
            q, s, z = (f"{name}_q8", f"{name}_q8_scale", f"{name}_q8_zero")
            added.extend([numpy_helper.from_array(np.array(scale, np.float32), s),
                          numpy_helper.from_array(np.array(zero, np.uint8), z)])
            nodes.append(helper.make_node("QuantizeLinear", [name, s, z], [q], name=f"{name}_QuantizeLinear"))
            quantized_inputs[name] = (q, s, z)
        return quantized_inputs[name]

    def weight(name: str) -> tuple[str, str, str]:
        w = numpy_helper.to_array(weights[name]).astype(np.float32)
        scale = (np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0).astype(np.float32)
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        names = (f"{name}_q8", f"{name}_q8_scale", f"{name}_q8_zero")
        added.extend([numpy_helper.from_array(q, names[0]), numpy_helper.from_array(scale, names[1]),
                      numpy_helper.from_array(np.zeros(scale.shape, np.int8), names[2])])
        return names

    for position, node in enumerate(model.graph.node):
        if position not in targets:
            nodes.append(node)
            continue
        xq, xs, xz = activation(node.input[0])
        wq, ws, wz = weight(node.input[1])
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "MatMul":
            nodes.append(helper.make_node("MatMulIntegerToFloat", [xq, wq, xs, ws, xz, wz], list(node.output),
                                          name=f"{node.name}_int8", domain="com.microsoft"))
        else:  # Attention(input, weight, bias, mask_index, ...) -> QAttention(input, weight, bias, scales, mask, zeros)
            mask = node.input[3] if len(node.input) > 3 else ""
            nodes.append(helper.make_node("QAttention", [xq, wq, node.input[2], xs, ws, mask, xz, wz],
                                          list(node.output), name=f"{node.name}_int8", domain="com.microsoft",
                                          **attrs))
    used = {i for n in nodes for i in n.input}
    kept = [i for i in model.graph.initializer if i.name in used] + [i for i in added if i.name in used]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, str(out))


def _threads() -> int:
    """Compute threads: the process's share (`OMP_NUM_THREADS`, set by worker pools), else the CPUs it may use."""
    share = os.environ.get("OMP_NUM_THREADS", "")
    if share.isdigit() and int(share) > 0:
        return int(share)
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class OnnxEncoder:
    """Pooled (not yet normalized) vectors from an exported model, in input order."""

    def __init__(self, model_name: str, model_dir: Path, max_seq_length: int = 256, quantize: str | None = None,
                 device: str = "cpu", batch_size: int = 64):
        ort = _require_onnxruntime()
        # dynamic int8 quantization scales activations per run: a batch would make a text's vector
        # depend on the other texts in it, so it embeds one text per run; float32 and int8-static
        # (fixed scales) batch
        self.batch_size = 1 if quantize == "int8" else max(1, int(batch_size))
        self.quantize = quantize
        self.threads = _threads()
        self._ort = ort
        self._single: Any = None  # a one-thread session that `threads` callers share (documents, CPU only)
        self._lazy = threading.Lock()  # creates it once when threads race to it
        self.folder = export_onnx(model_name, model_dir, quantize)
        errors: tuple[type[BaseException], ...] = (ConfigError, *_load_errors(ort))
        try:
            self._open(ort, device, max_seq_length)
        except errors as exc:
            # a corrupt or truncated cached export: build it again, once
            self.folder = export_onnx(model_name, model_dir, quantize, rebuild=True)
            try:
                self._open(ort, device, max_seq_length)
            except errors as exc2:
                raise ConfigError(
                    f"embed.backend = 'onnx' (quantize {quantize}): cannot load the exported model at {self.folder} "
                    f"even after rebuilding it ({type(exc2).__name__}: {exc2}); delete that folder, check that "
                    "onnxruntime works (python -c 'import onnxruntime'), or set embed.backend: torch") from exc

    def _open(self, ort: Any, device: str, max_seq_length: int) -> None:
        from tokenizers import Tokenizer

        meta = read_meta(self.folder)
        path = self.folder / "model.onnx"
        if meta is None or not path.exists() or path.stat().st_size != meta.get("model_bytes"):
            raise ConfigError(f"{self.folder}: incomplete ONNX export")
        if meta.get("quantize") == "int8-static":
            calib = self.folder / "calibration.json"
            digest = hashlib.sha256(calib.read_bytes()).hexdigest() if calib.exists() else None
            if digest != meta.get("calibration_sha256"):
                raise ConfigError(f"{calib}: the calibration cache is missing or does not match the export")
        self.meta = meta
        providers = ["CPUExecutionProvider"]
        if device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        self.cpu = providers == ["CPUExecutionProvider"]
        self.session = self._session(self.threads, providers)
        self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(min(int(max_seq_length), int(meta["max_length"])))
        self.inputs = list(meta["inputs"])
        self.pad_id = int(meta["pad_id"])
        self.dim = int(meta["dim"])

    def _session(self, threads: int, providers: list[str]) -> Any:
        ort = self._ort
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        return ort.InferenceSession(str(self.folder / "model.onnx"), opts, providers=providers,
                                    disabled_optimizers=DISABLED_FUSIONS)

    def batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        """Row indices of each run: longest texts first, at most `batch_size` texts and (on CPU)
        `BATCH_TOKENS` padded tokens per run; one text per run for dynamic int8."""
        order = np.argsort(-lengths, kind="stable")
        out: list[np.ndarray] = []
        start = 0
        while start < len(order):
            width = max(int(lengths[order[start]]), 1)
            size = max(1, min(self.batch_size, BATCH_TOKENS // width)) if self.cpu else self.batch_size
            out.append(order[start:start + size])
            start += size
        return out

    def encode_one_thread(self, texts: Sequence[str]) -> np.ndarray:
        """`encode` on a one-thread session (queries: the vector does not depend on the machine's cores)."""
        if not self.cpu:
            return self.encode(texts)
        if self._single is None:
            with self._lazy:
                if self._single is None:
                    self._single = self._session(1, ["CPUExecutionProvider"])
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        encs = [self.tokenizer.encode(t) for t in texts]
        for i, e in enumerate(encs):
            ids = np.asarray([e.ids], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            out[i] = self._single.run(None, feed)[0][0]
        return out

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One pooled float32 vector per text (length-sorted batches; output in input order)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self.tokenizer.encode_batch(list(texts)) if len(texts) > 1 else [self.tokenizer.encode(texts[0])]
        lengths = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
        batches = self.batches(lengths)

        def feed(idx: np.ndarray) -> dict[str, np.ndarray]:
            width = int(lengths[idx[0]])
            ids = np.full((len(idx), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for r, j in enumerate(idx):
                n = int(lengths[j])
                ids[r, :n] = encs[j].ids
                mask[r, :n] = 1
            f = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                f["token_type_ids"] = np.zeros_like(ids)
            return f

        if len(batches) > 1 and self.threads > 1 and self.cpu:
            # several runs: one per core at a time on a one-thread session (onnxruntime runs release the
            # GIL), instead of splitting every small kernel of one run across the cores
            from concurrent.futures import ThreadPoolExecutor

            if self._single is None:
                with self._lazy:
                    if self._single is None:
                        self._single = self._session(1, ["CPUExecutionProvider"])
            single = self._single
            with ThreadPoolExecutor(self.threads) as pool:
                for idx, vecs in zip(batches, pool.map(lambda i: single.run(None, feed(i))[0], batches)):
                    out[idx] = vecs
        else:
            for idx in batches:
                out[idx] = self.session.run(None, feed(idx))[0]
        return out
