#!/usr/bin/env python3
"""Load run against `diffgemma serve`: N concurrent streaming chat clients on loopback.

Each client sends one streamed POST /v1/chat/completions (a prompt of about --prompt-tokens common words drawn at
random, that starts with the run's own salt, so no run reuses another's cached prefix; --max-tokens answer tokens, usage included) and reads the server-sent events to [DONE]. Every answer must be well-formed: HTTP
200, every event a JSON chat.completion.chunk of the request's id, one finish_reason, a usage chunk whose
completion_tokens counts the answer, then [DONE]. Prints one JSON line: aggregate committed tok/s (all completion
tokens over the wall time from the first request to the last [DONE]), the time to the first content per client (p50,
p99, max), and how many answers were well-formed (the exit status is 1 unless all were). Standard library only.

  python3 scripts/serve_load.py --port 8080 --streams 32 --prompt-tokens 1024 --max-tokens 512
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time


# Common words, one token each in Gemma's vocabulary (and the marker tokenizer's). A prompt draws them at random:
# one word repeated would send every prompt row of a random-weights model to the same few experts, a skewed MoE
# prefill (about 20 ms more at 4k tokens on the H200) that real prompts do not make.
WORDS = ("the river runs past old stone walls where people walk each day and talk about time work home city water "
         "light night world life hand part place case week company system program question government number "
         "point group problem fact year way thing man woman child story money month lot right study book eye job "
         "word business issue side kind head house service friend father power hour game line end member law car "
         "name president team minute idea body information back parent face others level office door health "
         "person art war history party result change morning reason research girl guy moment air teacher force "
         "education").split()


def one_client(a: argparse.Namespace, index: int, start: threading.Event, out: list) -> None:
    rng = random.Random(f"{a.salt} {index}")
    words = " ".join(rng.choice(WORDS) for _ in range(max(1, a.prompt_tokens - 16)))  # the chat turn adds markers
    # The run's salt first: no prompt shares a prefix with another run's (the server reuses a tenant's KV cache).
    content = f"{a.salt} {index}: {words}"
    body = {"model": a.model, "messages": [{"role": "user", "content": content}], "stream": True,
            "max_tokens": a.max_tokens, "stream_options": {"include_usage": True}}
    if a.steps:
        body["steps"] = a.steps
    if a.sampler:
        body["sampler"] = a.sampler
    r = {"client": index, "ok": False, "ttft_s": None, "tokens": 0, "error": ""}
    start.wait()
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(a.host, a.port, timeout=a.timeout)
        c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            r["error"] = f"HTTP {resp.status}: {resp.read(300)!r}"
            out[index] = r
            return
        ids, finishes, usage, done, text = set(), 0, None, False, []
        for raw in resp:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if chunk.get("object") != "chat.completion.chunk":
                raise ValueError(f"not a chat.completion.chunk: {data[:200]}")
            ids.add(chunk.get("id"))
            if chunk.get("usage"):
                usage = chunk["usage"]
            for ch in chunk.get("choices", []):
                piece = ch.get("delta", {}).get("content")
                if piece and r["ttft_s"] is None:
                    r["ttft_s"] = time.monotonic() - t0
                if piece:
                    text.append(piece)
                if ch.get("finish_reason"):
                    finishes += 1
        r["seconds"] = time.monotonic() - t0
        r["tokens"] = usage["completion_tokens"] if usage else 0
        problems = [p for p, bad in [("no [DONE]", not done), ("chunk ids differ", len(ids) != 1),
                                     (f"{finishes} finish reasons", finishes != 1), ("no usage", usage is None),
                                     ("no tokens", r["tokens"] <= 0)] if bad]
        r["error"] = ", ".join(problems)
        r["ok"] = not problems
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        r["error"] = f"{type(e).__name__}: {e}"
    out[index] = r


def percentile(xs: list, q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", default="", help="the request's model field (the server answers for its one model)")
    ap.add_argument("--streams", type=int, default=32, help="concurrent clients, all started at once")
    ap.add_argument("--prompt-tokens", type=int, default=1024, help="about this many prompt tokens per request")
    ap.add_argument("--max-tokens", type=int, default=512, help="answer tokens per request")
    ap.add_argument("--steps", type=int, default=0, help="denoise steps per block (0: the server's default)")
    ap.add_argument("--sampler", default="", choices=["", "contract", "reference"],
                    help="the request's sampler profile (\"\": the server's default); random weights: reference, "
                         "whose blocks run their steps without the contract's early stops and trims")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a client waits on its socket")
    ap.add_argument("--label", default="", help="free text in the JSON line")
    a = ap.parse_args()
    if a.streams < 1 or a.max_tokens < 1 or a.prompt_tokens < 1:
        ap.error("--streams, --max-tokens and --prompt-tokens must be positive")
    a.salt = f"run {time.time_ns() % 1_000_000_007}"
    out = [None] * a.streams
    start = threading.Event()
    threads = [threading.Thread(target=one_client, args=(a, i, start, out)) for i in range(a.streams)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    start.set()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    ok = [r for r in out if r and r["ok"]]
    ttft = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
    tokens = sum(r["tokens"] for r in ok)
    line = {"event": "serve_load", "label": a.label, "streams": a.streams, "prompt_tokens": a.prompt_tokens,
            "max_tokens": a.max_tokens, "steps": a.steps, "sampler": a.sampler, "well_formed": len(ok), "wall_s": wall,
            "completion_tokens": tokens, "aggregate_tok_per_s": tokens / wall if wall > 0 else 0.0,
            "first_content_p50_s": percentile(ttft, 0.5), "first_content_p99_s": percentile(ttft, 0.99),
            "first_content_max_s": max(ttft) if ttft else float("nan"),
            "errors": sorted({r["error"] for r in out if r and not r["ok"]})[:5]}
    print(json.dumps(line))
    return 0 if len(ok) == a.streams else 1


if __name__ == "__main__":
    sys.exit(main())
