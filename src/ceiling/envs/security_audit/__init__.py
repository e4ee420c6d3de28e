"""Family ``security_audit``: small vulnerable services, to fix or to exploit.

Six vulnerability kinds (SQL injection, path traversal, command injection, hard-coded
secret, unsafe deserialization, weak password hashing), each registered twice:
``security_audit/<kind>-fix-v1`` (close the hole, keep the functionality) and
``security_audit/<kind>-reproduce-v1`` (write ``exploit.py`` that retrieves a planted flag
from a fresh instance). Importing this package registers the twelve templates.
"""

from ._template import VulnTemplate, register_pair
from ._vulns_hashing import hashing
from ._vulns_injection import cmdi, sqli, traversal
from ._vulns_secrets import deser, secret

KINDS = {
    "sql-injection": ("A lookup service that pastes user input into SQL", sqli),
    "path-traversal": ("A static file service that joins user paths unchecked", traversal),
    "command-injection": ("A diagnostics service that passes input to a shell", cmdi),
    "hardcoded-secret": ("An admin console whose token is hard-coded in the source", secret),
    "unsafe-deserialization": ("A session service that unpickles client data", deser),
    "weak-hashing": ("An accounts service storing fast unsalted password digests", hashing),
}

for _kind, (_summary, _builder) in KINDS.items():
    register_pair(_kind, _summary, _builder)

__all__ = ["KINDS", "VulnTemplate"]
