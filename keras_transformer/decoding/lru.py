"""`LRUCache`: a bounded mapping that forgets its least recently used entry, for compiled functions and engines.

Every cache of compiled code in the package is one of these: a caller that keeps asking for new settings or shapes
makes the oldest ones be dropped (and their programs freed with them), never an ever-growing process.
"""

import collections

DEFAULT_SIZE = 32


class LRUCache:
    """At most `size` entries; `get(key, make)` returns the entry, making it with `make()` when absent (and dropping
    the least recently used entry past `size`).

    >>> cache = LRUCache(2)
    >>> [cache.get(k, lambda: k * 10) for k in (1, 2, 1, 3)]
    [10, 20, 10, 30]
    >>> sorted(cache.keys())  # 2 was the least recently used
    [1, 3]
    """

    def __init__(self, size=DEFAULT_SIZE):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be an integer >= 1, got {size!r}")
        self.size = size
        self._entries = collections.OrderedDict()
        self.evictions = 0

    def get(self, key, make):
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        value = self._entries[key] = make()
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
            self.evictions += 1
        return value

    def keys(self):
        return list(self._entries)

    def values(self):
        return list(self._entries.values())

    def clear(self):
        self._entries.clear()

    def __iter__(self):
        return iter(list(self._entries))

    def __contains__(self, key):
        return key in self._entries

    def __len__(self):
        return len(self._entries)
