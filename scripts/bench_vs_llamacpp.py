"""Tessera vs llama.cpp (llama-cpp-python), same GGUF, same machine, one run.

Called by scripts/bench-vs-llamacpp.sh, which builds both and sets the
environment: TESSERA_BIN, MODEL, THREADS, RUNS, PROMPT_TOKENS, DECODE_TOKENS.
Runs alternate between the engines so that machine noise hits both alike;
prints medians, tokens/s and the ratio Tessera / llama.cpp.
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
PROMPT_TOKENS = int(os.environ.get("PROMPT_TOKENS", "512"))
DECODE_TOKENS = int(os.environ.get("DECODE_TOKENS", "128"))

SENTENCE = "The quick brown fox jumps over the lazy dog while the committee reviews chapter {} of the report. "


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
    out = subprocess.run(
        [TESSERA, "--threads", str(THREADS), "generate", "--model", MODEL, "--max-tokens", str(max_tokens),
         "--ignore-eos", "--json-stats", "--prefill-chunk", "512"],
        input=prompt.encode(), capture_output=True, check=True)
    stats = json.loads(out.stderr.decode().strip().splitlines()[-1])
    return stats


def llama_prefill(llm, tokens):
    llm.reset()
    start = time.perf_counter()
    llm.eval(tokens)
    return len(tokens) / (time.perf_counter() - start)


def llama_decode(llm, tokens, steps):
    llm.reset()
    llm.eval(tokens)
    token = tokens[-1]
    start = time.perf_counter()
    for _ in range(steps):
        llm.eval([token])
    return steps / (time.perf_counter() - start)


def main():
    llm = llama_cpp.Llama(model_path=MODEL, n_ctx=PROMPT_TOKENS + DECODE_TOKENS + 64, n_batch=512, n_ubatch=512,
                          n_threads=THREADS, n_threads_batch=THREADS, verbose=False)
    long_prompt = make_prompt(llm, PROMPT_TOKENS)
    short_prompt = "Write a long story about a lighthouse keeper."
    short_tokens = llm.tokenize(short_prompt.encode(), add_bos=False, special=False)
    long_tokens = llm.tokenize(long_prompt.encode(), add_bos=False, special=False)
    results = {"tessera_prefill": [], "llama_prefill": [], "tessera_decode": [], "llama_decode": []}
    tessera(short_prompt, 4)  # warm the page cache and the binary
    llama_prefill(llm, short_tokens)
    for run in range(RUNS):
        stats = tessera(long_prompt, 1)
        results["tessera_prefill"].append(stats["prompt_tokens"] / stats["prefill_s"])
        results["llama_prefill"].append(llama_prefill(llm, long_tokens))
        stats = tessera(short_prompt, DECODE_TOKENS + 1)
        results["tessera_decode"].append(stats["decode_steps"] / stats["decode_s"])
        results["llama_decode"].append(llama_decode(llm, short_tokens, DECODE_TOKENS))
        print(f"run {run + 1}/{RUNS}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in results.items()), flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print()
    print(f"date: {time.strftime('%Y-%m-%d')}  cpu: {cpu_model()}  threads: {THREADS}  runs: {RUNS}")
    print(f"model: {os.path.basename(MODEL)}  llama-cpp-python {llama_cpp.__version__}")
    print()
    print("| phase | tokens | Tessera tok/s | llama.cpp tok/s | ratio |")
    print("|---|---|---|---|---|")
    print(f"| prefill | {len(long_tokens)} | {med['tessera_prefill']:.1f} | {med['llama_prefill']:.1f} | "
          f"{med['tessera_prefill'] / med['llama_prefill']:.2f}× |")
    print(f"| decode | {DECODE_TOKENS} | {med['tessera_decode']:.1f} | {med['llama_decode']:.1f} | "
          f"{med['tessera_decode'] / med['llama_decode']:.2f}× |")


if __name__ == "__main__":
    main()
