from typing import List, Tuple

def run(args: List[str]) -> Tuple[int, str, str]:
    """Runs `zeroplan ARGS...` in-process; returns (exit_code, stdout_text, error_line)."""

def main(argv: List[str]) -> int:
    """The `zeroplan` program: prints to stdout/stderr, returns the exit code."""

def version() -> str: ...
