"""Command lines that run a class of a peer's jars in a child JVM, logging warnings to standard error."""

from collections.abc import Sequence

from zkcoord import peers
from zkcoord.zk.server import find_java

_LOG4J_STDERR = """log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def _log4j_config() -> str:
    path = peers.cache_root() / "log4j-stderr.properties"
    if not path.is_file() or path.read_text() != _LOG4J_STDERR:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_LOG4J_STDERR)
    return f"file:{path}"


def java_command(
    peer: peers.Peer,
    main_class: str,
    args: Sequence[str] = (),
    heap_mb: int = 128,
    classpath_extra: Sequence[str] = (),
    jvm_options: Sequence[str] = (),
) -> list[str]:
    """``java ... main_class args`` on ``peer``'s jars (resolved first if need be), tuned for a short, small JVM."""
    classpath = ":".join([*classpath_extra, peers.classpath(peer)])
    return [
        find_java(),
        f"-Xmx{heap_mb}m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # start-up matters more than peak speed for test members and tools
        "-Djava.awt.headless=true",
        f"-Dlog4j.configuration={_log4j_config()}",
        *jvm_options,
        "-cp",
        classpath,
        main_class,
        *args,
    ]
