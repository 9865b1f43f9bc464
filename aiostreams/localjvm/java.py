"""The ``java`` executable the servers run on: ``$JAVA_HOME/bin`` first, then ``PATH``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

__all__ = ["find_java"]


def find_java(error: Callable[[str], Exception], program: str, instead: str) -> str:
    """The path of ``java``; else raise ``error`` saying that ``program`` (what needs it,
    e.g. "the local Kafka broker") is a Java program, what to install, or ``instead`` what
    the user may do without Java."""
    java_home = os.environ.get("JAVA_HOME")
    path = os.environ.get("PATH", os.defpath)
    java = shutil.which("java", path=f"{java_home}/bin{os.pathsep}{path}" if java_home
                        else path)
    if java is None:
        raise error(
            f"Java ('java') is not on PATH (nor in $JAVA_HOME/bin); {program} is a Java "
            "program. Install a JDK 17+ (e.g. apt install openjdk-17-jdk-headless), or "
            f"{instead}")
    return java
