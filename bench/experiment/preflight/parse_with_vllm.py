"""Parse server command lines with the argument parser of the vLLM this interpreter imports.

Run as a script by the arm's own interpreter (never imported by specab, which must not
import vLLM): stdin is a JSON list of argument lists (what follows `python -m
vllm.entrypoints.openai.api_server`); the last stdout line is JSON `{"parser": module or
null, "version": vLLM's version, "results": [null | vLLM's message, ...]}`. It builds the
parser `vllm serve` builds and runs the checks the server runs on its parsed arguments
before it loads anything, so a refusal here is the one the server would print.
"""

import contextlib
import importlib
import io
import json
import sys
from typing import Any

PARSER_MODULES = ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args")


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


def _check(module: Any, parser: Any, argv: list[str]) -> str | None:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(sys.stderr):
            args = parser.parse_args(argv)
            validate = getattr(module, "validate_parsed_serve_args", None)
            if validate is not None:
                validate(args)
    except SystemExit:
        return _message(err.getvalue())
    except Exception as exc:  # the server's own checks raise TypeError/ValueError
        return _message(f"{type(exc).__name__}: {exc}")
    return None


def main() -> None:
    argvs = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):  # vLLM may log to stdout on import
        module, parser = _parser()
        version = getattr(sys.modules.get("vllm"), "__version__", None)
    results = [_check(module, parser, a) for a in argvs] if parser is not None else []
    name = getattr(module, "__name__", None)
    print(json.dumps({"parser": name, "version": version, "results": results}))


if __name__ == "__main__":
    main()
