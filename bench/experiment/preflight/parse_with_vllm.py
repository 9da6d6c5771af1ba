"""Parse server command lines with the argument parser of the vLLM this interpreter imports.

Run as a script by the arm's own interpreter (never imported by specab, which must not
import vLLM): stdin is JSON `{"argvs": [argument list, ...], "warm": [argument list, ...]}`
(what follows `python -m vllm.entrypoints.openai.api_server`); the last stdout line is JSON
`{"parser": module or null, "version": vLLM's version, "results": [null | vLLM's message,
...]}`. It builds the parser `vllm serve` builds and runs the checks the server runs on its
parsed arguments before it loads anything, so a refusal here is the one the server would
print.

With `"engine": [{"argv": real argument list, "env": {name: value}}, ...]` it then builds
each line's engine configuration (`AsyncEngineArgs.create_engine_config`, the step the server
runs before it loads weights: SpeculativeConfig's fields, max-model-len against the model's
own length, ...) with that line's environment, and prints a second line `{"engine": [null |
vLLM's message | "" (not checked), ...]}`.

Then, vLLM imported anyway, it imports the server's modules (their bytecode, see
SERVER_MODULES) and fills vLLM's model-info cache for the `warm` command lines
(their real model paths): the engine config a server builds, with vLLM's architecture
inspection run in this process instead of in a fresh interpreter per architecture. A server
that misses that cache starts such an interpreter for its target and for its draft: the
demo's boot reached /health in 42 s instead of 24 and cost 73 CPU-s instead of 51 on a
2-core machine (benchmarks/bench_boot_phases.py, variant coldinfo), and on a fresh machine
the first two boots of a run each paid it, at the same time. Best effort: a line that fails
here (a hub model, an overlay not built yet) is skipped and its first boot inspects as
before.
"""

import contextlib
import importlib
import io
import json
import os
import signal
import sys
from typing import Any

WARM_BUDGET_S = 60  # the warm-up's bound (≈ 2-5 s per set of architectures on 2 cores)
ENGINE_BUDGET_S = 120  # the engine checks' bound (≈ 0.3-1 s a line once vLLM is imported)
PARSER_MODULES = ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args")
# What a CPU server's processes import beyond the parser: importing them here writes their
# bytecode once (an install without it, as `make install`'s `pip --no-compile`, left every
# first boot compiling them, two boots at once doing it twice); ≈ 2 s once written.
SERVER_MODULES = (
    "vllm.entrypoints.openai.api_server",
    "vllm.v1.engine.core",
    "vllm.v1.worker.cpu_worker",
)


class _OutOfTime(Exception):
    pass


def _out_of_time(signum: int, frame: Any) -> None:
    raise _OutOfTime


def _flexible_parser() -> Any:
    for name in ("vllm.utils.argparse_utils", "vllm.utils"):
        try:
            return importlib.import_module(name).FlexibleArgumentParser
        except (ImportError, AttributeError):
            continue
    raise ImportError("no FlexibleArgumentParser")


def _parser() -> tuple[Any, Any]:
    for name in PARSER_MODULES:
        try:
            module = importlib.import_module(name)
            make = module.make_arg_parser
            flexible = _flexible_parser()
        except (ImportError, AttributeError):
            continue
        return module, make(flexible(description="specab preflight"))
    return None, None


def _message(text: str) -> str:
    """argparse's last line without its program name: `argument --x: invalid int value`."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else "refused"
    return last.split(": error: ", 1)[-1]


PARALLEL = {  # what the ranks of one server are, as vLLM's parser names them
    "tp": "tensor_parallel_size",
    "pp": "pipeline_parallel_size",
    "dp": "data_parallel_size",
    "dp_local": "data_parallel_size_local",
}


def _check(module: Any, parser: Any, argv: list[str]) -> tuple[str | None, dict[str, Any] | None]:
    """vLLM's refusal (None: accepted) and, when accepted, the parallel sizes it parsed (every
    spelling of the flags, as the server reads them)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(sys.stderr):
            args = parser.parse_args(argv)
            validate = getattr(module, "validate_parsed_serve_args", None)
            if validate is not None:
                validate(args)
    except SystemExit:
        return _message(err.getvalue()), None
    except Exception as exc:  # the server's own checks raise TypeError/ValueError
        return _message(f"{type(exc).__name__}: {exc}"), None
    sizes = {k: getattr(args, name, None) for k, name in PARALLEL.items()}
    return None, {k: v for k, v in sizes.items() if isinstance(v, int)}


def _declared(model: Any) -> Any:
    """The architectures a local model's config declares, else the model as given."""
    try:
        with open(os.path.join(str(model), "config.json"), encoding="utf-8") as f:
            return json.load(f).get("architectures") or model
    except (OSError, ValueError, AttributeError):
        return model


def _architectures(model: Any, speculative: Any) -> str:
    """What decides the architectures a line inspects: the target's declared ones, the
    speculative method and the draft's (copies of one model in several places count once)."""
    spec = speculative if isinstance(speculative, dict) else {}
    draft = (
        [spec.get("method"), _declared(spec["model"])] if "model" in spec else spec.get("method")
    )
    return json.dumps([_declared(model), draft], sort_keys=True, default=str)


def _warm(parser: Any, argvs: list[list[str]]) -> None:
    """Import the server's modules, then build each line's engine config (once per set of
    architectures), inspecting its architectures in this process; vLLM writes what it
    inspected to its cache."""
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.model_executor.models import registry
    except ImportError:
        return
    for name in SERVER_MODULES:
        try:
            importlib.import_module(name)
        except _OutOfTime:
            raise
        except BaseException:  # another layout: the boot compiles them
            continue
    if not hasattr(registry, "_run_in_subprocess"):
        return  # another layout: leave the inspection to the boots
    # vLLM inspects in a subprocess to keep CUDA out of a server's main process; this one
    # serves nothing and exits next
    registry._run_in_subprocess = lambda fn: fn()
    seen: set[str] = set()
    for argv in argvs:
        try:
            args = parser.parse_args(argv)
            key = _architectures(args.model, args.speculative_config)
            if key in seen:
                continue
            seen.add(key)
            AsyncEngineArgs.from_cli_args(args).create_engine_config()
        except _OutOfTime:
            raise
        except BaseException:  # best effort: the boot inspects as before
            continue


def _engine_message(exc: BaseException) -> str:
    """One line of what the engine's configuration refused, in vLLM's words, keeping the
    config class and the field (a pydantic error's first line drops the field)."""
    errors = getattr(exc, "errors", None)
    title = getattr(exc, "title", None)
    if callable(errors) and title:
        first = (errors() or [{}])[0]
        loc = ".".join(str(x) for x in first.get("loc", ()))
        msg = str(first.get("msg", exc)).removeprefix("Value error, ")
        text = f"{title}.{loc}: {msg}" if loc else f"{title}: {msg}"
        text += _known_fields(str(title), str(first.get("type")))
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def _known_fields(title: str, kind: str) -> str:
    """For a keyword the config class does not take: ' (fields: a, b, ...)', its own field
    names, from which specab offers the closest."""
    if kind not in ("unexpected_keyword_argument", "extra_forbidden"):
        return ""
    import dataclasses

    import vllm.config as config

    cls = getattr(config, title, None)
    try:
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    except TypeError:
        names = list(getattr(cls, "model_fields", {}))
    return f" (fields: {', '.join(sorted(names))})" if names else ""


def _engine_checks(parser: Any, lines: list[dict[str, Any]]) -> list[str | None]:
    """Build each line's engine configuration as the server does before it loads weights,
    with the line's own environment; vLLM's refusal, or None. Lines left when the budget
    runs out are answered "" (not checked)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.model_executor.models import registry

    if hasattr(registry, "_run_in_subprocess"):  # inspect here: this process serves nothing
        registry._run_in_subprocess = lambda fn: fn()
    answers: list[str | None] = []
    for line in lines:
        saved = dict(os.environ)
        os.environ.update(line.get("env") or {})
        try:
            args = parser.parse_args(line["argv"])
            AsyncEngineArgs.from_cli_args(args).create_engine_config()
            answers.append(None)
        except _OutOfTime:
            break
        except SystemExit:
            answers.append("")  # the parser refused it: the parser's answer says why
        except (ValueError, TypeError) as exc:  # the config's own checks (ValidationError)
            answers.append(_engine_message(exc))
        except Exception:  # anything else (an unreadable weights file, ...): the boot tells
            answers.append("")
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return answers + [""] * (len(lines) - len(answers))


def main() -> None:
    body = json.load(sys.stdin)
    argvs, warm, engine = body["argvs"], body["warm"], body.get("engine") or []
    os.environ["HF_HUB_OFFLINE"] = "1"  # the warm-up reads local models only
    with contextlib.redirect_stdout(sys.stderr):  # vLLM may log to stdout on import
        module, parser = _parser()
        version = getattr(sys.modules.get("vllm"), "__version__", None)
    parsed = [_check(module, parser, a) for a in argvs] if parser is not None else []
    name = getattr(module, "__name__", None)
    results, parallel = [m for m, _ in parsed], [p for _, p in parsed]
    # the answers first: a warm-up that fails or runs long cannot cost them
    body = {"parser": name, "version": version, "results": results, "parallel": parallel}
    print(json.dumps(body), flush=True)
    if parser is None:
        return
    signal.signal(signal.SIGALRM, _out_of_time)
    if engine:
        signal.alarm(ENGINE_BUDGET_S)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                checked = _engine_checks(parser, engine)
        except _OutOfTime:
            checked = [""] * len(engine)
        finally:
            signal.alarm(0)
        print(json.dumps({"engine": checked}), flush=True)
    if not warm:
        return
    signal.alarm(WARM_BUDGET_S)
    try:
        with contextlib.redirect_stdout(sys.stderr), contextlib.redirect_stderr(io.StringIO()):
            _warm(parser, warm)
    except _OutOfTime:
        pass  # what is left, the boots inspect as before
    finally:
        signal.alarm(0)


if __name__ == "__main__":
    main()
