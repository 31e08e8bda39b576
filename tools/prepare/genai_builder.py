"""onnxruntime-genai's model builder, run with one fix: ``python -m tools.prepare.genai_builder
ARGS`` takes the builder's own arguments.

The fix: transformers 5 gives Gemma 3 one RoPE section per layer type
(``rope_parameters = {"full_attention": {...}, "sliding_attention": {...}}``), and the
builder's Gemma 3 class (0.18) still reads the flat form (``rope_theta``,
``rope_local_base_freq``), failing with ``KeyError: 'rope_type'``. Its Gemma 4 class reads
the nested form, so this maps it the same way. Other models build unchanged.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any


def _flat_rope(make_config_init: Any) -> Any:
    """Gemma 3's per-layer-type RoPE, in the flat form the builder's class reads."""

    def patched(self: Any, config: Any) -> None:
        rope = getattr(config, "rope_parameters", None)
        if isinstance(rope, dict) and "full_attention" in rope:
            config.rope_local_base_freq = rope["sliding_attention"]["rope_theta"]
            config.rope_parameters = dict(rope["full_attention"])
            config.rope_theta = config.rope_parameters["rope_theta"]
        make_config_init(self, config)

    return patched


def main() -> None:
    import onnxruntime_genai.models as models

    # The builder imports its modules top-level (``from builders import ...``), so the class
    # to patch is the one in that namespace.
    sys.path.insert(0, os.path.dirname(models.__file__))
    from builders import gemma  # type: ignore[import-not-found]

    gemma.Gemma3Model.make_config_init = _flat_rope(gemma.Gemma3Model.make_config_init)
    runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__")


if __name__ == "__main__":
    main()
