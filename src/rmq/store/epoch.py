"""Master terms (epochs) and where each began in the CommitLog, so that a role switch never leaves two
diverging logs (Kafka's leader epochs; RocketMQ 5.x controller mode's epoch file).

    <storePathRootDir>/epoch.json    {"epochs": [[1, 0], [2, 4194304]]}
                                      epoch -> CommitLog offset at which its term began

A broker name's masters take increasing epochs: a master starting on a store without an epoch file
opens epoch 1 at its CommitLog's max offset; a slave promoted to master opens the next epoch at its
max offset. A slave keeps its master's table (it holds a prefix of the master's log).

When a former master comes back as a slave, its tail may hold messages its successor never had.
The two tables tell how far the logs agree (``divergence_point``): for the newest epoch both know,
each log holds that epoch's messages up to where its term ended (the start of the next epoch it
knows, else its max offset); the logs agree up to the smaller of the two ends. Everything after
that point is truncated from the rejoining slave (CommitLog, ConsumeQueue, index) before it
replicates again.

Written whole, crash-safe (``rmq._files``): a crash leaves the old or the new table, never a torn one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from rmq._files import read_with_backup, write_file_atomically
from rmq.errors import StoreError

EPOCH_FILE_NAME = "epoch.json"
FIRST_EPOCH = 1


@dataclasses.dataclass(frozen=True)
class EpochEntry:
    """One master term: ``epoch`` began writing at CommitLog offset ``start_offset``."""

    epoch: int
    start_offset: int


def check_entries(entries: Sequence[EpochEntry], what: str) -> None:
    """Epochs strictly increase, start offsets never decrease; else a StoreError naming ``what``."""
    for before, after in zip(entries, entries[1:], strict=False):
        if after.epoch <= before.epoch or after.start_offset < before.start_offset:
            raise StoreError(
                f"{what}: epoch {after.epoch} at offset {after.start_offset} cannot follow "
                f"epoch {before.epoch} at offset {before.start_offset} (epochs increase, offsets never decrease)"
            )
    for entry in entries:
        if entry.epoch < FIRST_EPOCH or entry.start_offset < 0:
            raise StoreError(f"{what}: epoch {entry.epoch} at offset {entry.start_offset} is out of range")


def end_of(entries: Sequence[EpochEntry], epoch: int, max_offset: int) -> int:
    """Where ``epoch``'s part of a log ends: the start of the next epoch the table knows, else the
    log's ``max_offset``."""
    for entry in entries:
        if entry.epoch > epoch:
            return min(entry.start_offset, max_offset)
    return max_offset


def divergence_point(mine: Sequence[EpochEntry], my_max: int, theirs: Sequence[EpochEntry], their_max: int) -> int:
    """The CommitLog offset up to which my log and theirs hold the same messages; truncate mine there.

    With no epoch in common, nothing is known to agree: the point is where the earlier table begins.
    """
    their_epochs = {entry.epoch for entry in theirs}
    for entry in reversed(mine):
        if entry.epoch in their_epochs:
            return min(end_of(mine, entry.epoch, my_max), end_of(theirs, entry.epoch, their_max))
    starts = [table[0].start_offset for table in (mine, theirs) if table]
    return min([*starts, my_max])


def _parse(text: str) -> list[EpochEntry]:
    entries = [EpochEntry(int(epoch), int(start)) for epoch, start in json.loads(text)["epochs"]]
    check_entries(entries, EPOCH_FILE_NAME)
    return entries


class EpochFile:
    """The epoch table of one store, in ``<store>/epoch.json``.

    epochs = EpochFile(store_path)
    epochs.ensure_started(store.get_max_phy_offset())   # a master's first start
    epochs.begin(store.get_max_phy_offset())            # promoted: the next term begins here
    epochs.begin(store.get_max_phy_offset(), epoch)     # the controllers' master epoch begins here
    epochs.truncate_to(offset)                          # a rejoining slave dropped its tail
    """

    def __init__(self, store_path: str | Path):
        self.path = Path(store_path) / EPOCH_FILE_NAME
        self.entries: list[EpochEntry] = self._load()

    def _load(self) -> list[EpochEntry]:
        try:
            entries = read_with_backup(self.path, _parse)
        except (ValueError, KeyError, TypeError, StoreError) as e:
            raise StoreError(f"{self.path} is not an epoch table ({e}): fix or remove it to start") from None
        return entries or []

    def _save(self, entries: list[EpochEntry]) -> None:
        check_entries(entries, str(self.path))
        write_file_atomically(self.path, json.dumps({"epochs": [[e.epoch, e.start_offset] for e in entries]}))
        self.entries = entries

    @property
    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    @property
    def current_epoch(self) -> int:
        """The newest epoch this store knows (0 before any)."""
        return self.entries[-1].epoch if self.entries else 0

    def ensure_started(self, start_offset: int) -> EpochEntry:
        """The current term, opening the first one at ``start_offset`` if the table is empty."""
        return self.last or self.begin(start_offset)

    def begin(self, start_offset: int, epoch: int | None = None) -> EpochEntry:
        """Open a term at ``start_offset``: ``epoch`` (the controllers' master epoch), or the next one
        (a promotion by command). StoreError for an epoch not newer than the newest known: another
        master's log may already claim it."""
        if epoch is None:
            epoch = self.current_epoch + 1
        elif epoch <= self.current_epoch:
            raise StoreError(
                f"{self.path}: cannot open epoch {epoch} at offset {start_offset}: this store already knows "
                f"epoch {self.current_epoch} (a master's epoch must be newer than every one its log holds)"
            )
        entry = EpochEntry(epoch, start_offset)
        self._save([*self.entries, entry])
        return entry

    def adopt(self, entries: Iterable[EpochEntry]) -> None:
        """Take a master's table (a slave's log is a prefix of its master's)."""
        self._save(list(entries))

    def truncate_to(self, offset: int) -> None:
        """Forget the terms that began after ``offset`` (the log was cut there)."""
        kept = [e for e in self.entries if e.start_offset <= offset]
        if kept != self.entries:
            self._save(kept)
