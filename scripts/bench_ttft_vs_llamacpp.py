"""Replay Tessera's TTFT requests on llama.cpp and print both side by side.

Input: the requests file of `tessera bench ttft --prompts` (token ids, whether the
cache was cleared or the engine restarted before the request, whether it was timed,
and Tessera's own TTFT). llama.cpp keeps one context and reuses the longest common
prefix with the previous request (what llama-cpp-python's generate() does); a cold
request, or one after a restart, resets it first. Untimed requests (an assistant
reply put into the cache, as decoding it would) run on both engines but are not
reported. TTFT = time until generate() yields its first token.
"""
import json
import os
import statistics
import sys
import time

import llama_cpp


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main():
    requests = json.load(open(sys.argv[1]))
    threads = int(os.environ.get("THREADS", "2"))
    longest = max(len(r["tokens"]) for r in requests)
    llm = llama_cpp.Llama(model_path=os.environ["MODEL"], n_ctx=longest + 64, n_batch=512, n_ubatch=512,
                          n_threads=threads, n_threads_batch=threads, verbose=False)
    previous = []
    rows = []
    for r in requests:
        tokens = r["tokens"]
        if r["cold"] or r.get("restart"):
            llm.reset()
            previous = []
        reused = common_prefix(previous, tokens[:-1])
        start = time.perf_counter()
        for _ in llm.generate(tokens, top_k=1, temp=0.0, reset=True):
            break
        ttft = (time.perf_counter() - start) * 1e3
        previous = list(tokens)
        if not r.get("timed", True):
            continue
        rows.append((r, ttft, reused))
        print(f"  {r['workload']:>12} {r['label']:>20}: llama.cpp {ttft:9.1f} ms", file=sys.stderr, flush=True)

    print(f"\nTTFT, Tessera vs llama.cpp (llama-cpp-python {llama_cpp.__version__}, {threads} threads), one run")
    print(f"| workload | request | prompt | Tessera cached | Tessera ms | llama.cpp cached | llama.cpp ms | llama.cpp / Tessera |")
    print("|---|---|---|---|---|---|---|---|")
    for r, ttft, reused in rows:
        ratio = ttft / max(r["tessera_ttft_ms"], 1e-9)
        print(f"| {r['workload']} | {r['label']} | {len(r['tokens'])} | {r['tessera_cached_tokens']} | "
              f"{r['tessera_ttft_ms']:.0f} | {reused} | {ttft:.0f} | {ratio:.2f}× |")
    inter = [(r["tessera_ttft_ms"], t) for r, t, _ in rows if r["workload"] == "interleaved"]
    if inter:
        ours = statistics.median(x for x, _ in inter)
        theirs = statistics.median(y for _, y in inter)
        print(f"\ninterleaved sessions, median TTFT: Tessera {ours:.0f} ms, llama.cpp {theirs:.0f} ms, "
              f"llama.cpp / Tessera = {theirs / ours:.2f}×")
    warm = [(r["label"], r["tessera_ttft_ms"], t) for r, t, _ in rows if r["workload"] == "prefix_sweep"]
    for label, ours, theirs in warm:
        if label.endswith("warm"):
            print(f"prefix {label}: Tessera {ours:.0f} ms, llama.cpp {theirs:.0f} ms, "
                  f"llama.cpp / Tessera = {theirs / ours:.2f}×")
    replay = [(r, t) for r, t, _ in rows if r["workload"] == "agent_replay"][1:]
    if replay:
        ours = sum(r["tessera_cached_tokens"] for r, _ in replay) / sum(len(r["tokens"]) for r, _ in replay)
        print(f"agent replay from turn 2: Tessera hit rate {100 * ours:.1f}%, median TTFT Tessera "
              f"{statistics.median(r['tessera_ttft_ms'] for r, _ in replay):.0f} ms, llama.cpp "
              f"{statistics.median(t for _, t in replay):.0f} ms")


if __name__ == "__main__":
    main()
