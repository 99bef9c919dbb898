"""morgana from Python. Today this is the runtime binding alone (morgana.runtime: open bundles, launch their
programs on raw device pointers or PyTorch tensors); the compiler's API will join it here later.

Use it from a checkout with `PYTHONPATH=python` (or `sys.path.insert(0, "python")`)."""

from . import runtime  # noqa: F401

__all__ = ["runtime"]
