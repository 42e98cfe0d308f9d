"""Wire models of every airlockd tool: one source of truth for each shape.

Import-light on purpose (pydantic only): the client, the LLM tool definitions
and the server all import this module, and ``/v1/tools`` and
``/v1/openapi.json`` are generated from it. Every input model has an object
root so its JSON schema can be handed to a model as a function definition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

# ---------------------------------------------------------------- common


class ToolInput(BaseModel):
    """Base of every tool input: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")

    granted_paths: list[str] = Field(
        default_factory=list,
        description=(
            "Absolute paths the orchestrator's permission layer approved for this one call; "
            "they count as roots for this call only. Requires a write-scope token."
        ),
    )


class ToolOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorEnvelope(BaseModel):
    error: ErrorBody


Severity = Literal["error", "warning", "info"]
CheckName = Literal["git-diff", "whitespace", "syntax", "types"]
ALL_CHECKS: list[CheckName] = ["git-diff", "whitespace", "syntax", "types"]


class Diagnostic(BaseModel):
    path: str
    line: int
    column: int
    severity: Severity
    check: str
    code: str
    message: str


class SkippedCheck(BaseModel):
    check: str
    reason: str


class EditingInput(ToolInput):
    diagnostics: bool = Field(
        True, description="Report the problems this edit introduced (false skips the checks)."
    )


# ---------------------------------------------------------------- file_read


class FileReadInput(ToolInput):
    path: str = Field(description="File to read, relative to the workspace or absolute inside it.")
    offset: int = Field(1, ge=1, description="First line to return (1-based).")
    limit: int = Field(2000, ge=1, le=100000, description="Maximum number of lines.")
    budget_chars: int = Field(
        50000, ge=1, le=1000000, description="Maximum characters of content returned."
    )


LineEndingName = Literal["lf", "crlf", "mixed", "none"]


class TextFile(ToolOutput):
    kind: Literal["text"] = "text"
    path: str
    content: str
    start_line: int
    end_line: int
    total_lines: int
    next_offset: int | None = Field(
        description="First line not returned; pass it as offset to continue. Null at end of file."
    )
    truncated: bool
    line_ending: LineEndingName
    bom: bool
    line_truncated: bool = False
    message: str | None = None


class ImageFile(ToolOutput):
    kind: Literal["image"] = "image"
    path: str
    mime: str
    data_base64: str
    bytes: int


FileReadOutput = Annotated[TextFile | ImageFile, Field(discriminator="kind")]


class FileMultiReadInput(ToolInput):
    paths: list[str] = Field(
        min_length=1,
        max_length=50,
        description="Files to read (1 to 50), relative to the workspace or absolute inside it.",
    )
    budget_chars: int = Field(
        50000, ge=1, le=1000000, description="Maximum characters of content, shared by all files."
    )


class FileReadError(ToolOutput):
    path: str
    error: ErrorBody


class FileMultiReadOutput(ToolOutput):
    files: list[TextFile | ImageFile | FileReadError]


# ---------------------------------------------------------------- file_list


class FileListInput(ToolInput):
    path: str = Field(".", description="Directory (or file) to list, relative to the workspace.")
    depth: int = Field(2, ge=1, le=10, description="Levels to descend; 1 lists children only.")
    limit: int = Field(1000, ge=1, le=10000, description="Most entries to return.")
    include_hidden: bool = Field(False, description="Also list names starting with '.'.")
    include_ignored: bool = Field(False, description="Also list what .gitignore rules hide.")


class ListEntry(BaseModel):
    path: str
    type: Literal["file", "dir", "symlink"]
    size: int | None = None


class FileListOutput(ToolOutput):
    entries: list[ListEntry]
    truncated: bool
    note: str | None = None


# ---------------------------------------------------------------- file_search

OutputMode = Literal["files_with_matches", "content", "count"]


class FileSearchInput(ToolInput):
    pattern: str = Field(min_length=1, description="Regular expression (Rust regex syntax).")
    path: str = Field(".", description="Directory or file to search, relative to the workspace.")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. '*.py'.")
    type: str | None = Field(None, description="Only files of this rg type, e.g. 'py', 'ts'.")
    output_mode: OutputMode = Field(
        "files_with_matches",
        description="files_with_matches: paths; content: matching lines; count: per file.",
    )
    case_insensitive: bool = Field(False, description="Match letters regardless of case.")
    fixed_strings: bool | None = Field(
        None, description="Literal match; automatic when the pattern has no regex metacharacter."
    )
    context: int = Field(
        0, ge=0, le=10, description="Lines of context around each match (content mode)."
    )
    limit: int = Field(50, ge=1, le=200, description="Most rows to return.")
    offset: int = Field(0, ge=0, description="Rows to skip, to page through results.")
    include_ignored: bool = Field(
        False, description="Also search files that .gitignore rules hide (e.g. a virtualenv)."
    )


class SearchMatch(BaseModel):
    path: str
    line: int
    text: str
    context_before: list[str] = Field(default_factory=list)
    context_after: list[str] = Field(default_factory=list)


class SearchCount(BaseModel):
    path: str
    count: int


class FileSearchOutput(ToolOutput):
    mode: OutputMode
    engine: Literal["rg", "grep"]
    files: list[str] | None = None
    matches: list[SearchMatch] | None = None
    counts: list[SearchCount] | None = None
    total: int | None = None
    truncated: bool
    note: str | None = None


# ---------------------------------------------------------------- diagnostics


class DiagnosticsInput(ToolInput):
    paths: list[str] = Field(
        min_length=1, max_length=200, description="Files to check (1 to 200), workspace-relative."
    )
    checks: list[CheckName] = Field(
        default_factory=lambda: list(ALL_CHECKS),
        description="Which checks to run; all four when omitted.",
    )


class DiagnosticsOutput(ToolOutput):
    diagnostics: list[Diagnostic]
    checks_run: list[str]
    skipped: list[SkippedCheck]


# ---------------------------------------------------------------- editing


class FileWriteInput(EditingInput):
    path: str = Field(description="File to create or replace, relative to the workspace.")
    content: str = Field(description="The whole new content of the file.")
    create_dirs: bool = Field(True, description="Create missing parent directories.")
    expected_sha256: str | None = Field(
        None, description="Write only if the file's current sha256 is this (compare-and-swap)."
    )


class EditOutput(ToolOutput):
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    diagnostics_skipped: list[SkippedCheck] = Field(default_factory=list)


class FileWriteOutput(EditOutput):
    path: str
    created: bool
    bytes: int
    sha256: str
    diff: str


MatchKind = Literal["exact", "trailing_whitespace", "indentation", "blank_lines"]


class FilePatchInput(EditingInput):
    path: str = Field(description="File to edit, relative to the workspace.")
    old_string: str = Field(description="Text to replace; must match uniquely unless replace_all.")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of one.")
    expected_sha256: str | None = Field(
        None, description="Edit only if the file's current sha256 is this (compare-and-swap)."
    )


class FilePatchOutput(EditOutput):
    path: str
    replacements: int
    match: MatchKind
    sha256: str
    diff: str


class PatchEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to edit, relative to the workspace.")
    old_string: str = Field(description="Text to replace; must match uniquely unless replace_all.")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of one.")


class FileMultiPatchInput(EditingInput):
    edits: list[PatchEdit] = Field(
        min_length=1, max_length=100, description="The edits (1 to 100), applied in order."
    )


class PatchedFile(BaseModel):
    path: str
    replacements: int
    sha256: str
    diff: str


class FileMultiPatchOutput(EditOutput):
    files: list[PatchedFile]


class FileDiffPreviewInput(ToolInput):
    edits: list[PatchEdit] = Field(
        min_length=1, max_length=100, description="The edits (1 to 100) to preview, in order."
    )


class PreviewFile(BaseModel):
    path: str
    diff: str


class FileDiffPreviewOutput(ToolOutput):
    files: list[PreviewFile]


MAX_PATCH_CHARS = 500_000


class ApplyPatchInput(EditingInput):
    patch: str = Field(
        max_length=MAX_PATCH_CHARS,
        description=(
            "A patch in the apply_patch format, from '*** Begin Patch' to '*** End Patch'. "
            "The shell forms `apply_patch <<'EOF' ... EOF` (or `applypatch`), optionally "
            "preceded by `cd DIR &&`, are accepted too."
        ),
    )
    root: str = Field(".", description="Directory the patch's relative paths resolve against.")


class AppliedFile(BaseModel):
    operation: Literal["add", "update", "move", "delete"]
    path: str
    previous_path: str | None = None


class ApplyPatchOutput(EditOutput):
    files: list[AppliedFile]
    summary: str


# ---------------------------------------------------------------- exec


class ExecInput(ToolInput):
    argv: list[str] = Field(min_length=1, description="Program and arguments; no shell.")
    cwd: str = Field(".", description="Working directory, relative to the workspace.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment variables for the program."
    )
    stdin: str | None = Field(None, description="Text written to the program's standard input.")
    timeout_s: int = Field(60, ge=1, le=3600, description="Seconds before the program is killed.")
    max_output_bytes: int = Field(
        100_000, ge=1, le=10_000_000, description="Most bytes of stdout and of stderr returned."
    )
    keep: Literal["tail", "head"] = Field(
        "tail", description="Which end of long output to keep (the rest goes to spill_path)."
    )

    @field_validator("argv")
    @classmethod
    def _argv_no_nul(cls, argv: list[str]) -> list[str]:
        if any("\0" in arg for arg in argv):
            raise ValueError("an argument holds a NUL character, which no program can receive")
        return argv

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not name or "=" in name or "\0" in name or len(name) > 1024:
                raise ValueError(
                    f"environment name {name[:40]!r} is invalid: names are 1-1024 characters "
                    "without '=' or NUL"
                )
            if "\0" in value:
                raise ValueError(f"environment variable {name[:40]!r} holds a NUL character")
        return env


class ExecOutput(ToolOutput):
    exit_code: int | None
    signal: int | None
    timed_out: bool
    duration_ms: int
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    spill_path: str | None = None


# ---------------------------------------------------------------- background processes
# (process_start, process_read, process_write, process_kill, process_list; their specs are
# appended to TOOL_SPECS in one block at the end of this module.)

MAX_LIVE_PROCESSES = 32
PROCESS_RING_BYTES = 8 * 1024 * 1024


class ProcessStartInput(ToolInput):
    argv: list[str] = Field(
        min_length=1, description="Program and arguments; no shell (wrap in sh -c yourself)."
    )
    cwd: str = Field(".", description="Working directory, inside the workspace or a root.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Variables added to the daemon's environment."
    )
    stdin: str | None = Field(
        None, description="Written to the process's stdin at start; stdin stays open for more."
    )
    name: str | None = Field(
        None, max_length=200, description="A label for process_list (e.g. 'dev-server')."
    )
    pty: bool = Field(
        False,
        description="Run it in a pseudo-terminal (REPLs, prompts, less, top): its stdin, stdout "
        "and stderr are the terminal, TERM defaults to xterm-256color, output is one stream "
        "(stdout), and process_write sends keystrokes (\\u0003 is Ctrl-C).",
    )
    cols: int = Field(80, ge=1, le=1000, description="Terminal width in columns (with pty).")
    rows: int = Field(24, ge=1, le=1000, description="Terminal height in rows (with pty).")


class ProcessStartOutput(ToolOutput):
    id: str = Field(description="Pass this id to process_read, process_write and process_kill.")
    pid: int = Field(description="The process's pid in the sandbox.")


class ProcessReadInput(ToolInput):
    id: str = Field(description="The id process_start returned.")
    offset: int = Field(
        0, ge=0, description="Where to start: 0 at first, then the previous next_offset."
    )
    max_bytes: int = Field(65536, ge=1, le=8 * 1024 * 1024, description="Most bytes returned.")
    wait_ms: int = Field(
        0,
        ge=0,
        le=30000,
        description="When nothing new is there yet, wait up to this long for output or exit.",
    )


class ProcessReadOutput(ToolOutput):
    stdout: str = Field(
        description="Standard output in this range (UTF-8, invalid bytes replaced)."
    )
    stderr: str = Field(description="Standard error in this range.")
    next_offset: int = Field(description="Pass it as offset to read what comes next.")
    running: bool = Field(
        description="False once the process has exited and all its output is in the buffer."
    )
    exit_code: int | None = Field(description="Null while running, or when killed by a signal.")
    signal: int | None = Field(None, description="The signal that ended the process, if one did.")
    dropped: int = Field(
        description="Bytes before next_offset's range that were overwritten (the buffer keeps "
        "the newest 8 MiB); read more often to lose none."
    )


class ProcessWriteInput(ToolInput):
    id: str = Field(description="The id process_start returned.")
    data: str = Field("", max_length=1_000_000, description="Text written to stdin as UTF-8.")
    eof: bool = Field(False, description="Close stdin after writing (the program sees EOF).")


class ProcessWriteOutput(ToolOutput):
    id: str = Field(description="The process written to.")
    written: int = Field(description="Bytes written to stdin.")
    stdin_open: bool = Field(description="False once eof was sent.")


class ProcessResizeInput(ToolInput):
    id: str = Field(description="The id process_start (with pty: true) returned.")
    cols: int = Field(ge=1, le=1000, description="New width in columns.")
    rows: int = Field(ge=1, le=1000, description="New height in rows.")


class ProcessResizeOutput(ToolOutput):
    id: str = Field(description="The process resized.")
    cols: int = Field(description="Its terminal's width now.")
    rows: int = Field(description="Its terminal's height now.")
    running: bool = Field(description="False when it had already exited (nothing was sent).")


class ProcessKillInput(ToolInput):
    id: str = Field(description="The id process_start returned.")
    signal: Literal["TERM", "KILL", "INT"] = Field(
        "TERM", description="TERM asks politely, INT is Ctrl-C, KILL cannot be ignored."
    )


class ProcessKillOutput(ToolOutput):
    id: str = Field(description="The process signalled.")
    pid: int = Field(description="Its pid.")
    signal: str = Field(description="The signal sent.")
    running: bool = Field(description="Still running a moment after the signal; KILL if so.")
    exit_code: int | None = Field(description="Its exit code if it exited normally.")


class ProcessListInput(ToolInput):
    pass


class ProcessInfo(BaseModel):
    id: str = Field(description="The id to pass to the other process tools.")
    pid: int = Field(description="The root process's pid.")
    name: str | None = Field(description="The name given to process_start.")
    argv: list[str] = Field(description="The command.")
    running: bool = Field(description="False once it has exited.")
    exit_code: int | None = Field(description="Exit code once exited normally.")
    signal: int | None = Field(description="The signal that ended it, if one did.")
    started_at: float = Field(description="Unix time the process started.")
    output_bytes: int = Field(description="Combined offset of the newest output byte.")
    pty: bool = Field(False, description="True when it runs in a pseudo-terminal.")


class ProcessListOutput(ToolOutput):
    processes: list[ProcessInfo] = Field(description="Running and recently exited processes.")


# POST /v1/exec/stream: exec's input; these events, one JSON object a line.


class ExecStartedEvent(BaseModel):
    type: Literal["started"] = Field("started", description="The command has started.")
    pid: int = Field(description="Its pid (the leader of its own process group).")


class ExecOutputEvent(BaseModel):
    type: Literal["stdout", "stderr"] = Field(description="Which stream this chunk is from.")
    data: str = Field(description="UTF-8 text (invalid bytes replaced); never a split character.")
    offset: int = Field(description="Byte offset of this event's first byte in its stream.")


class ExecExitEvent(BaseModel):
    type: Literal["exit"] = Field("exit", description="The last event: the command ended.")
    exit_code: int | None = Field(description="Exit code; null when a signal ended it.")
    timed_out: bool = Field(description="True when timeout_s ran out and it was killed.")
    duration_ms: int = Field(description="Wall time from start to exit.")
    signal: int | None = Field(None, description="The signal that ended it, if one did.")
    stdout_truncated: bool = Field(False, description="stdout went past max_output_bytes.")
    stderr_truncated: bool = Field(False, description="stderr went past max_output_bytes.")
    spill_path: str | None = Field(
        None, description="Null: a stream is not spilled (every byte was in its events)."
    )


class ExecErrorEvent(BaseModel):
    """A failure after ``started`` (before it, the answer is the usual error envelope)."""

    type: Literal["error"] = Field("error", description="The command failed after it started.")
    error: ErrorBody = Field(description="The usual error body (code, message, details).")


ExecEvent = Annotated[
    ExecStartedEvent | ExecOutputEvent | ExecExitEvent | ExecErrorEvent,
    Field(discriminator="type"),
]


# ---------------------------------------------------------------- service routes


class HealthOutput(BaseModel):
    status: Literal["ok"]
    version: str
    workspace: str
    engines: dict[str, Any]


class ToolInfo(BaseModel):
    name: str = Field(description="The tool's name, as called at POST /v1/tools/{name}.")
    description: str = Field(description="What the tool does, written for a model.")
    input_schema: dict[str, Any] = Field(
        description="JSON schema of the full input, orchestrator-only fields included."
    )
    model_input_schema: dict[str, Any] = Field(
        description=(
            "JSON schema of the input a model may send: input_schema without orchestrator-only "
            "fields (granted_paths). Every LLM and MCP definition is built from this one."
        )
    )
    output_schema: dict[str, Any] = Field(description="JSON schema of a successful output.")
    read_only: bool = Field(description="True when the tool never changes the sandbox.")
    supports_parallel: bool = Field(description="True when calls may run concurrently.")
    destructive: bool = Field(
        description="True when the tool may overwrite or delete (MCP destructiveHint)."
    )
    idempotent: bool = Field(
        description="True when repeating a call with the same input has no further effect."
    )


class ToolCatalog(BaseModel):
    tools: list[ToolInfo]


# ---------------------------------------------------------------- the catalogue


# Fields only the orchestrator may set: they never appear in a schema a model sees,
# and the model-facing entry points (airlock mcp, tools.model_arguments) refuse them.
ORCHESTRATOR_ONLY_FIELDS: frozenset[str] = frozenset({"granted_paths"})


def model_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without the orchestrator-only properties (a new dict; the input is kept)."""
    out = dict(schema)
    if "properties" in schema:
        out["properties"] = {
            k: v for k, v in schema["properties"].items() if k not in ORCHESTRATOR_ONLY_FIELDS
        }
    if "required" in schema:
        out["required"] = [k for k in schema["required"] if k not in ORCHESTRATOR_ONLY_FIELDS]
    return out


@dataclass(frozen=True)
class ToolSpec:
    """One tool: the single declaration the server, Workspace, clients and LLM/MCP use.

    Adding a tool is one entry in ``TOOL_SPECS`` (plus its handler on ``Workspace``);
    ``destructive``/``idempotent`` default from ``read_only``, and ``timeout_field``
    names the input field holding the call's own timeout (clients add a margin to it).
    """

    name: str
    description: str
    input_model: type[ToolInput]
    output_type: Any
    read_only: bool
    supports_parallel: bool
    destructive: bool | None = None
    idempotent: bool | None = None
    timeout_field: str | None = None
    default_timeout_s: float = 60.0

    @property
    def is_destructive(self) -> bool:
        return (not self.read_only) if self.destructive is None else self.destructive

    @property
    def is_idempotent(self) -> bool:
        return self.read_only if self.idempotent is None else self.idempotent

    def input_schema(self) -> dict[str, Any]:
        return self.input_model.model_json_schema()

    def model_input_schema(self) -> dict[str, Any]:
        """The input schema a model is given: no orchestrator-only field."""
        return model_schema(self.input_schema())

    def output_schema(self) -> dict[str, Any]:
        return TypeAdapter(self.output_type).json_schema()

    def info(self) -> ToolInfo:
        return ToolInfo(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema(),
            model_input_schema=self.model_input_schema(),
            output_schema=self.output_schema(),
            read_only=self.read_only,
            supports_parallel=self.supports_parallel,
            destructive=self.is_destructive,
            idempotent=self.is_idempotent,
        )


TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "file_read",
        "Read a text file by lines (offset/limit), fitted to a character budget. Follow "
        "next_offset to continue; it never skips text. Images come back as base64.",
        FileReadInput,
        FileReadOutput,
        read_only=True,
        supports_parallel=True,
    ),
    ToolSpec(
        "file_multi_read",
        "Read up to 50 files in one call, sharing one character budget; a file that fails "
        "has its own error entry and does not fail the others.",
        FileMultiReadInput,
        FileMultiReadOutput,
        read_only=True,
        supports_parallel=True,
    ),
    ToolSpec(
        "file_list",
        "List a directory tree to a depth, sorted by path, honouring .gitignore.",
        FileListInput,
        FileListOutput,
        read_only=True,
        supports_parallel=True,
    ),
    ToolSpec(
        "file_search",
        "Search file contents with ripgrep: file names, matching lines with context, or "
        "counts. Sorted by path then line; 'truncated' says when there is more.",
        FileSearchInput,
        FileSearchOutput,
        read_only=True,
        supports_parallel=True,
    ),
    ToolSpec(
        "file_diff_preview",
        "Show the unified diff that file_multi_patch would produce for these edits, "
        "without writing anything.",
        FileDiffPreviewInput,
        FileDiffPreviewOutput,
        read_only=True,
        supports_parallel=False,
    ),
    ToolSpec(
        "diagnostics",
        "Check files for syntax errors, whitespace and conflict-marker problems, and type "
        "errors where the sandbox has a checker.",
        DiagnosticsInput,
        DiagnosticsOutput,
        read_only=True,
        supports_parallel=False,
        default_timeout_s=180.0,
    ),
    ToolSpec(
        "file_write",
        "Create or replace a whole file atomically. Pass expected_sha256 to write only if "
        "the file is unchanged since you read it.",
        FileWriteInput,
        FileWriteOutput,
        read_only=False,
        supports_parallel=False,
        idempotent=True,
    ),
    ToolSpec(
        "file_patch",
        "Replace old_string with new_string in one existing file. old_string must match "
        "exactly one place (add surrounding lines to make it unique) unless replace_all.",
        FilePatchInput,
        FilePatchOutput,
        read_only=False,
        supports_parallel=False,
    ),
    ToolSpec(
        "file_multi_patch",
        "Apply several old_string/new_string edits across files, all or nothing: if any "
        "edit fails, nothing is written and the error names that edit.",
        FileMultiPatchInput,
        FileMultiPatchOutput,
        read_only=False,
        supports_parallel=False,
    ),
    ToolSpec(
        "apply_patch",
        "Apply a patch in the apply_patch format (*** Begin Patch ... *** End Patch) that "
        "adds, updates, moves or deletes files, atomically: all of it or none of it.",
        ApplyPatchInput,
        ApplyPatchOutput,
        read_only=False,
        supports_parallel=False,
    ),
    ToolSpec(
        "exec",
        "Run a program (argv, no shell) in the sandbox with a timeout. Long output keeps "
        "the tail (or head) and the rest is saved to spill_path.",
        ExecInput,
        ExecOutput,
        read_only=False,
        supports_parallel=False,
        timeout_field="timeout_s",
    ),
)


# ---------------------------------------------------------------- background process specs
# Appended in one block so the process tools stay together (see the models above).

_PROCESS_POLL = (
    "Poll it with process_read (offset=next_offset, wait_ms up to 30000 to wait for new output)."
)

TOOL_SPECS = (
    *TOOL_SPECS,
    ToolSpec(
        "process_start",
        "Start a long-running program in the background and return at once with its id: dev "
        "servers, file watchers, test runners in watch mode, anything you need to keep "
        "running while you do other things (use exec for commands that finish). "
        + _PROCESS_POLL
        + " At most 32 run at once; stop them with process_kill when done.",
        ProcessStartInput,
        ProcessStartOutput,
        read_only=False,
        supports_parallel=False,
    ),
    ToolSpec(
        "process_read",
        "Read a background process's output (stdout and stderr on one offset line) and "
        "whether it still runs. Start at offset 0, then pass next_offset each time; with "
        "wait_ms the call waits for new output or exit, so poll a server's log or a "
        "watcher's rebuild without busy-looping. dropped > 0 means older output was "
        "overwritten (8 MiB kept).",
        ProcessReadInput,
        ProcessReadOutput,
        read_only=True,
        supports_parallel=True,
    ),
    ToolSpec(
        "process_write",
        "Write text to a background process's stdin (a REPL, an interactive prompt); "
        "eof=true closes stdin. With pty: true the text is keystrokes (control characters "
        "as themselves: \\u0003 is Ctrl-C, \\r is Enter). Read the answer with process_read.",
        ProcessWriteInput,
        ProcessWriteOutput,
        read_only=False,
        supports_parallel=False,
    ),
    ToolSpec(
        "process_resize",
        "Resize the terminal of a process started with pty: true (the program gets SIGWINCH "
        "and redraws for the new size).",
        ProcessResizeInput,
        ProcessResizeOutput,
        read_only=False,
        supports_parallel=False,
        idempotent=True,
    ),
    ToolSpec(
        "process_kill",
        "Stop a background process and everything it started: TERM (default), INT (Ctrl-C) "
        "or KILL. Its output stays readable with process_read.",
        ProcessKillInput,
        ProcessKillOutput,
        read_only=False,
        supports_parallel=False,
    ),
    ToolSpec(
        "process_list",
        "List background processes (running and recently exited) with their ids, names, "
        "commands and exit codes.",
        ProcessListInput,
        ProcessListOutput,
        read_only=True,
        supports_parallel=True,
    ),
)

TOOLS_BY_NAME: dict[str, ToolSpec] = {spec.name: spec for spec in TOOL_SPECS}


# ---------------------------------------------------------------- watch and transfer routes
# POST /v1/watch, PUT/GET /v1/files, PUT/GET /v1/archive: orchestrator routes, not tools.


class WatchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(
        default_factory=lambda: ["."],
        min_length=1,
        max_length=64,
        description="Directories to watch, relative to the workspace or absolute inside a root.",
    )
    recursive: bool = Field(True, description="Watch every directory below them too.")
    include: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Only report paths matching one of these globs (a glob without '/' "
        "matches the file name at any depth; '**' crosses directories).",
    )
    exclude: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Never report (nor watch) paths matching one of these globs.",
    )
    ignore_files: bool = Field(
        True, description="Drop changes under paths .gitignore/.ignore/.rgignore hide."
    )


class WatchEvent(BaseModel):
    type: Literal["created", "modified", "deleted", "moved", "overflow"] = Field(
        description="What happened; 'overflow' means events were lost (rescan what you need)."
    )
    path: str | None = Field(
        None, description="Relative to the workspace (absolute in another root)."
    )
    to: str | None = Field(None, description="Where a 'moved' path went.")
    is_dir: bool | None = Field(None, description="True for a directory.")


class FileTransferOutput(BaseModel):
    path: str = Field(description="The file written or read, as every tool shows paths.")
    bytes: int = Field(description="Its size.")
    sha256: str = Field(description="Its sha256 (the ETag a GET answers, unquoted).")


class ArchivePutOutput(BaseModel):
    path: str = Field(description="The directory the archive was extracted into.")
    files: int = Field(description="Regular files written.")
    bytes: int = Field(description="Their total size.")
