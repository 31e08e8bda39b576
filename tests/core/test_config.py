import json

import pytest
from pydantic import ValidationError

from core.profiles import load_profile
from core.settings import CoreSettings, EngineConfig, SpeculativeConfig


def test_cpu_dev_command() -> None:
    argv = EngineConfig(model="/m", port=9000).command(python="py")
    assert argv[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(argv)
    assert "--model /m" in joined and "--port 9000" in joined and "--enforce-eager" in argv
    assert "--speculative-config" not in argv


def test_gpu_profile_is_config_not_code() -> None:
    cfg = EngineConfig(
        model="/models/llama-3.3-70b",
        served_model_name="llama-3.3-70b",
        tensor_parallel_size=4,
        gpu_memory_utilization=0.9,
        enforce_eager=False,
        max_num_seqs=128,
        enable_prefix_caching=True,
        speculative=SpeculativeConfig(
            method="eagle3", model="/models/eagle3", num_speculative_tokens=3
        ),
    )
    argv = cfg.command(python="py")
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.9"
    assert "--enforce-eager" not in argv and "--enable-prefix-caching" in argv
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "eagle3", "model": "/models/eagle3", "num_speculative_tokens": 3}


def test_invalid_config_names_the_field() -> None:
    with pytest.raises(ValidationError, match="tensor_parallel_size"):
        EngineConfig(tensor_parallel_size=0)
    with pytest.raises(ValidationError, match="draft model"):
        SpeculativeConfig(method="eagle3")


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGECORE_CORE_PORT", "9100")
    monkeypatch.setenv("EDGECORE_CORE_ENGINE__TENSOR_PARALLEL_SIZE", "8")
    monkeypatch.setenv(
        "EDGECORE_CORE_ENGINE__SPECULATIVE", '{"method": "ngram", "prompt_lookup_max": 4}'
    )
    s = CoreSettings()
    assert s.port == 9100 and s.engine.tensor_parallel_size == 8
    assert s.engine.speculative is not None and s.engine.speculative.method == "ngram"


@pytest.mark.parametrize("name", ["llama-3.3-70b-tp4-eagle3", "llama-3.1-70b-tp8-pp2-ray"])
def test_gpu_profiles_enable_tool_calling_with_the_models_parser(name: str) -> None:
    argv = load_profile(name).command(python="py")
    assert "--enable-auto-tool-choice" in argv
    assert argv[argv.index("--tool-call-parser") + 1] == "llama3_json"
    assert "--tool-call-parser" not in EngineConfig().command(python="py")
