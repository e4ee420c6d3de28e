import tomllib
from pathlib import Path


def test_toml():
    assert tomllib.loads(Path("/app/out.toml").read_text()) == {"name": "ceiling", "n": 3}


def test_tomli_w_importable():
    import tomli_w

    assert tomli_w.dumps({"a": 1}) == "a = 1\n"
