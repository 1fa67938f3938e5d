#!/usr/bin/env python3
"""Build the wheel that carries the module: redis-ratelimit-module, tagged
py3-none-manylinux_2_17_x86_64, holding the module of the release tarball (built for glibc 2.17)
and `redis_ratelimit_module.path()`, which returns that .so's path.

The wheel is written by hand (a zip with METADATA, WHEEL and RECORD): nothing to compile, and
the same bytes on every build (sorted entries, fixed times from SOURCE_DATE_EPOCH, fixed modes).

usage: scripts/wheel.py VERSION MODULE_SO LICENSE OUT_DIR      (make wheel)
"""

import base64
import hashlib
import os
import sys
import time
import zipfile

NAME = "redis-ratelimit-module"
PACKAGE = "redis_ratelimit_module"
TAG = "py3-none-manylinux_2_17_x86_64"

INIT = '''"""The redis-ratelimit module (a Redis / Valkey module, ``libredis_ratelimit.so``) as a wheel.

``path()`` is the module's absolute path, for ``redis-server --loadmodule``, a ``loadmodule``
line, or a test suite's server (the ``redis-ratelimit-client`` pytest fixture uses it when no
module is given)::

    import redis_ratelimit_module
    subprocess.run(["redis-server", "--loadmodule", redis_ratelimit_module.path()])
"""

from __future__ import annotations

import os

__all__ = ["__version__", "path"]

__version__ = "@VERSION@"


def path() -> str:
    """The absolute path of ``libredis_ratelimit.so`` inside this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libredis_ratelimit.so")
'''

DESCRIPTION = """# redis-ratelimit-module

The redis-ratelimit Redis module,
`libredis_ratelimit.so`, built for Linux x86_64 with glibc 2.17 or later, as a wheel: `pip
install redis-ratelimit-module` gets the module without Rust or a compiler.

```python
import redis_ratelimit_module
print(redis_ratelimit_module.path())   # .../redis_ratelimit_module/libredis_ratelimit.so
```

Load it into Redis 7.0+ or Valkey 8+ with `redis-server --loadmodule "$(python -c 'import
redis_ratelimit_module as m; print(m.path())')"`. The `redis-ratelimit-client` package's pytest
fixture (`ratelimit_server`) uses it when it is installed and no module is given. No Python code
runs inside Redis: the package only carries the file.
"""


def main() -> None:
    version, so, license_file, out = sys.argv[1:5]
    dist_info = "%s-%s.dist-info" % (PACKAGE, version)
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            "Name: " + NAME,
            "Version: " + version,
            "Summary: The redis-ratelimit Redis module (libredis_ratelimit.so) for Linux x86_64, with path()",
            "License: MIT",
            "Requires-Python: >=3.8",
            "Classifier: License :: OSI Approved :: MIT License",
            "Classifier: Operating System :: POSIX :: Linux",
            "Classifier: Programming Language :: Python :: 3",
            "Classifier: Topic :: Database",
            "Description-Content-Type: text/markdown",
            "",
            DESCRIPTION,
        ]
    )
    wheel = "\n".join(
        [
            "Wheel-Version: 1.0",
            "Generator: redis-ratelimit scripts/wheel.py",
            "Root-Is-Purelib: false",
            "Tag: " + TAG,
            "",
        ]
    )
    files = [
        (PACKAGE + "/__init__.py", INIT.replace("@VERSION@", version).encode(), 0o644),
        (PACKAGE + "/py.typed", b"", 0o644),
        (PACKAGE + "/libredis_ratelimit.so", open(so, "rb").read(), 0o755),
        (dist_info + "/LICENSE", open(license_file, "rb").read(), 0o644),
        (dist_info + "/METADATA", metadata.encode(), 0o644),
        (dist_info + "/WHEEL", wheel.encode(), 0o644),
    ]
    record = ""
    for name, data, _ in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\n" % (name, digest, len(data))
    record += dist_info + "/RECORD,,\n"
    files.append((dist_info + "/RECORD", record.encode(), 0o644))

    epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)
    stamp = time.gmtime(epoch)[:6]
    os.makedirs(out, exist_ok=True)
    target = os.path.join(out, "%s-%s-%s.whl" % (PACKAGE, version, TAG))
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:  # RECORD last, as the wheel spec recommends
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            z.writestr(info, data)
    print(target)


if __name__ == "__main__":
    main()
