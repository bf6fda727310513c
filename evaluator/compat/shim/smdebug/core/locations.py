"""smdebug.core.locations: ``IndexFileLocationUtils``, the index-file naming rules."""

from __future__ import annotations

import os
import re

__all__ = ["IndexFileLocationUtils"]


class IndexFileLocationUtils:
    """Where the index file of a step lives: ``<trial>/index/<step // 1000, 9 digits>/
    <step, 12 digits>_<worker>.json``."""

    MAX_INDEX_FILE_NUM_IN_INDEX_PREFIX = 1000

    @staticmethod
    def get_index_prefix_for_step(step_num: int) -> str:
        return format(step_num // IndexFileLocationUtils.MAX_INDEX_FILE_NUM_IN_INDEX_PREFIX, "09")

    @staticmethod
    def next_index_prefix_for_step(step_num: int) -> str:
        folder = step_num // IndexFileLocationUtils.MAX_INDEX_FILE_NUM_IN_INDEX_PREFIX
        return format(folder + 1, "09")

    @staticmethod
    def get_index_key_for_step(trial_prefix: str, step_num: int, worker_name: str) -> str:
        folder = IndexFileLocationUtils.get_index_prefix_for_step(step_num)
        name = f"{format(step_num, '012')}_{worker_name}.json"
        return os.path.join(trial_prefix, "index", folder, name)

    @staticmethod
    def get_step_from_idx_filename(index_file_name: str) -> int:
        """The number between the first and second ``_`` of ``index_file_name``."""
        after = index_file_name[index_file_name.find("_") + 1 :]
        return int(after[: after.find("_")])

    @staticmethod
    def parse_step_from_index_file_name(index_file_name: str) -> int:
        """The step of an index (or event) file: its base name up to the first ``_``."""
        return int(os.path.basename(index_file_name).split("_")[0])

    @staticmethod
    def get_index_path(path: str) -> str:
        return os.path.join(path, "index")

    @staticmethod
    def get_prefix_from_index_file(index_file: str) -> str:
        """What precedes the last ``/index/`` of ``index_file``."""
        found = re.match(r"(.+)/index/.+$", index_file)
        if found is None:
            raise ValueError(f"not the path of an index file: {index_file!r}")
        return found.group(1)
