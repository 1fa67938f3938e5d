"""The installed distribution's metadata: a real package of its ecosystem."""

from __future__ import annotations

from importlib.metadata import distribution


def test_metadata() -> None:
    meta = distribution("redis-ratelimit-client").metadata
    urls = meta.get_all("Project-URL") or []
    assert "Repository, https://github.com/redis-ratelimit/redis-ratelimit" in urls
    classifiers = meta.get_all("Classifier") or []
    for version in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert meta["License-Expression"] == "MIT" and meta["Author"]
    assert "LICENSE" in (meta.get_all("License-File") or [])
    files = [str(f) for f in distribution("redis-ratelimit-client").files or []]
    assert any(f.endswith("licenses/LICENSE") for f in files), files
