"""Crash tests of the offsets log: a real child process SIGKILLed while appending or compacting, and damaged tails.

* appends under ``always`` and ``group``: every acknowledged batch survives the kill with its exact
  content, offsets stay contiguous, nothing after a cut is returned, a second open is clean;
* random truncations and byte flips of the newest segment are cut at the damaged entry; damage in an
  older segment stops a read with CorruptLogError (or is skipped when configured so);
* compaction killed at random points, or part-way through a swap, replays to the same store.

The default run holds a sample (about 20 append kills, 5 compaction kills); ``make soak`` (``pytest -m
soak``) runs several hundred. The child is :mod:`zkcoord.testing.log_workload`.
"""

import dataclasses
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcoord.errors import CorruptLogError
from zkcoord.log import LogConfig, PartitionLog, swap
from zkcoord.log.cleaner import clean
from zkcoord.log.loader import load_partition
from zkcoord.offsets.records import OffsetCommitKey, OffsetCommitValue, encode_record
from zkcoord.testing.log_workload import batch_digest, batch_origin, log_config, workload_batch

REPO = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 30.0
ACK = re.compile(r"ack (\d+) (\d+) ([0-9a-f]{40})")


def pairs_of(batch) -> list[tuple[bytes, bytes | None]]:
    return [(key, value) for _, _, key, value in batch.records]


def batch_view(batches) -> list[tuple[int, int, tuple]]:
    """What a read returned, comparable across opens: (base offset, timestamp, records) per batch."""
    return [(batch.base_offset, batch.timestamp_ms, batch.records) for batch in batches]


def files_named(directory: Path, pattern: str) -> list[str]:
    return sorted(path.name for path in directory.glob(pattern))


def segment_bytes_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.suffix in (".log", ".index")}


# -- the child process ------------------------------------------------------------------------------


class Child:
    """A workload child whose stdout lines a thread collects (so a full pipe never stalls it)."""

    def __init__(self, workdir: Path, *args: str):
        self.stderr_path = workdir / "child.stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "zkcoord.testing.log_workload", *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=REPO,
            )
        self.lines: list[str] = []
        self._eof = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.process.stdout:
            if raw.endswith(b"\n"):  # a line cut by the kill is not an acknowledgement
                with self._changed:
                    self.lines.append(raw.decode().rstrip("\n"))
                    self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def wait_for_line(self, text: str, timeout: float = WAIT_SECONDS) -> None:
        """Block until the child printed a line starting with ``text``; fail if it dies or takes too long."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(line.startswith(text) for line in self.lines):
                remaining = deadline - time.monotonic()
                if self._eof or remaining <= 0:
                    pytest.fail(f"child printed no {text!r} line (exit {self.process.poll()}):\n{self.stderr()}")
                self._changed.wait(remaining)

    def kill(self) -> None:
        """SIGKILL the child, reap it and collect every line it printed; it must die of that signal."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=WAIT_SECONDS)
        self._reader.join(timeout=WAIT_SECONDS)
        assert not self._reader.is_alive(), "the child's stdout did not close"
        assert self.process.returncode == -signal.SIGKILL, f"child exited {self.process.returncode}:\n{self.stderr()}"

    def cleanup(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=WAIT_SECONDS)
        self._reader.join(timeout=WAIT_SECONDS)
        self.process.stdout.close()


# -- appends killed at random points ----------------------------------------------------------------


@dataclass(frozen=True)
class AppendRun:
    seed: int
    policy: str
    appenders: int
    segment_bytes: int
    kill_after: float

    @classmethod
    def for_seed(cls, seed: int, policy: str) -> "AppendRun":
        rnd = random.Random(f"append/{policy}/{seed}")
        return cls(seed, policy, rnd.randint(1, 6), rnd.choice([1024, 2048, 4096, 16384]), rnd.uniform(0.05, 0.6))


def kill_appender(run: AppendRun, directory: Path, workdir: Path) -> list[tuple[int, int, str]]:
    """Run the append child, SIGKILL it ``run.kill_after`` s after its first ack; the acks it printed."""
    child = Child(
        workdir,
        *("append", str(directory), "--policy", run.policy, "--appenders", str(run.appenders)),
        *("--seed", str(run.seed), "--segment-bytes", str(run.segment_bytes)),
    )
    try:
        child.wait_for_line("ack ")
        time.sleep(run.kill_after)  # the deliberate random kill point
        child.kill()
    finally:
        child.cleanup()
    acks = []
    for line in child.lines:
        match = ACK.fullmatch(line)
        assert match, f"unexpected line from the child: {line!r}"
        acks.append((int(match[1]), int(match[2]), match[3]))
    return acks


def check_appends_survived(run: AppendRun, directory: Path, acks: list[tuple[int, int, str]]) -> None:
    config = log_config(run.policy, run.segment_bytes)
    with PartitionLog.open(directory, config) as log:
        report = log.recovery
        batches = list(log.read())
        end_offset = log.end_offset
        active = log.segments[-1]
        assert report.compaction is None
        if report.truncated is not None:  # nothing after the cut: the log ends where the bad entry began
            assert report.truncated.path == active.path
            assert (report.truncated.offset, report.truncated.position) == (end_offset, active.size), report
            assert report.bytes_cut > 0
        else:
            assert report.bytes_cut == 0

        # Contiguous offsets from 0 to the end, every append one the child made, in each appender's order.
        # (Under `group` one batch may hold a whole round of appends.)
        assert log.start_offset == 0
        records = []
        for batch in batches:
            assert batch.base_offset == len(records), f"gap or overlap before offset {batch.base_offset}"
            assert [delta for delta, *_ in batch.records] == list(range(len(batch.records)))
            records += [(key, value) for _, key, value in batch.entries()]
        assert len(records) == end_offset, f"gap or overlap: records end at {len(records)}, log at {end_offset}"
        next_sequence = [0] * run.appenders
        origin_at: dict[int, tuple[int, int, str]] = {}
        offset = 0
        while offset < len(records):
            appender, sequence = batch_origin(records[offset : offset + 1])
            expected = workload_batch(run.seed, appender, sequence)
            assert sequence == next_sequence[appender], f"appender {appender}: append {sequence} out of order"
            assert records[offset : offset + len(expected)] == expected, f"append at {offset} altered"
            next_sequence[appender] += 1
            origin_at[offset] = (appender, offset + len(expected) - 1, batch_digest(expected))
            offset += len(expected)

        # Every acknowledged append is there with exactly the acknowledged content.
        acked = [0] * run.appenders
        for base_offset, last_offset, digest in acks:
            assert base_offset in origin_at, f"acknowledged append at offset {base_offset} lost"
            appender, last_found, found = origin_at[base_offset]
            assert (last_found, found) == (last_offset, digest), f"append at {base_offset} is not the acked one"
            acked[appender] += 1
        # An appender has at most one batch in flight: at most one unacknowledged batch of it survives.
        for appender in range(run.appenders):
            assert next_sequence[appender] - acked[appender] in (0, 1), (appender, next_sequence, acked)

    with PartitionLog.open(directory, config) as log:  # recovery is done once and for all
        assert (log.recovery.truncated, log.recovery.bytes_cut, log.recovery.compaction) == (None, 0, None)
        assert batch_view(log.read()) == batch_view(batches)
        assert log.end_offset == end_offset
        # The recovered log takes appends at its end.
        extra = workload_batch(run.seed, run.appenders, 0)
        assert log.append(extra).base_offset == end_offset
    with PartitionLog.open(directory, config) as log:
        assert log.recovery.truncated is None
        assert log.end_offset == end_offset + len(extra)


def crash_appends(run: AppendRun, tmp_path: Path) -> None:
    directory = tmp_path / "log"
    acks = kill_appender(run, directory, tmp_path)
    assert acks, "the child acknowledged nothing"
    check_appends_survived(run, directory, acks)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("policy", ["always", "group"])
def test_sigkill_during_appends_loses_no_acknowledged_batch(tmp_path, policy, seed):
    crash_appends(AppendRun.for_seed(seed, policy), tmp_path)


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(1000, 1110))
@pytest.mark.parametrize("policy", ["always", "group"])
def test_soak_sigkill_during_appends_loses_no_acknowledged_batch(tmp_path, policy, seed):
    crash_appends(AppendRun.for_seed(seed, policy), tmp_path)


def test_the_append_check_catches_a_lost_acknowledged_batch(tmp_path):
    """The checker can fail: drop the newest acknowledged batch from a killed run's log."""
    run = AppendRun.for_seed(0, "always")
    directory = tmp_path / "log"
    acks = kill_appender(run, directory, tmp_path)
    last_base, _, _ = max(acks)
    path = max((p for p in directory.glob("*.log") if int(p.stem) <= last_base), key=lambda p: int(p.stem))
    data = path.read_bytes()
    position = next(start for start in entry_starts(data) if struct.unpack_from(">q", data, start + 10)[0] == last_base)
    os.truncate(path, position)  # the newest acknowledged batch (and what follows it in its segment) is gone
    with pytest.raises(AssertionError, match=f"offset {last_base} lost|gap or overlap"):
        check_appends_survived(run, directory, acks)


# -- damaged tails ----------------------------------------------------------------------------------

TAIL_CONFIG = LogConfig(flush_policy="never", segment_bytes=4096, max_message_bytes=4096, index_interval_bytes=256)


@dataclass(frozen=True, repr=False)
class TailTemplate:
    """A closed log of several segments; entry boundaries of each segment file."""

    directory: Path
    batches: list[tuple[int, int, tuple]]  # batch_view of the whole log
    segments: list[str]  # file names, oldest first
    starts: dict[str, list[int]]  # byte position of each entry, per segment file
    sizes: dict[str, int]

    def __repr__(self) -> str:  # hypothesis prints it with each falsifying example
        return f"TailTemplate({self.directory}, {len(self.batches)} batches in {self.segments})"

    @property
    def newest(self) -> str:
        return self.segments[-1]

    def batches_before(self, name: str, entry: int) -> list[tuple[int, int, tuple]]:
        """The batches of every segment before ``name`` and the first ``entry`` ones of ``name``."""
        index = self.segments.index(name)
        count = sum(len(self.starts[earlier]) for earlier in self.segments[:index]) + entry
        return self.batches[:count]


def entry_starts(data: bytes) -> list[int]:
    starts, position = [], 0
    while position < len(data):
        starts.append(position)
        position += 4 + struct.unpack_from(">I", data, position)[0]
    assert position == len(data)
    return starts


@pytest.fixture(scope="module")
def tail_template(tmp_path_factory) -> TailTemplate:
    directory = tmp_path_factory.mktemp("tail-template")
    with PartitionLog.open(directory, TAIL_CONFIG) as log:
        sequence = 0
        while len(log.segments) < 4 or log.end_offset - log.segments[-1].base_offset < 30:
            log.append(workload_batch(99, 0, sequence), timestamp_ms=1_000_000 + sequence)
            sequence += 1
        batches = batch_view(log.read())
        names = [segment.path.name for segment in log.segments]
    starts = {name: entry_starts((directory / name).read_bytes()) for name in names}
    sizes = {name: (directory / name).stat().st_size for name in names}
    assert len(starts[names[-1]]) >= 8
    return TailTemplate(directory, batches, names, starts, sizes)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("scratch")


def copy_of(template: TailTemplate, scratch: Path) -> Path:
    directory = Path(tempfile.mkdtemp(dir=scratch))
    for name in template.segments:
        shutil.copy(template.directory / name, directory / name)
        index = (template.directory / name).with_suffix(".index")
        if index.exists():
            shutil.copy(index, directory / index.name)
    return directory


def check_cut_at(template: TailTemplate, directory: Path, entry: int, detected: bool, torn: bool | None) -> None:
    """Reopen a log whose newest segment keeps only its first ``entry`` entries intact.

    ``detected``: recovery must report a problem (False when the file ends exactly after entry ``entry``).
    """
    name = template.newest
    starts = template.starts[name]
    damaged_size = (directory / name).stat().st_size
    valid_size = starts[entry] if detected else damaged_size
    expected = template.batches_before(name, entry)
    base_offset = int(name.split(".")[0])
    expected_end = expected[-1][0] + expected[-1][2][-1][0] + 1 if expected else base_offset
    with PartitionLog.open(directory, TAIL_CONFIG) as log:
        problem = log.recovery.truncated
        if not detected:
            assert problem is None and log.recovery.bytes_cut == 0
        else:
            assert problem is not None, "the damage was not detected"
            assert (problem.path.name, problem.position, problem.offset) == (name, valid_size, expected_end)
            assert log.recovery.bytes_cut == damaged_size - valid_size
            if torn is not None:
                assert problem.torn == torn
        assert batch_view(log.read()) == expected  # everything before the damage, nothing after
        assert log.end_offset == expected_end
        assert (directory / name).stat().st_size == valid_size
    with PartitionLog.open(directory, TAIL_CONFIG) as log:
        assert (log.recovery.truncated, log.recovery.bytes_cut) == (None, 0)
        assert batch_view(log.read()) == expected
        assert log.append([encode_record(OffsetCommitKey("g", "t", 0), None)]).base_offset == expected_end
    shutil.rmtree(directory)


def truncate_tail(template: TailTemplate, scratch: Path, data) -> None:
    name = template.newest
    cut = data.draw(st.integers(0, template.sizes[name]), label="cut")
    directory = copy_of(template, scratch)
    os.truncate(directory / name, cut)
    ends = [*template.starts[name][1:], template.sizes[name]]
    whole = sum(1 for end in ends if end <= cut)  # entries that end before the cut
    check_cut_at(template, directory, whole, detected=cut not in (0, *ends), torn=True)


def flip_tail(template: TailTemplate, scratch: Path, data) -> None:
    name = template.newest
    starts = template.starts[name]
    last = data.draw(st.integers(1, min(5, len(starts))), label="last K entries")
    window = st.integers(starts[-last], template.sizes[name] - 1)
    positions = data.draw(st.lists(window, min_size=1, max_size=3, unique=True), label="positions")
    directory = copy_of(template, scratch)
    content = bytearray((directory / name).read_bytes())
    for position in positions:
        content[position] ^= data.draw(st.integers(1, 255), label=f"mask at {position}")
    (directory / name).write_bytes(bytes(content))
    first_damaged = max(number for number, start in enumerate(starts) if start <= min(positions))
    damaged = {max(number for number, start in enumerate(starts) if start <= position) for position in positions}
    if set(range(first_damaged, len(starts))) <= damaged:
        check_cut_at(template, directory, first_damaged, detected=True, torn=None)
        return
    # A valid entry follows the damage: not a torn tail, so nothing is cut and the open stops, saying where.
    with pytest.raises(CorruptLogError, match=f"{name}: corrupt entry at byte {starts[first_damaged]} "):
        PartitionLog.open(directory, TAIL_CONFIG)
    assert (directory / name).read_bytes() == bytes(content)
    shutil.rmtree(directory)


TAIL_SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "database": None}


@settings(max_examples=40, **TAIL_SETTINGS)
@given(data=st.data())
def test_random_truncation_of_the_newest_segment_is_cut(tail_template, scratch, data):
    truncate_tail(tail_template, scratch, data)


@settings(max_examples=40, **TAIL_SETTINGS)
@given(data=st.data())
def test_random_byte_flips_in_the_last_entries_are_cut_unless_valid_entries_follow(tail_template, scratch, data):
    flip_tail(tail_template, scratch, data)


@pytest.mark.soak
@settings(max_examples=1000, **TAIL_SETTINGS)
@given(data=st.data())
def test_soak_random_truncation_of_the_newest_segment_is_cut(tail_template, scratch, data):
    truncate_tail(tail_template, scratch, data)


@pytest.mark.soak
@settings(max_examples=1000, **TAIL_SETTINGS)
@given(data=st.data())
def test_soak_random_byte_flips_in_the_last_entries_are_cut_unless_valid_entries_follow(tail_template, scratch, data):
    flip_tail(tail_template, scratch, data)


def test_an_undetected_flip_would_fail_the_tail_check(tail_template, scratch):
    """The checker can fail: claim damage at an entry that is intact."""
    directory = copy_of(tail_template, scratch)
    with pytest.raises(AssertionError, match="not detected"):
        check_cut_at(tail_template, directory, len(tail_template.starts[tail_template.newest]) - 1, True, None)


def damage_older_segment(template: TailTemplate, scratch: Path, how: str) -> tuple[Path, str, int, int]:
    """Flip a byte in (or truncate) a middle entry of the second segment; (directory, name, entry, position)."""
    name = template.segments[1]
    starts = template.starts[name]
    entry = len(starts) // 2
    directory = copy_of(template, scratch)
    path = directory / name
    if how == "flip":
        content = bytearray(path.read_bytes())
        content[starts[entry] + 30] ^= 0x5A
        path.write_bytes(bytes(content))
    else:
        os.truncate(path, starts[entry] + 7)
    return directory, name, entry, starts[entry]


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_corruption_in_an_older_segment_stops_the_read_with_its_position(tail_template, scratch, how):
    directory, name, entry, position = damage_older_segment(tail_template, scratch, how)
    expected = tail_template.batches_before(name, entry)
    with PartitionLog.open(directory, TAIL_CONFIG) as log:
        assert log.recovery.truncated is None  # older segments are checked as they are read, not on open
        seen = []
        with pytest.raises(CorruptLogError) as raised:
            for batch in log.read():
                seen.append(batch)
        assert batch_view(seen) == expected
        problem = raised.value.problem
        assert (problem.path, problem.position, problem.torn) == (directory / name, position, how == "truncate")
        assert name in str(raised.value) and f"byte {position}" in str(raised.value)
        # A read that starts past the damaged segment does not touch it.
        later = tail_template.segments[2]
        start = int(later.split(".")[0])
        assert batch_view(log.read(start)) == [b for b in tail_template.batches if b[0] >= start]
        with pytest.raises(CorruptLogError):
            load_partition(log)


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_skip_corrupt_segments_reads_on_from_the_next_segment(tail_template, scratch, how):
    directory, name, entry, position = damage_older_segment(tail_template, scratch, how)
    index = tail_template.segments.index(name)
    skipped_bases = {b[0] for b in tail_template.batches_before(tail_template.segments[index + 1], 0)}
    skipped_bases -= {b[0] for b in tail_template.batches_before(name, entry)}
    expected = [b for b in tail_template.batches if b[0] not in skipped_bases]
    config = dataclasses.replace(TAIL_CONFIG, skip_corrupt_segments=True)
    with PartitionLog.open(directory, config) as log:
        assert batch_view(log.read()) == expected
        assert [(p.path, p.position) for p in log.skipped] == [(directory / name, position)]
        loaded = load_partition(log)
        assert [(p.path, p.position) for p in loaded.skipped] == [(directory / name, position)]
        assert loaded.batches == len(expected)


# -- compaction killed at random points -------------------------------------------------------------

COMPACT_SEGMENT_BYTES = 1024
COMPACT_CONFIG = log_config("always", COMPACT_SEGMENT_BYTES)
T0 = 1_700_000_000_000


@dataclass(frozen=True)
class CompactTemplate:
    directory: Path
    store: object
    end_offset: int
    records: dict[int, tuple[bytes, bytes | None]]  # offset → (key, value) of the uncompacted log
    now_ms: int
    retention_ms: int
    active: str


@pytest.fixture(scope="module")
def compact_template(tmp_path_factory) -> CompactTemplate:
    """Many small segments of repeated keys and tombstones.

    Groups ``old0``/``old1`` are written only early and half their keys end with a tombstone older than
    the retention (the cleaner drops them); groups ``g0``/``g1`` are written throughout, a fifth of the
    records tombstones, so their latest tombstones are recent (kept).
    """
    directory = tmp_path_factory.mktemp("compact-template")
    rnd = random.Random(4242)
    count, retired_after = 600, 240
    old_keys = [OffsetCommitKey(f"old{g}", f"t{t}", p) for g in range(2) for t in range(3) for p in range(8)]
    with PartitionLog.open(directory, COMPACT_CONFIG) as log:
        for number in range(count):
            if retired_after <= number < retired_after + 12:  # tombstones for the even partitions of old keys
                step = 2 * (number - retired_after)
                pairs = [encode_record(key, None) for key in old_keys[::2][step : step + 2]]
            else:
                pairs = []
                for _ in range(rnd.randint(1, 5)):
                    if number < retired_after and rnd.random() < 0.5:
                        key = rnd.choice(old_keys)
                    else:
                        key = OffsetCommitKey(f"g{rnd.randrange(2)}", f"t{rnd.randrange(3)}", rnd.randrange(8))
                    value = None if rnd.random() < 0.2 else OffsetCommitValue(number, f"m{number}", T0 + number)
                    pairs.append(encode_record(key, value))
            log.append(pairs, timestamp_ms=T0 + number * 1000)
        store = load_partition(log).store
        records = {offset: (key, value) for batch in log.read() for offset, key, value in batch.entries()}
        end_offset, segments = log.end_offset, len(log.segments)
        active = log.segments[-1].path.name
    assert segments > 50 and len(store) > 40
    return CompactTemplate(directory, store, end_offset, records, T0 + count * 1000, count * 1000 // 2, active)


def compaction_copy(template: CompactTemplate, tmp_path: Path) -> Path:
    directory = tmp_path / "log"
    shutil.copytree(template.directory, directory)
    return directory


def check_compacted_log(template: CompactTemplate, directory: Path, expect_compaction: str | None) -> None:
    """The log replays to the template's store, with no compaction leftovers and the active segment intact."""
    with PartitionLog.open(directory, COMPACT_CONFIG) as log:
        assert files_named(directory, "*.cleaned") == [] and files_named(directory, "swap.json*") == []
        compaction = log.recovery.compaction
        if expect_compaction is None:
            assert compaction is None
        else:
            assert compaction is not None and compaction.startswith(expect_compaction), compaction
        assert log.recovery.truncated is None
        assert log.end_offset == template.end_offset
        kept, previous = {}, -1
        for batch in log.read():
            for offset, key, value in batch.entries():
                assert offset > previous, f"offset {offset} after {previous}"
                kept[offset], previous = (key, value), offset
        # Compaction only drops records; the latest record of each key stays unless it is a tombstone.
        assert all(template.records[offset] == record for offset, record in kept.items())
        latest = {key: offset for offset, (key, _) in sorted(template.records.items())}
        for offset in latest.values():
            assert offset in kept or template.records[offset][1] is None, f"latest record at {offset} lost"
        assert load_partition(log).store == template.store
    assert (directory / template.active).read_bytes() == (template.directory / template.active).read_bytes()
    with PartitionLog.open(directory, COMPACT_CONFIG) as log:  # recovery finished the job
        assert (log.recovery.compaction, log.recovery.truncated) == (None, None)
        clean(log, template.now_ms, template.retention_ms)  # and the result can be compacted again
        assert load_partition(log).store == template.store


def state_at_kill(directory: Path) -> str:
    if (directory / swap.MANIFEST).exists():
        return "swap"
    if files_named(directory, "*.cleaned"):
        return "cleaned"
    return "none"


def crash_compaction(template: CompactTemplate, tmp_path: Path, seed: int, mode: str) -> None:
    """Kill the compact child: ``early`` (from spawn), ``random`` (after ready) or ``swap`` (once swap.json exists)."""
    rnd = random.Random(f"compact/{seed}")
    directory = compaction_copy(template, tmp_path)
    child = Child(
        tmp_path,
        *("compact", str(directory), "--now-ms", str(template.now_ms)),
        *("--segment-bytes", str(COMPACT_SEGMENT_BYTES), "--delete-retention-ms", str(template.retention_ms)),
    )
    try:
        if mode == "early":
            time.sleep(rnd.uniform(0.0, 0.3))  # the deliberate random kill point: start-up, opening, first pass
        elif mode == "random":
            child.wait_for_line("ready")
            time.sleep(rnd.uniform(0.0, 0.05))  # the deliberate random kill point: mostly the first passes
        else:
            child.wait_for_line("ready")
            manifest = directory / swap.MANIFEST
            deadline = time.monotonic() + WAIT_SECONDS
            while not manifest.exists():  # poll: the swap window is a few milliseconds
                assert time.monotonic() < deadline, "the child never committed a swap"
            delay = rnd.choice([0.0, 0.0, rnd.uniform(0.0, 0.003)])
            if delay:
                time.sleep(delay)  # the deliberate random kill point within the swap
        child.kill()
    finally:
        child.cleanup()
    state = state_at_kill(directory)
    print(f"killed ({mode}) after {child.lines.count('cleaned')} passes; left: {state}")
    expect = {"swap": "completed", "cleaned": "discarded", "none": None}[state]
    check_compacted_log(template, directory, expect)


COMPACT_MODES = ["early", "random", "swap"]


@pytest.mark.parametrize(("seed", "mode"), [(0, "early"), (1, "random"), (2, "random"), (3, "swap"), (4, "swap")])
def test_sigkill_during_compaction_replays_to_the_same_store(compact_template, tmp_path, seed, mode):
    crash_compaction(compact_template, tmp_path, seed, mode)


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(100, 160))
def test_soak_sigkill_during_compaction_replays_to_the_same_store(compact_template, tmp_path, seed):
    crash_compaction(compact_template, tmp_path, seed, COMPACT_MODES[seed % 3])


class SimulatedCrash(BaseException):
    """Stands for the process dying at this point."""


class CrashingOs:
    """``os`` for :mod:`zkcoord.log.swap` that dies before its ``allowed``+1-th rename or unlink."""

    def __init__(self, allowed: int | None):
        self.allowed = allowed
        self.done = 0

    def __getattr__(self, name):
        return getattr(os, name)

    def _step(self) -> None:
        if self.allowed is not None and self.done >= self.allowed:
            raise SimulatedCrash(f"after {self.done} renames and unlinks")
        self.done += 1

    def replace(self, *args, **kwargs):
        self._step()
        return os.replace(*args, **kwargs)

    def unlink(self, *args, **kwargs):
        self._step()
        return os.unlink(*args, **kwargs)


def test_cleaned_files_without_a_manifest_are_discarded(compact_template, tmp_path, monkeypatch):
    directory = compaction_copy(compact_template, tmp_path)
    before = segment_bytes_of(directory)

    def die(*_):
        raise SimulatedCrash("before the commit point")

    with PartitionLog.open(directory, COMPACT_CONFIG) as log, monkeypatch.context() as patch:
        patch.setattr(swap, "commit_plan", die)
        with pytest.raises(SimulatedCrash):
            clean(log, compact_template.now_ms, compact_template.retention_ms)
    assert files_named(directory, "*.cleaned") and not (directory / swap.MANIFEST).exists()
    with PartitionLog.open(directory, COMPACT_CONFIG) as log:
        assert log.recovery.compaction.startswith("discarded")
    assert files_named(directory, "*.cleaned") == []
    assert segment_bytes_of(directory) == before  # the old set, untouched
    check_compacted_log(compact_template, directory, None)


def interrupt_swap(template: CompactTemplate, tmp_path: Path, monkeypatch, sample: int | None) -> None:
    """Crash before a rename or unlink of the swap (``sample`` random ones, the first and last few; all if None):
    before the manifest the old set stays, after it the reopened directory holds what an uninterrupted pass leaves.
    """
    reference = compaction_copy(template, tmp_path / "reference")
    counting = CrashingOs(None)
    with PartitionLog.open(reference, COMPACT_CONFIG) as log, monkeypatch.context() as patch:
        patch.setattr(swap, "os", counting)
        result = clean(log, template.now_ms, template.retention_ms)
    assert result.segments_after > 1 and counting.done > 4  # renames of several segments, deletions, the manifest
    assert result.tombstones_dropped > 0
    cleaned = segment_bytes_of(reference)
    original = segment_bytes_of(template.directory)
    assert cleaned != original

    steps = list(range(counting.done))
    if sample is not None:
        edges = steps[:4] + steps[-3:]
        steps = sorted(set(edges) | set(random.Random(sample).sample(steps, min(sample, len(steps)))))
    for allowed in steps:
        directory = compaction_copy(template, tmp_path / f"crash-{allowed}")
        with PartitionLog.open(directory, COMPACT_CONFIG) as log, monkeypatch.context() as patch:
            patch.setattr(swap, "os", CrashingOs(allowed))
            with pytest.raises(SimulatedCrash):
                clean(log, template.now_ms, template.retention_ms)
        committed = (directory / swap.MANIFEST).exists()
        assert committed == (allowed > 0), allowed  # the manifest's own rename is the first step
        with PartitionLog.open(directory, COMPACT_CONFIG) as log:
            assert log.recovery.compaction.startswith("completed" if committed else "discarded"), allowed
            assert load_partition(log).store == template.store
        assert segment_bytes_of(directory) == (cleaned if committed else original), allowed
        assert files_named(directory, "*.cleaned") == [] and files_named(directory, "swap.json*") == []


def test_an_interrupted_swap_is_rolled_forward(compact_template, tmp_path, monkeypatch):
    interrupt_swap(compact_template, tmp_path, monkeypatch, sample=6)


@pytest.mark.soak
def test_soak_an_interrupted_swap_is_rolled_forward_from_every_step(compact_template, tmp_path, monkeypatch):
    interrupt_swap(compact_template, tmp_path, monkeypatch, sample=None)
