"""specab: multi-boot A/B benchmarks of speculative-decoding acceptance."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("specab")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"

__all__ = ["__version__"]
