"""Offsets log throughput: durable appends per flush policy, loading, compaction and the store's memory.

In one run, on one directory (default: a temporary directory under the repository's ``var/``, so on the
repository's filesystem, never tmpfs), prints:

1. the baseline: fsyncs/s of a 200-byte write + fsync loop on a file in that directory;
2. appends/s and records/s of ~200-byte offset-commit records under each flush policy with 1, 16 and 256
   concurrent appenders (greenlets), one record per append, and fsyncs per append; plus ``group`` with 256
   appenders appending commits of 10 records (Kafka writes one batch per OffsetCommit);
3. load time and records/s of logs of 1M and 10M records (100 records per batch, ~100k keys);
4. compaction records/s over the 10M-record log, rolled so every segment is closed, and the load of the result;
5. memory of the loaded store per million live keys (tracemalloc, and the RSS delta of an untraced load), and
   the load rate of that fully compacted log (every record live).

The aims (group durable appends ≥ 100k records/s, loading ≥ 1M records/s, on the wall clock and per CPU
second of this process) are marked PASS or BELOW; being below never makes the exit status non-zero.
Temporary files are removed at the end.

    python benchmarks/offsets_log.py [--quick] [--dir DIR] [--only appends,load,memory]
"""

import argparse
import contextlib
import gc
import os
import platform
import shutil
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import gevent
import msgpack

from zkcoord.log import LogConfig, PartitionLog, loader
from zkcoord.log.cleaner import clean
from zkcoord.log.loader import load_partition
from zkcoord.offsets.records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_record, encode_value

REPO = Path(__file__).resolve().parents[1]
RECORD_BYTES = 200  # key + value of one offset commit
TOPIC = "topic-orders"
TIMESTAMP_MS = 1_700_000_000_000
AIM_GROUP_RECORDS_PER_SECOND = 100_000
AIM_LOAD_RECORDS_PER_SECOND = 1_000_000
KAFKA_LOAD_RECORDS_PER_SECOND = 16.8e6 / 3.8  # the JVM loader: 16.8M records in 3.8 s
LOADER = (
    "with its compiled steps (zkcoord/log/_compiled.c)"
    if loader.apply_records is not None
    else "Python only: the compiled steps were not built (python setup.py build_ext --inplace)"
)
MEMORY_FILESYSTEMS = {"tmpfs", "ramfs", "devtmpfs"}
SECTIONS = ("appends", "load", "memory")  # sections 1-2, 3-4 and 5


@dataclass(frozen=True)
class Scale:
    measure_seconds: float  # per append measurement and for the raw fsync loop
    log_sizes: tuple[int, int]  # records of the two logs that are loaded
    key_space: int  # distinct keys of those logs
    batch_records: int  # records per append when building them
    memory_keys: int  # distinct keys of the log whose store is measured


FULL = Scale(2.5, (1_000_000, 10_000_000), 100_000, 100, 1_000_000)
QUICK = Scale(0.25, (100_000, 1_000_000), 100_000, 100, 100_000)


def verdict(value: float, aim: float) -> str:
    return "PASS" if value >= aim else "BELOW"


# ---- the machine and the disk ----------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as file:
        cpu = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), cpu)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    compiled = "C extension" if msgpack.Packer.__module__.endswith("_cmsgpack") else "pure Python"
    return (
        f"{os.cpu_count()} cores ({usable} usable), {cpu}, {platform.system()} {platform.release()}; "
        f"{platform.python_implementation()} {platform.python_version()}, gevent {gevent.__version__}, "
        f"msgpack {msgpack.version_str if hasattr(msgpack, 'version_str') else msgpack.version} ({compiled}); "
        f"load average {load}"
    )


def filesystem(path: Path) -> tuple[str, str]:
    """``(fstype, description)`` of the mount holding ``path``, from /proc/self/mountinfo."""
    real = os.path.realpath(path)
    best = None
    try:
        with open("/proc/self/mountinfo") as file:
            for line in file:
                left, _, right = line.partition(" - ")
                mount_point = left.split()[4].replace("\\040", " ")
                fstype, source = right.split()[:2]
                inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
                if inside and (best is None or len(mount_point) >= len(best[0])):
                    best = (mount_point, fstype, source)
    except OSError:
        return "unknown", "unknown filesystem (no /proc/self/mountinfo)"
    if best is None:
        return "unknown", "unknown filesystem"
    mount_point, fstype, source = best
    device = ""
    if source.startswith("/dev/"):
        rotational = Path("/sys/class/block") / Path(source).name / "queue" / "rotational"
        with contextlib.suppress(OSError):
            kind = "rotational" if rotational.read_text().strip() == "1" else "non-rotational"
            device = f", {kind} as the kernel reports it"
    return fstype, f"{fstype} on {source} mounted at {mount_point}{device}"


def raw_fsync_rate(directory: Path, seconds: float) -> float:
    """fsyncs/s of appending 200 bytes and fsyncing, one after the other, on a file in ``directory``."""
    path = directory / "raw-fsync.dat"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    data = b"x" * RECORD_BYTES
    try:
        position = count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            os.pwrite(fd, data, position)
            os.fsync(fd)
            position += len(data)
            count += 1
        return count / (time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()


# ---- records ---------------------------------------------------------------------------------------------


def padded_metadata(key: OffsetCommitKey) -> str:
    """Metadata that makes the key and value of a commit of ``key`` about RECORD_BYTES long together."""
    length = RECORD_BYTES
    while length > 0:
        key_bytes, value_bytes = encode_record(key, OffsetCommitValue(2**40, "m" * length, TIMESTAMP_MS))
        if len(key_bytes) + len(value_bytes) <= RECORD_BYTES:
            return "m" * length
        length -= 1
    return ""


def commit_key(index: int, partitions: int) -> OffsetCommitKey:
    return OffsetCommitKey(f"group-{index // partitions:06d}", TOPIC, index % partitions)


def commit_records(count: int, partitions: int, metadata: str) -> list[tuple[bytes, bytes]]:
    """``count`` commits of distinct keys, ``partitions`` per group, each ~RECORD_BYTES."""
    return [
        encode_record(commit_key(i, partitions), OffsetCommitValue(2**40 + i, metadata, TIMESTAMP_MS + i))
        for i in range(count)
    ]


# ---- appends ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppendRun:
    policy: str
    appenders: int
    records_per_append: int
    appends: int
    fsyncs: int
    seconds: float

    @property
    def appends_per_second(self) -> float:
        return self.appends / self.seconds

    @property
    def records_per_second(self) -> float:
        return self.appends * self.records_per_append / self.seconds


def measure_appends(
    directory: Path, policy: str, appenders: int, commits: list[list[tuple[bytes, bytes]]], seconds: float
) -> AppendRun:
    """``appenders`` greenlets append ``commits`` (each one batch) in a loop for ``seconds``."""
    shutil.rmtree(directory, ignore_errors=True)
    log = PartitionLog.open(directory, LogConfig(flush_policy=policy))
    try:
        log.append(commits[0], timestamp_ms=TIMESTAMP_MS)  # starts gevent's thread pool outside the clock
        fsyncs_before = log.fsync_count
        counts = [0] * appenders
        deadline = time.perf_counter() + seconds

        def appender(number: int) -> None:
            index, done = number, 0
            while time.perf_counter() < deadline:
                log.append(commits[index % len(commits)], timestamp_ms=TIMESTAMP_MS)
                index += appenders
                done += 1
            counts[number] = done

        started = time.perf_counter()
        gevent.joinall([gevent.spawn(appender, n) for n in range(appenders)], raise_error=True)
        elapsed = time.perf_counter() - started
        return AppendRun(policy, appenders, len(commits[0]), sum(counts), log.fsync_count - fsyncs_before, elapsed)
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


def append_section(root: Path, scale: Scale, raw_rate: float) -> dict[tuple[str, int, int], AppendRun]:
    key = commit_key(0, 16)
    metadata = padded_metadata(key)
    singles = [[record] for record in commit_records(4096, 16, metadata)]
    sizes = [len(k) + len(v) for [(k, v)] in singles]
    tens = [[record for [record] in singles[i : i + 10]] for i in range(0, len(singles) - 9, 16)]
    print(
        f"\n2. Appends of offset commits: key + value {min(sizes)}-{max(sizes)} bytes (metadata padded to "
        f"{len(metadata)} chars), {len(singles)} distinct keys; each appender is a greenlet appending in a loop "
        f"for {scale.measure_seconds:g} s\n"
    )
    print(
        f"{'policy':>7} {'appenders':>9} {'records/append':>14} {'appends/s':>11} {'records/s':>11} "
        f"{'fsyncs/append':>13} {'appends/raw fsync':>17}  aim (group ≥ {AIM_GROUP_RECORDS_PER_SECOND:,} records/s)"
    )
    runs: dict[tuple[str, int, int], AppendRun] = {}
    plan = [(policy, n, singles) for policy in ("always", "group", "never") for n in (1, 16, 256)]
    plan.append(("group", 256, tens))
    for policy, appenders, commits in plan:
        run = measure_appends(root / "appends", policy, appenders, commits, scale.measure_seconds)
        runs[(policy, appenders, run.records_per_append)] = run
        aim = ""
        if policy == "group" and appenders == 256:
            aim = verdict(run.records_per_second, AIM_GROUP_RECORDS_PER_SECOND)
        print(
            f"{policy:>7} {appenders:>9} {run.records_per_append:>14} {run.appends_per_second:>11,.0f} "
            f"{run.records_per_second:>11,.0f} {run.fsyncs / max(run.appends, 1):>13.4f} "
            f"{run.appends_per_second / raw_rate:>16.2f}x  {aim}",
            flush=True,
        )
    print("\n   ratios, appends/s:")
    for n in (1, 16, 256):
        group, always = runs[("group", n, 1)], runs[("always", n, 1)]
        print(
            f"   {n:>3} appenders: group / always = {group.appends_per_second / always.appends_per_second:6.2f}x, "
            f"group / raw fsync rate = {group.appends_per_second / raw_rate:6.2f}x, "
            f"group / never = {group.appends_per_second / runs[('never', n, 1)].appends_per_second:5.2f}x"
        )
    return runs


# ---- building, loading and cleaning logs -----------------------------------------------------------------


def append_until(log: PartitionLog, total: int, keys: list[bytes], metadata: str, batch_records: int) -> None:
    """Append batches of ``batch_records`` commits (keys in turn) until the log holds ``total`` records."""
    offset = log.end_offset
    while offset < total:
        batch = offset // batch_records
        value = encode_value(OffsetCommitValue(batch, metadata, TIMESTAMP_MS + batch))
        count = min(batch_records, total - offset)
        log.append([(keys[(offset + i) % len(keys)], value) for i in range(count)], timestamp_ms=TIMESTAMP_MS)
        offset += count


def load_row(label: str, log: PartitionLog, build_seconds: float | None) -> tuple[float, float]:
    gc.collect()
    cpu_started = time.process_time()
    result = load_partition(log)
    cpu_rate = result.records / (time.process_time() - cpu_started)
    rate = result.records_per_second
    print(
        f"{label:>22} {result.records:>11,} {result.bytes / 1e6:>8,.0f} {len(log.segments):>8} "
        f"{len(result.store):>9,} {'-' if build_seconds is None else f'{build_seconds:.1f} s':>9} "
        f"{result.seconds:>7.2f} s {rate:>11,.0f} "
        f"{result.bytes / 1e6 / result.seconds:>6.0f} {rate / KAFKA_LOAD_RECORDS_PER_SECOND:>9.2f}x "
        f"{cpu_rate:>11,.0f}  "
        f"{verdict(rate, AIM_LOAD_RECORDS_PER_SECOND)}",
        flush=True,
    )
    return rate, cpu_rate


def load_and_clean_section(root: Path, scale: Scale) -> dict[str, tuple[float, float]]:
    partitions = 10
    metadata = padded_metadata(commit_key(0, partitions))
    keys = [encode_key(commit_key(i, partitions)) for i in range(scale.key_space)]
    small, large = scale.log_sizes
    print(
        f"\n3. Loading: logs written with policy never, {scale.batch_records} records per batch, "
        f"{scale.key_space:,} keys ({scale.key_space // partitions:,} groups x {partitions} partitions) in turn, "
        f"~{RECORD_BYTES}-byte records; default segment size; page cache warm\n"
    )
    print(
        f"{'log':>22} {'records':>11} {'MB':>8} {'segments':>8} {'live keys':>9} {'build':>9} {'load':>9} "
        f"{'records/s':>11} {'MB/s':>6} {'vs Kafka':>10} {'per CPU s':>11}  "
        f"aim (≥ {AIM_LOAD_RECORDS_PER_SECOND:,} records/s)"
    )
    rates: dict[str, tuple[float, float]] = {}
    log = PartitionLog.open(root / "load", LogConfig(flush_policy="never"))
    try:
        for size in (small, large):
            label = f"{size / 1e6:g}M records"
            started = time.perf_counter()
            append_until(log, size, keys, metadata, scale.batch_records)
            rates[label] = load_row(label, log, time.perf_counter() - started)

        log.roll()
        result = clean(log, TIMESTAMP_MS + large)
        print(
            f"\n4. Compaction of the {large / 1e6:g}M-record log after rolling it (every segment closed): "
            f"read {result.records_read:,} records, kept {result.records_kept:,}, "
            f"{result.segments_before} -> {result.segments_after} segments, "
            f"{result.bytes_before / 1e6:,.0f} -> {result.bytes_after / 1e6:,.1f} MB in {result.seconds:.2f} s = "
            f"{result.records_per_second:,.0f} records/s ({result.bytes_before / 1e6 / result.seconds:,.0f} MB/s read)"
        )
        print(f"{'':>22} (the cleaned log, for comparison)")
        rates["the compacted log"] = load_row("after compaction", log, None)
    finally:
        log.close()
        shutil.rmtree(root / "load", ignore_errors=True)
    return rates


def rss_bytes() -> int:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_section(root: Path, scale: Scale) -> tuple[float, float]:
    partitions = 20
    metadata = padded_metadata(commit_key(0, partitions))
    keys = [encode_key(commit_key(i, partitions)) for i in range(scale.memory_keys)]
    log = PartitionLog.open(root / "memory", LogConfig(flush_policy="never"))
    try:
        append_until(log, scale.memory_keys, keys, metadata, scale.batch_records)
        del keys
        gc.collect()
        rss_before = rss_bytes() if os.path.exists("/proc/self/statm") else None
        cpu_started = time.process_time()
        result = load_partition(log)
        cpu_rate = result.records / (time.process_time() - cpu_started)
        gc.collect()
        rss_delta = rss_bytes() - rss_before if rss_before is not None else None
        live = len(result.store)
        compacted_rate = result.records_per_second
        del result
        gc.collect()

        tracemalloc.start()
        traced_before = tracemalloc.get_traced_memory()[0]
        result = load_partition(log)
        gc.collect()
        retained, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        retained -= traced_before
        peak -= traced_before
        per_million = 1e6 / live
        print(
            f"\n5. Store memory: a log of {live:,} distinct keys ({live // partitions:,} groups x {partitions} "
            f"partitions, metadata {len(metadata)} chars, one record each)"
        )
        print(
            f"   tracemalloc, retained by the store: {retained / 2**20:,.0f} MiB = "
            f"{retained * per_million / 2**20:,.0f} MiB per million live keys ({retained / live:,.0f} bytes/key; "
            f"the metadata str, {sys.getsizeof(metadata)} bytes, is the same in every record); "
            f"peak during the load {peak * per_million / 2**20:,.0f} MiB per million"
        )
        if rss_delta is not None:
            print(
                f"   RSS delta of an untraced load (store + allocator slack of the freed temporaries): "
                f"{rss_delta * per_million / 2**20:,.0f} MiB per million live keys"
            )
        print(
            f"   loading it (untraced, every record live): {compacted_rate:,.0f} records/s, "
            f"{cpu_rate:,.0f} records per CPU second of this process "
            f"({compacted_rate / AIM_LOAD_RECORDS_PER_SECOND:.2f}x the aim) "
            f"{verdict(compacted_rate, AIM_LOAD_RECORDS_PER_SECOND)}"
        )
        del result
    finally:
        log.close()
        shutil.rmtree(root / "memory", ignore_errors=True)
    return compacted_rate, cpu_rate


# ---- main ------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small logs and short measurements (a smoke test)")
    parser.add_argument("--dir", type=Path, help="where to create the temporary directory (default: <repo>/var)")
    parser.add_argument(
        "--only",
        type=lambda text: set(text.split(",")),
        default=set(SECTIONS),
        help=f"comma-separated sections to run, of {','.join(SECTIONS)} (default: all)",
    )
    args = parser.parse_args()
    if not args.only <= set(SECTIONS):
        parser.error(f"--only takes sections of {','.join(SECTIONS)}")
    scale = QUICK if args.quick else FULL
    parent = args.dir or REPO / "var"
    created_parent = not parent.exists()
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="offsets-log-bench-", dir=parent))
    started = time.perf_counter()
    try:
        fstype, described = filesystem(root)
        print(f"Machine: {machine()}")
        print(f"Directory: {root} ({described})")
        print(f"Loader: {LOADER}")
        if fstype in MEMORY_FILESYSTEMS:
            print("WARNING: a memory filesystem: fsync costs nothing here, so the durable figures mean little")

        runs: dict[tuple[str, int, int], AppendRun] = {}
        if "appends" in args.only:
            raw_rate = raw_fsync_rate(root, scale.measure_seconds)
            print(
                f"\n1. Baseline: write {RECORD_BYTES} bytes + fsync, in a loop, on one file of that directory: "
                f"{raw_rate:,.0f} fsyncs/s ({1e6 / raw_rate:,.0f} µs each)"
            )
            runs = append_section(root, scale, raw_rate)
        load_rates = load_and_clean_section(root, scale) if "load" in args.only else {}
        if "memory" in args.only:
            load_rates["the fully compacted log (section 5)"] = memory_section(root, scale)

        print("\nAims (of the issue); being below does not fail this command:")
        for records_per_append in (1, 10) if runs else ():
            run = runs[("group", 256, records_per_append)]
            print(
                f"   group durable appends ≥ {AIM_GROUP_RECORDS_PER_SECOND:,} records/s, 256 appenders x "
                f"{records_per_append} record(s)/append: {run.records_per_second:,.0f} records/s "
                f"({run.records_per_second / AIM_GROUP_RECORDS_PER_SECOND:.2f}x) "
                f"{verdict(run.records_per_second, AIM_GROUP_RECORDS_PER_SECOND)}"
            )
        for label, (rate, cpu_rate) in load_rates.items():
            print(
                f"   loading ≥ {AIM_LOAD_RECORDS_PER_SECOND:,} records/s, {label}: {rate:,.0f} records/s "
                f"({rate / AIM_LOAD_RECORDS_PER_SECOND:.2f}x; Kafka's JVM loader {KAFKA_LOAD_RECORDS_PER_SECOND:,.0f}: "
                f"{rate / KAFKA_LOAD_RECORDS_PER_SECOND:.2f}x) {verdict(rate, AIM_LOAD_RECORDS_PER_SECOND)}; "
                f"{cpu_rate:,.0f} records per CPU second {verdict(cpu_rate, AIM_LOAD_RECORDS_PER_SECOND)}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if created_parent:
            with contextlib.suppress(OSError):
                parent.rmdir()  # only if empty: someone else may use it too
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(f"\nTotal {time.perf_counter() - started:.0f} s; load average now {load} (other processes skew the figures)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
