"""PySpark finds its JVM classes and their static methods by name, over Py4J, at every call:
`F.col("x")` asks the JVM what `org.apache.spark.sql.functions` is, then what its member `col`
is, then calls it (three round trips). A name PySpark uses without its package (`functions`,
`PythonUtils`) is first looked up as a top-level class, which is not found until every jar on
the classpath has been searched. One small pipeline's three hours made ~4,400 such lookups
(JFR: ~8% of that Spark application's CPU, in Py4J's reflection and the jar searches).

What a lookup answers never changes in a running JVM: a class name stays that class, a static
method stays that method. So each view of the JVM keeps the classes it found, and each class
the static methods it found (not its static fields: their values can change), and asks once.
Anything else (a package, an error) is asked every time, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JVMView

_INSTALLED = "_recon_lookups_cached"


def cache_jvm_lookups() -> None:
    """Install the caches (once per process; idempotent)."""
    if getattr(JVMView, _INSTALLED, False):
        return
    JVMView.__getattr__ = _kept(JVMView.__getattr__, JavaClass, "_recon_classes")
    JavaClass.__getattr__ = _kept(JavaClass.__getattr__, JavaMember, "_recon_methods")
    setattr(JVMView, _INSTALLED, True)


def _kept(lookup: Callable[[Any, str], Any], kind: type, slot: str) -> Callable[[Any, str], Any]:
    """`lookup` (an attribute lookup over Py4J) remembering, per object, the answers of `kind`
    in its attribute `slot`."""

    def getattr_kept(self: Any, name: str) -> Any:
        found = self.__dict__.setdefault(slot, {})
        hit = found.get(name)
        if hit is None:
            hit = lookup(self, name)
            if isinstance(hit, kind):
                found[name] = hit
        return hit

    return getattr_kept
