"""The ONNX embedding backend (docs/design.md §3): a transformer exported once with `torch.onnx`, run
by onnxruntime with the model's own fast tokenizer.

The exported graph is the transformer followed by the model's pooling (mean over the attention mask,
as sentence-transformers computes it, or the CLS token), so it returns one vector per text; callers
L2-normalize. The export is cached per machine (`model_cache`), keyed by the model's files, the opset,
the quantization and the torch version. `quantize="int8"` adds dynamic int8 quantization of the
MatMul weights, per output channel (per-tensor scales lose too much agreement with the float model);
its activation scales are computed per run, so a quantized model embeds one text per run, which
keeps every vector a function of its own text alone (batch composition must not change an index).
BERT-family graphs are first fused by onnxruntime's transformer optimizer (attention, GELU and layer
norm become single kernels).

Without `optimum`: it pins an older transformers than this project's.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from forecast_env.errors import ConfigError
from forecast_env.retrieval.model_cache import artifact_dir, build_once, read_meta

OPSET = 17
#: Bump when the export recipe changes, so cached exports are rebuilt.
EXPORT_VERSION = 1
QUANTIZE = (None, "int8")
BERT_FAMILY = ("bert", "roberta", "xlm-roberta", "distilbert", "electra")


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


def export_dir(model_name: str, model_dir: Path, quantize: str | None, opset: int = OPSET) -> Path:
    """The cache folder of this model's export."""
    params = {"opset": opset, "quantize": quantize, "version": EXPORT_VERSION, **_versions()}
    return artifact_dir("onnx", model_name, model_dir, params)


def export_onnx(model_name: str, model_dir: Path, quantize: str | None = None, opset: int = OPSET,
                rebuild: bool = False) -> Path:
    """Export (once) and return the cache folder holding `model.onnx` and `tokenizer.json`."""
    if quantize not in QUANTIZE:
        raise ConfigError(f"embed.quantize = {quantize!r} is not supported; choose null or int8")
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
        graph = out / "fused.onnx"
        fused.save_model_to_file(str(graph))
    final = out / "model.onnx"
    if quantize == "int8":
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(graph), str(final), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"],
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    else:
        os.replace(graph, final)
    for p in (raw, out / "fused.onnx"):
        p.unlink(missing_ok=True)
    max_len = int(getattr(config, "max_position_embeddings", 512))
    if config.model_type in ("roberta", "xlm-roberta"):
        max_len -= 2  # position ids start after the padding index
    meta = {"pooling": pooling, "inputs": names, "dim": int(config.hidden_size), "max_length": max_len,
            "model_bytes": final.stat().st_size, "pad_id": int(tokenizer.pad_token_id or 0),
            "quantize": quantize, "opset": opset}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))


def _threads() -> int:
    share = os.environ.get("OMP_NUM_THREADS", "")
    return int(share) if share.isdigit() and int(share) > 0 else (os.cpu_count() or 1)


class OnnxEncoder:
    """Pooled (not yet normalized) vectors from an exported model, in input order."""

    def __init__(self, model_name: str, model_dir: Path, max_seq_length: int = 256, quantize: str | None = None,
                 device: str = "cpu", batch_size: int = 64):
        ort = _require_onnxruntime()
        # dynamic int8 quantization scales activations per run: a batch would make a text's vector
        # depend on the other texts (and their padding) in it, so quantized models embed one text per run
        self.batch_size = 1 if quantize else int(batch_size)
        self.folder = export_onnx(model_name, model_dir, quantize)
        errors = _load_errors(ort)
        try:
            self._open(ort, device, max_seq_length)
        except (ConfigError, *errors) as exc:
            # a corrupt or truncated cached export: build it again, once
            self.folder = export_onnx(model_name, model_dir, quantize, rebuild=True)
            try:
                self._open(ort, device, max_seq_length)
            except (ConfigError, *errors) as exc2:
                raise ConfigError(
                    f"embed.backend = 'onnx': cannot load the exported model at {self.folder} even after "
                    f"rebuilding it ({type(exc2).__name__}: {exc2}); delete that folder, check that onnxruntime "
                    "works (python -c 'import onnxruntime'), or set embed.backend: torch") from exc

    def _open(self, ort: Any, device: str, max_seq_length: int) -> None:
        from tokenizers import Tokenizer

        meta = read_meta(self.folder)
        path = self.folder / "model.onnx"
        if meta is None or not path.exists() or path.stat().st_size != meta.get("model_bytes"):
            raise ConfigError(f"{self.folder}: incomplete ONNX export")
        self.meta = meta
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = _threads()
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        providers = ["CPUExecutionProvider"]
        if device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        self.session = ort.InferenceSession(str(path), opts, providers=providers)
        self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(min(int(max_seq_length), int(meta["max_length"])))
        self.inputs = list(meta["inputs"])
        self.pad_id = int(meta["pad_id"])
        self.dim = int(meta["dim"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One pooled float32 vector per text (length-sorted batches; output in input order)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self.tokenizer.encode_batch(list(texts)) if len(texts) > 1 else [self.tokenizer.encode(texts[0])]
        lengths = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
        order = np.argsort(-lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            width = int(lengths[idx[0]])
            ids = np.full((len(idx), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for r, j in enumerate(idx):
                n = int(lengths[j])
                ids[r, :n] = encs[j].ids
                mask[r, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            out[idx] = self.session.run(None, feed)[0]
        return out
