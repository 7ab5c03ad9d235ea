#!/usr/bin/env python3
"""llama.cpp's forward of k tokens at a fixed context, beside Tessera's
`cargo bench --bench forward -- forward_rows` (issue 34 item 1): what a
forward over k rows costs against one row, on the same GGUF and machine.

One sequence: the context is evaluated once, then each measurement rewinds
to it and evaluates k more tokens in one batch (llama.cpp computes logits
for the last token only, which favours it over Tessera's `tokens_k` rows,
whose logits cover every row). Prints the median of REPS per k and the
ratio to the first k (1 by default).

Run with the llama-cpp-python that scripts/bench-vs-llamacpp.sh builds:

    PYTHONPATH=$TESSERA_CACHE/llama-cpp-python python3 scripts/forward_rows_llamacpp.py \\
        models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf
"""

import argparse
import statistics
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="the GGUF file")
    parser.add_argument("--context", type=int, default=256, help="tokens before the k rows (default 256)")
    parser.add_argument("--rows", default="1,2,4,8,16", help="comma-separated k (default 1,2,4,8,16)")
    parser.add_argument("--reps", type=int, default=12, help="measurements per k (default 12)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    args = parser.parse_args()
    try:
        from llama_cpp import Llama
    except ImportError:
        print("error: llama_cpp is not importable; set PYTHONPATH to the llama-cpp-python "
              "that scripts/bench-vs-llamacpp.sh builds", file=sys.stderr)
        return 2
    rows = [int(k) for k in args.rows.split(",")]
    llm = Llama(model_path=args.model, n_ctx=args.context + max(rows) + 16, n_threads=args.threads,
                n_threads_batch=args.threads, n_batch=512, n_ubatch=512, verbose=False)
    text = "The quick brown fox jumps over the lazy dog while the committee reviews the report. "
    tokens = llm.tokenize((text * (args.context // 10 + max(rows))).encode())[: args.context + max(rows)]
    if len(tokens) < args.context + max(rows):
        print("error: the prompt tokenized too short", file=sys.stderr)
        return 1
    llm.eval(tokens[: args.context])
    first = None
    for k in rows:
        times = []
        for _ in range(args.reps):
            llm.n_tokens = args.context
            start = time.perf_counter()
            llm.eval(tokens[args.context : args.context + k])
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        first = first or median
        print(f"k={k:<3} {median * 1000:8.1f} ms  {median / first:5.2f}x k={rows[0]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
