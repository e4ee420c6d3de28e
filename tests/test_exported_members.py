import ceiling


def test_public_names_resolve() -> None:
    for name in ceiling.__all__:
        assert getattr(ceiling, name) is not None, name


def test_unknown_name_is_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError):
        ceiling.nope  # noqa: B018


def test_public_surface_is_pinned() -> None:
    assert set(ceiling.__all__) == {
        "__version__",
        "CeilingError", "CardError", "ConfigError", "SandboxError", "SandboxUnavailable",
        "PolicyError", "TaskCard", "FileEntry", "load_card", "save_card", "open_sandbox",
        "Sandbox", "ExecResult", "Limits", "LayerStore", "LocalSandboxWarning",
        "namespaces_available", "Action", "TaskEnv", "make", "templates", "get_template",
        "Template", "register", "TaskMix", "Outcome", "Verdict", "RewardSpec", "Verifier",
        "verify", "Harness", "HarnessConfig", "render_line_episode", "Policy", "PolicyRequest",
        "Generation", "SamplingParams", "load_policy", "run_episodes", "Trajectory",
        "read_trajectories", "Store", "RunRecord", "summarize", "pass_at_k", "compare", "gate",
        "run_eval", "render_report", "Trainer", "TrainConfig", "load_config", "run_demo",
        "verify_base",
    }
