"""Java and Scala 2.10/2.11 semantics that 0.8.2's assignors depend on, emulated bit for bit.

legacy-zk-protocol.md §2.2 (Java string order), §4.2 step 5 (``String.hashCode``) and §4.3
(iteration order of Scala's immutable ``Map`` and ``mutable.HashMap``, which decides round-robin ties).
Pure: must not import IO modules.
"""

from collections.abc import Iterable, Sequence

_MASK32 = 0xFFFFFFFF


def java_string_key(text: str) -> bytes:
    """Sort key giving ``java.lang.String.compareTo`` order (UTF-16 code units)."""
    return text.encode("utf-16-be")


def java_string_hash(text: str) -> int:
    """``java.lang.String.hashCode`` as a signed 32-bit int."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


def _imul(a: int, b: int) -> int:
    return (a * b) & _MASK32


def _byteswap32(value: int) -> int:
    """``scala.util.hashing.byteswap32``."""
    hc = _imul(value & _MASK32, 0x9E3775CD)
    hc = int.from_bytes(hc.to_bytes(4, "big"), "little")
    return _imul(hc, 0x9E3775CD)


# mutable.HashTable: initial 16 slots, load factor 750/1000; the seed is bitCount(15) = 4 and is
# never recomputed on resize.
_INITIAL_SLOTS = 16
_LOAD_FACTOR_PERMILLE = 750
_TABLE_SEED = 4


def _bucket(key_hash: int, slots: int) -> int:
    swapped = _byteswap32(key_hash)
    improved = ((swapped >> _TABLE_SEED) | (swapped << (32 - _TABLE_SEED))) & _MASK32
    bits = (slots - 1).bit_count()
    return (improved >> (32 - bits)) & (slots - 1)


def mutable_hashmap_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a Scala 2.10/2.11 ``mutable.HashMap[String, _]`` filled with ``keys`` in order."""
    table: list[list[str]] = [[] for _ in range(_INITIAL_SLOTS)]
    threshold = _INITIAL_SLOTS * _LOAD_FACTOR_PERMILLE // 1000
    size = 0
    for key in keys:
        chain = table[_bucket(java_string_hash(key), len(table))]
        if key in chain:
            continue
        chain.insert(0, key)  # new entries are prepended to their chain
        size += 1
        if size > threshold:
            resized: list[list[str]] = [[] for _ in range(2 * len(table))]
            for old_chain in reversed(table):  # resize walks old buckets last to first, prepending
                for moved in old_chain:
                    resized[_bucket(java_string_hash(moved), len(resized))].insert(0, moved)
            table = resized
            threshold = len(table) * _LOAD_FACTOR_PERMILLE // 1000
    return [key for chain in reversed(table) for key in chain]


def _immutable_improve(hcode: int) -> int:
    """``immutable.HashMap.improve`` (Scala 2.10/2.11)."""
    h = hcode & _MASK32
    h = (h + (~(h << 9) & _MASK32)) & _MASK32
    h ^= h >> 14
    h = (h + (h << 4)) & _MASK32
    return h ^ (h >> 10)


def immutable_map_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of ``Map(k1 -> v1, ...)`` as Scala's JSON parser builds it from distinct keys.

    Up to four keys Map1..Map4 keep insertion order; more become a HashTrieMap ordered by the 5-bit
    chunks of the improved hash, lowest chunk first, equal hashes in insertion order.
    """
    if len(keys) <= 4:
        return list(keys)

    def trie_path(key: str) -> tuple[int, ...]:
        h = _immutable_improve(java_string_hash(key))
        return tuple((h >> shift) & 31 for shift in range(0, 32, 5))

    return sorted(keys, key=trie_path)
