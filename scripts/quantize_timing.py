#!/usr/bin/env python3
"""Times `diffgemma quantize` on a full-shape checkpoint slice (no 50 GB download, no torch).

Writes a DiffusionGemma checkpoint of the 26B-A4B shapes (or --config's) with `--layers` layers with
dg_write_checkpoint (synthetic bf16 weights, the tensors and 5 GB shards save_pretrained writes), then runs `diffgemma quantize` on it
for each profile, checks that `diffgemma info` describes the pack, deletes the pack, and reports JSON lines:
seconds, the source bytes quantize streams, MB/s and the peak RSS of the quantize process (wait4's ru_maxrss, what
/usr/bin/time -v reports). The 30-layer estimate is by source bytes: the slice's seconds times the full model's
text bytes over the slice's (the full model's bytes from `dg_write_checkpoint --dry-run 1`); quantize's time is
linear in the bytes it streams, with one fixed cost (opening the shards) that this charges as if it scaled.
`--cache cold` evicts the checkpoint's pages from the page cache before each run (posix_fadvise DONTNEED on its
files only), so the run reads the disk; `warm` (the default) leaves the just-written files cached.

Usage: python3 scripts/quantize_timing.py --cli build/cpu/diffgemma --writer build/cpu/dg_write_checkpoint \\
           --dir /work/qt-data --layers 4 --machine "2-core CI-class x86 VM" --out bench/results/X.jsonl
"""
import argparse
import json
import os
import shutil
import subprocess
import time

def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def git_sha():
    if os.environ.get("DG_GIT_SHA"):  # the GPU machine's tree has no .git (scripts/device_cuda.sh)
        return os.environ["DG_GIT_SHA"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def evict(path):
    for r, _, fs in os.walk(path):
        for f in fs:
            fd = os.open(os.path.join(r, f), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def writer_summary(writer, args):
    out = subprocess.run([writer] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{writer} {' '.join(args)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_pack(args, pack, profile, emit):
    """quantize -> pack -> generate: the pack through `diffgemma bench -m PACK` on --bench-backend."""
    cmd = [args.cli, "bench", "-m", pack, "--backend", args.bench_backend, "--prefill", "512", "--context", "1024",
           "--denoise-steps", "3", "--steps", "16", "--prompt-tokens", "512", "--gen-tokens", "256",
           "--label", f"pack-{profile}-{args.layers}-layer-slice", "--out", args.bench_out or args.out]
    t = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    emit(event="pack_bench", profile=profile, backend=args.bench_backend, ok=proc.returncode == 0,
         seconds=round(time.time() - t, 1), error=proc.stderr[-400:] if proc.returncode else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="the diffgemma binary")
    ap.add_argument("--writer", required=True, help="the dg_write_checkpoint binary")
    ap.add_argument("--dir", default="/tmp/dg-slice", help="scratch directory (removed first and at the end)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--config", default="", help="another config.json (default: the writer's built-in 26B-A4B)")
    ap.add_argument("--profiles", default="q4,fp8,nvfp4")
    ap.add_argument("--cache", default="warm", choices=["warm", "cold"])
    ap.add_argument("--machine", default="", help="a label for the machine")
    ap.add_argument("--keep", action="store_true", help="keep the checkpoint (and reuse one already there)")
    ap.add_argument("--out", default="")
    ap.add_argument("--bench-backend", default="", choices=["", "cpu", "cuda"],
                    help="also run each pack end to end on this backend before deleting it: `diffgemma bench -m PACK` "
                         "(prefill, denoise steps at 1k context, a 512-in / 256-out generation), lines to --bench-out")
    ap.add_argument("--bench-out", default="", help="where the bench lines go (default: --out)")
    args = ap.parse_args()

    common = dict(git_sha=git_sha(), machine=args.machine, cpu_model=cpu_model(), cpus=os.cpu_count(),
                  layers=args.layers)

    def emit(**row):
        line = json.dumps(dict(common, **row), sort_keys=True)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")

    src = os.path.join(args.dir, "hf")
    cfg = ["--config", args.config] if args.config else []
    full = writer_summary(args.writer, cfg + ["--dry-run", "1", "--out", src])
    if not (args.keep and os.path.exists(os.path.join(src, "config.json"))):
        shutil.rmtree(args.dir, ignore_errors=True)
        t0 = time.time()
        part = writer_summary(args.writer, cfg + ["--layers", str(args.layers), "--out", src])
        emit(event="checkpoint", seconds=time.time() - t0, checkpoint_bytes=part["bytes"],
             source_bytes=part["text_bytes"], files=part["files"])
    part = writer_summary(args.writer, cfg + ["--layers", str(args.layers), "--dry-run", "1", "--out", src])
    src_bytes = part["text_bytes"]

    for profile in args.profiles.split(","):
        pack = os.path.join(args.dir, "pack-" + profile)
        if args.cache == "cold":
            evict(src)
        load = os.getloadavg()[0]  # other work on the machine slows the run: recorded beside it
        t = time.time()
        proc = subprocess.Popen([args.cli, "quantize", "-q", "-m", src, "-o", pack, "--profile", profile],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = proc.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.time() - t
        ok = status == 0
        info = subprocess.run([args.cli, "info", "-m", pack, "--json"], capture_output=True, text=True) if ok else None
        info_ok = bool(info and info.returncode == 0 and json.loads(info.stdout)["pack"]["profile"] == profile)
        emit(event="quantize", profile=profile, page_cache=args.cache, ok=ok, error=err[-400:] if not ok else "",
             seconds=round(seconds, 2), source_bytes=src_bytes, pack_bytes=dir_bytes(pack) if ok else 0,
             mb_per_s=round(src_bytes / seconds / 1e6, 1), cpu_seconds=round(usage.ru_utime + usage.ru_stime, 1), peak_rss_mb=round(usage.ru_maxrss / 1024.0, 1),
             info_ok=info_ok, load_avg_1m_before=round(load, 2), full_source_bytes=full["text_bytes"],
             extrapolated_full_seconds=round(seconds * full["text_bytes"] / src_bytes, 1),
             method="by source bytes: seconds * full text bytes / slice text bytes")
        if ok and args.bench_backend:
            run_pack(args, pack, profile, emit)
        shutil.rmtree(pack, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
