"""Must FAIL to type-check (scripts/test_wheel.sh): proves the wheel's types reach mypy (with
missing types every line below would be Any and pass)."""
import zeroplan

a: str = zeroplan.plan(model="13b", gpus="4xA40").candidates_evaluated  # int, not str
b: int = zeroplan._core.version()  # str, not int
