"""Parse Slurm's JSON output (`squeue --json`, `sinfo --json`, `sacct --json`) into records.

Slurm changes the JSON shape with every release, so this module reads all shapes the cluster
may produce and hides the differences from the rest of skybot:

* 22.05, OpenAPI plugin v0.0.38 (`openapi/v0.0.38` jobs.c + nodes.c, `dbv0.0.38` parse.c):
  plain numbers (null for INFINITE/NO_VAL), `job_state` a string, node `state` a lower-case
  string plus `state_flags`, sacct `exit_code: {"status": "...", "return_code": N,
  "signal": {"signal_id": N}}`, TRES as `tres_alloc_str` strings (squeue) or lists (sacct).
* 23.02+ data_parser v0.0.39 ... v0.0.42 (`src/plugins/data_parser/v0.0.4x/parsers.c`):
  numbers wrapped as `{"set": bool, "infinite": bool, "number": N}`, states as lists
  (`["PENDING", "REQUEUED"]`), exit codes as `{"status": [...], "return_code": ...,
  "signal": {"id": ..., "name": ...}}`, sinfo as `{"sinfo": [...]}` grouped by partition.

Where each field comes from is documented per version in tests/fixtures/slurm/README.md.

Input is plain JSON data: dicts, lists, str, int, float, bool and None, as `json.loads` or
`core.slurm_decode.decode_slurm_json` produce. Type checks are therefore on those concrete
classes (much cheaper than the collections.abc ones), which matters at 10,000 jobs a poll.

Robustness contract: a document of the wrong kind raises one `SlurmJsonError`; a bad record
never does. It is skipped (or partially filled) and a warning naming the record is added to
the `ParseResult`, so one odd job cannot blind the bot to the whole queue.
"""

from core.slurm_json.fields import ParseResult, SlurmJsonError
from core.slurm_json.nodes import parse_sinfo, sinfo_is_grouped
from core.slurm_json.sacct import parse_sacct, parse_sacct_pieces
from core.slurm_json.squeue import parse_squeue, parse_squeue_pieces

__all__ = [
    "ParseResult",
    "SlurmJsonError",
    "parse_sacct",
    "parse_sacct_pieces",
    "parse_sinfo",
    "parse_squeue",
    "parse_squeue_pieces",
    "sinfo_is_grouped",
]
