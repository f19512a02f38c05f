"""Every numeric limit of the wire contract, in one place (spec 02 and 03)."""

SCOPE_ID_MAX_CHARS = 256
ID_MAX_CHARS = 128
MEMORY_TEXT_MAX_BYTES = 8192
MEMORY_KIND_MAX_CHARS = 128
MEMORY_REASON_MAX_CHARS = 512
MAX_TAGS = 16
TAG_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
MAX_EVIDENCE_REFS = 32
SOURCE_ID_MAX_CHARS = 256
SOURCE_CONTENT_MAX_CHARS = 200_000
SOURCE_METADATA_MAX_BYTES = 16_384
# Deepest nesting of a captured source's metadata (an object in an object … counts a level
# each): the responses' serialiser stops at 255 levels and Python's parsers near 1000, so a
# deeper value would be accepted but could never be read back.
SOURCE_METADATA_MAX_DEPTH = 64
# Deepest nesting of any JSON a user file or argument brings in (an export line, a CLI
# ``@FILE``): deeper is refused as invalid input before anything recursive walks it.
JSON_MAX_DEPTH = 256
QUERY_MAX_CHARS = 8192
SEARCH_LIMIT_MAX = 50
SEARCH_LIMIT_DEFAULT = 10
LIST_LIMIT_MAX = 100
LIST_LIMIT_DEFAULT = 50
CHANGES_LIMIT_MAX = 1000
CHANGES_LIMIT_DEFAULT = 100
MAX_BODY_BYTES_DEFAULT = 1024 * 1024
# A task result (record_task_result, docs/api.md § Task results): bounded exact evidence.
TASK_ID_MAX_CHARS = 128
TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"
TASK_GOAL_MAX_CHARS = 2000
TASK_PATH_MAX_CHARS = 512
TASK_LINES_MAX = 10_000_000  # lines added or removed in one file
TASK_CHANGES_MAX = 100
TASK_COMMAND_MAX_CHARS = 1000
TASK_OUTPUT_TAIL_MAX_CHARS = 2000
TASK_CHECKS_MAX = 50
TASK_HOST_MAX_CHARS = 64
TASK_HOST_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
TASK_SESSION_REF_MAX_CHARS = 256
#: Source ids under this prefix are task results: a content capture may not use it.
TASK_RESULT_PREFIX = "task-result/"
# Revisions and versions name stored rows, 64-bit signed in both databases: a number from
# 2**63 up names nothing, and binding it in a query would fail inside the driver. An exclusive
# bound, because the OpenAPI document writes bounds as floats: 2**63 is exact there, 2**63 - 1
# is not.
INT64_END = 2**63

BOOTSTRAP_TAG = "bootstrap-context"
