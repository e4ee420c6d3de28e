"""Pin the public names of harness, policies and rollout (one public door per package)."""

from __future__ import annotations

import ceiling.harness
import ceiling.policies
import ceiling.rollout


def test_public_names() -> None:
    assert sorted(ceiling.harness.__all__) == sorted([
        "CHAT_DEFAULT_FORMAT", "CORE_DESCRIPTIONS", "FEW_SHOT_TASK", "FEW_SHOT_TURNS", "FORMATS",
        "BashParseError", "Dialogue", "Harness",
        "HarnessConfig", "JsonParseError", "LineParseError", "ReplyError", "TurnRecord",
        "action_to_bash", "action_to_json", "action_to_line", "card_tool_table",
        "default_format", "escape_content", "format_observation", "parse_bash_reply", "parse_json_reply",
        "parse_line", "render_line_episode", "render_tool_list", "truncate_observation",
        "unescape_content"])
    assert sorted(ceiling.policies.__all__) == sorted([
        "KINDS", "Generation", "HFPolicy", "Policy", "PolicyRequest", "SamplingParams",
        "adapters_off", "default_model_name", "full_mask_for", "load_policy", "merged_lora",
        "policy_tokenizer", "resolve_builtin", "sampling_params", "serve"])
    assert sorted(ceiling.rollout.__all__) == sorted([
        "EXECUTORS", "JsonlWriter", "Rollout", "RolloutSpec", "RunStats", "Trajectory", "Turn",
        "episode_id", "episode_seed", "make_executor", "map_jobs", "read_trajectories",
        "resolve_ray_address", "run_bench", "run_episodes"])
    for mod in (ceiling.harness, ceiling.policies, ceiling.rollout):
        for name in mod.__all__:
            assert getattr(mod, name) is not None
