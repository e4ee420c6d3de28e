import ceiling


def test_public_names_resolve() -> None:
    for name in ceiling.__all__:
        assert getattr(ceiling, name) is not None, name


def test_unknown_name_is_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError):
        ceiling.nope  # noqa: B018
