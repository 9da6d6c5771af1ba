"""A fake `vllm` package for fault-injection tests only (see api_server.py). Never imported by
product code: tests put tests/fakes first on the server's PYTHONPATH through an arm's env."""

__version__ = "0.0.0+specab-fake"
