#!/usr/bin/env python3
"""Prints the end of each failed test's output from a ctest run (BUILD_DIR/Testing/Temporary/LastTest.log): ctest
prints a failure's output where the test ended, often far above the end of a long CI log, which is all that some
CI views keep. Usage: ctest_failures.py BUILD_DIR [LINES]."""
import re
import sys
from pathlib import Path


def failed_outputs(log: str, names: list[str], lines: int) -> str:
    out = []
    for name in names:
        m = re.search(r"Testing: " + re.escape(name) + r"\n.*?Output:\n-+\n(.*?)<end of output>", log, re.S)
        text = m.group(1).rstrip("\n").split("\n") if m else ["(no output recorded)"]
        out.append(f"==== {name}: the last {min(lines, len(text))} of {len(text)} lines of its output")
        out.extend(text[-lines:])
    return "\n".join(out)


def selftest() -> None:
    log = ("1/2 Testing: a.b\nCommand: x\nOutput:\n----\nok 1\nFAIL 2\n<end of output>\n"
           "2/2 Testing: c\nOutput:\n----\nfine\n<end of output>\n")
    got = failed_outputs(log, ["a.b", "gone"], 1)
    assert got == ("==== a.b: the last 1 of 2 lines of its output\nFAIL 2\n"
                   "==== gone: the last 1 of 1 lines of its output\n(no output recorded)"), got


def main() -> int:
    if sys.argv[1:] == ["--selftest"]:
        selftest()
        print("ctest_failures selftest: ok")
        return 0
    tmp = Path(sys.argv[1]) / "Testing" / "Temporary"
    lines = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    failed = tmp / "LastTestsFailed.log"
    if not failed.exists():
        print(f"ctest_failures: no {failed}")
        return 0
    names = [ln.split(":", 1)[1] for ln in failed.read_text().splitlines() if ":" in ln]
    print(failed_outputs((tmp / "LastTest.log").read_text(errors="replace"), names, lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
