import time
import urllib.request


def _get(path):
    for _ in range(50):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:8765{path}", timeout=2) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the server never answered")


def test_health():
    assert _get("/health") == (200, b"ok")
