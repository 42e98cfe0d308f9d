"""The daemon's names and defaults, exactly as docs/reference.md fixes them.

Acceptance checks outside this repository call these names; a rename here
must be a deliberate contract change, so this test spells them out.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from airlock.daemon.errors import HTTP_STATUS, ErrorCode
from airlock.daemon.protocol import TOOLS_BY_NAME

ERRORS = {
    "invalid_request": 400, "unauthorized": 401, "forbidden": 403, "path_escape": 403,
    "generated_file": 403, "read_only": 403, "not_found": 404, "unknown_tool": 404, "is_directory": 400,
    "binary_file": 415, "too_large": 413, "patch_parse_error": 400, "hunk_not_found": 409,
    "ambiguous_match": 409, "stale_write": 409, "conflict": 409, "timeout": 504, "no_space": 507,
    "internal": 500,
}  # fmt: skip

INPUT_DEFAULTS: dict[str, dict[str, Any]] = {
    "file_read": {"offset": 1, "limit": 2000, "budget_chars": 50000},
    "file_multi_read": {"budget_chars": 50000},
    "file_list": {"path": ".", "depth": 2, "limit": 1000, "include_hidden": False, "include_ignored": False},
    "file_search": {
        "path": ".", "output_mode": "files_with_matches", "case_insensitive": False,
        "context": 0, "limit": 50, "offset": 0, "include_ignored": False,
    },
    "diagnostics": {"checks": ["git-diff", "whitespace", "syntax", "types"]},
    "file_write": {"create_dirs": True},
    "file_patch": {"replace_all": False},
    "apply_patch": {"root": "."},
    "exec": {"cwd": ".", "env": {}, "timeout_s": 60, "max_output_bytes": 100000, "keep": "tail"},
}  # fmt: skip

REQUIRED_INPUTS = {
    "file_read": {"path"},
    "file_multi_read": {"paths"},
    "file_search": {"pattern"},
    "file_diff_preview": {"edits"},
    "diagnostics": {"paths"},
    "file_write": {"path", "content"},
    "file_patch": {"path", "old_string", "new_string"},
    "file_multi_patch": {"edits"},
    "apply_patch": {"patch"},
    "exec": {"argv"},
}

OUTPUT_FIELDS = {
    "file_multi_read": {"files"},
    "file_list": {"entries", "truncated"},
    "file_search": {"mode", "engine", "files", "matches", "counts", "total", "truncated", "note"},
    "file_diff_preview": {"files"},
    "diagnostics": {"diagnostics", "checks_run", "skipped"},
    "file_write": {"path", "created", "bytes", "sha256", "diff", "diagnostics"},
    "file_patch": {"path", "replacements", "match", "sha256", "diff", "diagnostics"},
    "file_multi_patch": {"files", "diagnostics"},
    "apply_patch": {"files", "diagnostics", "summary"},
    "exec": {
        "exit_code", "signal", "timed_out", "duration_ms", "stdout", "stderr",
        "stdout_truncated", "stderr_truncated", "spill_path",
    },
}  # fmt: skip

TEXT_READ_FIELDS = {
    "path", "kind", "content", "start_line", "end_line", "total_lines", "next_offset",
    "truncated", "line_ending", "bom",
}  # fmt: skip


def test_error_codes_and_statuses() -> None:
    assert {str(c): HTTP_STATUS[c] for c in ErrorCode} == ERRORS


TOOL_NAMES = {
    "file_read", "file_multi_read", "file_list", "file_search", "file_diff_preview",
    "diagnostics", "file_write", "file_patch", "file_multi_patch", "apply_patch", "exec",
    "process_start", "process_read", "process_write", "process_resize", "process_kill",
    "process_list",
}  # fmt: skip
"""The tool set the contract names (the server's /v1/tools is checked against it too)."""


def test_tool_set_and_flags() -> None:
    assert set(TOOLS_BY_NAME) == TOOL_NAMES
    read_only = {n for n, s in TOOLS_BY_NAME.items() if s.read_only}
    assert read_only == {
        "file_read",
        "file_multi_read",
        "file_list",
        "file_search",
        "file_diff_preview",
        "diagnostics",
        "process_read",
        "process_list",
    }
    parallel = {n for n, s in TOOLS_BY_NAME.items() if s.supports_parallel}
    assert parallel == {
        "file_read", "file_multi_read", "file_list", "file_search", "process_read", "process_list",
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(INPUT_DEFAULTS))
def test_input_defaults(name: str) -> None:
    fields = TOOLS_BY_NAME[name].input_model.model_fields
    for field, default in INPUT_DEFAULTS[name].items():
        value = fields[field].get_default(call_default_factory=True)
        assert value == default, (name, field)


@pytest.mark.parametrize("name", sorted(REQUIRED_INPUTS))
def test_required_inputs(name: str) -> None:
    schema = TOOLS_BY_NAME[name].input_schema()
    assert schema["type"] == "object"
    assert set(schema.get("required", [])) == REQUIRED_INPUTS[name]


@pytest.mark.parametrize("name", sorted(OUTPUT_FIELDS))
def test_output_fields(name: str) -> None:
    schema = TypeAdapter(TOOLS_BY_NAME[name].output_type).json_schema()
    assert OUTPUT_FIELDS[name] <= set(schema["properties"]), name


def test_file_read_shapes() -> None:
    schema = TOOLS_BY_NAME["file_read"].output_schema()
    variants = {
        k: set(v["properties"])
        for k, v in schema["$defs"].items()
        if k in ("TextFile", "ImageFile")
    }
    assert variants["TextFile"] >= TEXT_READ_FIELDS
    assert {"kind", "mime", "data_base64", "bytes"} <= variants["ImageFile"]


def test_bounds() -> None:
    def bounds(name: str, field: str) -> tuple[Any, Any]:
        prop = TOOLS_BY_NAME[name].input_schema()["properties"][field]
        return prop.get("minimum", prop.get("minItems")), prop.get("maximum", prop.get("maxItems"))

    assert bounds("file_multi_read", "paths") == (1, 50)
    assert bounds("file_list", "depth") == (1, 10)
    assert bounds("file_search", "context") == (0, 10)
    assert bounds("file_search", "limit") == (1, 200)
    assert bounds("file_multi_patch", "edits") == (1, 100)
    assert bounds("exec", "timeout_s") == (1, 3600)
    assert TOOLS_BY_NAME["apply_patch"].input_schema()["properties"]["patch"]["maxLength"] == 500000
