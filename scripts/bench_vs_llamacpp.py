"""Tessera vs llama.cpp (llama-cpp-python), same GGUF, same machine, one run.

Called by scripts/bench-vs-llamacpp.sh, which builds both and sets the
environment: TESSERA_BIN, MODEL, THREADS, RUNS, PREFILL_TOKENS (a comma list),
DECODE_TOKENS, DECODE_CONTEXT. Runs alternate between the engines so that
machine noise hits both alike; prints medians, tokens/s and the ratio
Tessera / llama.cpp for prefill at each size and decode at a short context and
at DECODE_CONTEXT tokens, then decode as a fraction of the bandwidth limit:
the memory read bandwidth (`tessera bench memory --model`, measured every run
on the same threads) divided by the bytes of weights read per token, which the
same command gives from the GGUF (every matrix; the embedding only where it is
also the LM head). That is what llama.cpp reads, and what Tessera reads: its
repacked weights keep GGML's bytes.
"""
import json
import os
import platform
import statistics
import subprocess
import time

import llama_cpp

TESSERA = os.environ["TESSERA_BIN"]
MODEL = os.environ["MODEL"]
THREADS = int(os.environ.get("THREADS", "2"))
RUNS = int(os.environ.get("RUNS", "5"))
PREFILL_TOKENS = [int(n) for n in os.environ.get("PREFILL_TOKENS", "512,2048").split(",")]
DECODE_TOKENS = int(os.environ.get("DECODE_TOKENS", "128"))
if DECODE_TOKENS < 1:
    raise SystemExit("DECODE_TOKENS must be at least 1")
DECODE_CONTEXT = int(os.environ.get("DECODE_CONTEXT", "2048"))

SENTENCE = "The quick brown fox jumps over the lazy dog while the committee reviews chapter {} of the report. "
SHORT_PROMPT = "Write a long story about a lighthouse keeper."


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def make_prompt(llm, n_tokens):
    """Text that tokenizes to about n_tokens tokens (both engines share the vocabulary)."""
    text, i = "", 0
    while len(llm.tokenize(text.encode(), add_bos=False, special=False)) < n_tokens:
        text += SENTENCE.format(i)
        i += 1
    tokens = llm.tokenize(text.encode(), add_bos=False, special=False)[:n_tokens]
    return llm.detokenize(tokens).decode("utf-8", "replace")


def tessera(prompt, max_tokens):
    # Plain decode, one token per forward, as llama-bench measures it: the repeated sentences
    # of these prompts would hand prompt lookup long drafts (`tessera bench decode` measures those).
    out = subprocess.run(
        [TESSERA, "--threads", str(THREADS), "generate", "--model", MODEL, "--max-tokens", str(max_tokens),
         "--ignore-eos", "--json-stats", "--prefill-chunk", "512", "--no-speculation", "--no-fast-forward"],
        input=prompt.encode(), capture_output=True, check=True)
    return json.loads(out.stderr.decode().strip().splitlines()[-1])


def bandwidth():
    """(read bandwidth in GB/s, bytes of weights a token reads), from `tessera bench memory`."""
    out = subprocess.run([TESSERA, "--threads", str(THREADS), "bench", "memory", "--json", "--model", MODEL],
                         capture_output=True, check=True)
    line = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return line["best_gb_s"], line["weight_bytes_per_token"]


def llama_run(llm, tokens, steps):
    """Prefill `tokens` (timed), then `steps` single-token decodes (timed): (prefill tok/s, decode tok/s)."""
    llm.reset()
    start = time.perf_counter()
    llm.eval(tokens)
    prefill = len(tokens) / (time.perf_counter() - start)
    token = tokens[-1]
    start = time.perf_counter()
    for _ in range(steps):
        llm.eval([token])
    return prefill, (steps / (time.perf_counter() - start) if steps else None)


def one_run(llm, prompts, results):
    """Both engines on every workload, alternating."""
    def record(key, tessera_value, llama_value):
        results.setdefault(("tessera",) + key, []).append(tessera_value)
        results.setdefault(("llama",) + key, []).append(llama_value)

    for size, (prompt, tokens) in prompts.items():
        decode_here = size == DECODE_CONTEXT
        steps = DECODE_TOKENS if decode_here else 0
        stats = tessera(prompt, steps + 1)
        prefill, decode = llama_run(llm, tokens, steps)
        record(("prefill", size), stats["prompt_tokens"] / stats["prefill_s"], prefill)
        if decode_here:
            record(("decode", size), stats["decode_tokens"] / stats["decode_s"], decode)
    short_tokens = llm.tokenize(SHORT_PROMPT.encode(), add_bos=False, special=False)
    stats = tessera(SHORT_PROMPT, DECODE_TOKENS + 1)
    record(("decode", len(short_tokens)), stats["decode_tokens"] / stats["decode_s"],
           llama_run(llm, short_tokens, DECODE_TOKENS)[1])
    gb_s, weights = bandwidth()
    results.setdefault(("bandwidth",), []).append(gb_s)
    results.setdefault(("weights",), []).append(weights)


def main():
    sizes = sorted(set(PREFILL_TOKENS + [DECODE_CONTEXT]))
    llm = llama_cpp.Llama(model_path=MODEL, n_ctx=max(sizes) + DECODE_TOKENS + 64, n_batch=512, n_ubatch=512,
                          n_threads=THREADS, n_threads_batch=THREADS, verbose=False)
    prompts = {}
    for size in sizes:
        text = make_prompt(llm, size)
        prompts[size] = (text, llm.tokenize(text.encode(), add_bos=False, special=False))
    results = {}
    tessera(SHORT_PROMPT, 4)  # warm the page cache and the binary
    llama_run(llm, prompts[sizes[0]][1][:16], 0)
    for run in range(RUNS):
        one_run(llm, prompts, results)
        print(f"run {run + 1}/{RUNS} done", flush=True)
    med = {key: statistics.median(values) for key, values in results.items()}
    bandwidth = med[("bandwidth",)]
    weights = med[("weights",)]
    limit = bandwidth * 1e9 / weights
    print()
    print(f"date: {time.strftime('%Y-%m-%d')}  cpu: {cpu_model()}  threads: {THREADS}  runs: {RUNS}")
    print(f"model: {os.path.basename(MODEL)}  llama-cpp-python {llama_cpp.__version__}")
    print()
    print("| phase | tokens | Tessera tok/s | llama.cpp tok/s | ratio |")
    print("|---|---|---|---|---|")
    for size in PREFILL_TOKENS:
        ours, theirs = med[("tessera", "prefill", size)], med[("llama", "prefill", size)]
        print(f"| prefill | {len(prompts[size][1])} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f}× |")
    decode_keys = sorted(key[2] for key in med if key[:2] == ("tessera", "decode"))
    for context in decode_keys:
        ours, theirs = med[("tessera", "decode", context)], med[("llama", "decode", context)]
        print(f"| decode {DECODE_TOKENS} at context {context} | {DECODE_TOKENS} | {ours:.1f} | {theirs:.1f} | "
              f"{ours / theirs:.2f}× |")
    print()
    print(f"memory read bandwidth ({THREADS} threads, median of {RUNS}): {bandwidth:.1f} GB/s; weights read per "
          f"token: {weights / 1e6:.1f} MB; decode limit: {limit:.1f} tok/s")
    for context in decode_keys:
        ours, theirs = med[("tessera", "decode", context)], med[("llama", "decode", context)]
        print(f"decode at context {context}: Tessera {100 * ours / limit:.0f}% of the limit, "
              f"llama.cpp {100 * theirs / limit:.0f}%")


if __name__ == "__main__":
    main()
