#!/usr/bin/env python3
"""Checks the rule of src/core/cuda/launch.cuh over the CUDA sources (standard library only).

With programmatic dependent launch a kernel's blocks may start while the kernel before it is still running, so
  1. every kernel (__global__ function) under src/ calls cuda::pdl_enter() or cuda::pdl_wait() in its body, and
  2. no kernel under src/ is launched with <<<>>> (every launch goes through cuda::launch).
Prints each violation as FILE:LINE and exits 1 if there is one.
  python3 scripts/check_kernel_launches.py [SRC_DIR]   (default: the tree's src/)
  python3 scripts/check_kernel_launches.py --selftest  (the checker finds planted violations)
"""
import pathlib
import re
import sys
import tempfile

WAIT = re.compile(r"\bpdl_(enter|wait)\s*\(")


def strip_comments(text: str) -> str:
    """Comments blanked out (line numbers kept), so a <<<>>> or pdl_ call in a comment does not count."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def body_end(text: str, open_brace: int) -> int:
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def violations(src: pathlib.Path):
    for path in sorted(p for p in src.rglob("*") if p.suffix in (".cu", ".cuh")):
        text = strip_comments(path.read_text(encoding="utf-8"))
        line = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
        for m in re.finditer(r"__global__", text):
            brace = text.find("{", m.end())
            semi = text.find(";", m.end())
            if brace < 0 or (0 <= semi < brace):
                continue  # a declaration
            body = text[brace:body_end(text, brace)]
            if not WAIT.search(body):
                name = re.findall(r"(\w+)\s*\(", text[m.end():brace])
                yield f"{path}:{line(m.start())}: kernel {name[-1] if name else '?'} never calls cuda::pdl_enter()"
        for m in re.finditer(r"<<<", text):
            yield f"{path}:{line(m.start())}: a <<<>>> launch (use cuda::launch)"


def selftest() -> int:
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "good.cu").write_text("__global__ void a(int* x) {\n  cuda::pdl_enter();\n  x[0] = 1;\n}\n"
                                      "// k<<<1, 1>>>() in a comment\n")
        (root / "bad.cu").write_text("__global__ void __launch_bounds__(64) b(int* x) {\n  if (x) { x[0] = 2; }\n}\n"
                                     "void go(int* x) { b<<<1, 64, 0, 0>>>(x); }\n")
        found = list(violations(root))
    want = ["kernel b never calls", "a <<<>>> launch"]
    ok = len(found) == 2 and all(any(w in f for f in found) for w in want) and not any("good.cu" in f for f in found)
    print("selftest:", "ok" if ok else f"FAILED, found {found}")
    return 0 if ok else 1


def main() -> int:
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    src = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src"
    found = list(violations(src))
    for f in found:
        print(f)
    kernels = sum(strip_comments(p.read_text(encoding="utf-8")).count("__global__")
                  for p in src.rglob("*") if p.suffix in (".cu", ".cuh"))
    print(f"{kernels} kernels under {src}: {len(found)} violations")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
