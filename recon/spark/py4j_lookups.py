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

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JVMView

_INSTALLED = "_recon_lookups_cached"


def cache_jvm_lookups() -> None:
    """Install the caches (once per process; idempotent)."""
    if getattr(JVMView, _INSTALLED, False):
        return
    view_lookup = JVMView.__getattr__
    class_lookup = JavaClass.__getattr__

    def view_getattr(self: JVMView, name: str) -> Any:
        found = self.__dict__.setdefault("_recon_classes", {})
        hit = found.get(name)
        if hit is None:
            hit = view_lookup(self, name)
            if isinstance(hit, JavaClass):
                found[name] = hit
        return hit

    def class_getattr(self: JavaClass, name: str) -> Any:
        found = self.__dict__.setdefault("_recon_methods", {})
        hit = found.get(name)
        if hit is None:
            hit = class_lookup(self, name)
            if isinstance(hit, JavaMember):
                found[name] = hit
        return hit

    JVMView.__getattr__ = view_getattr
    JavaClass.__getattr__ = class_getattr
    setattr(JVMView, _INSTALLED, True)
