"""Replay `tessera bench decode`'s requests on llama-server and print both side by side.

Input: the requests file of `tessera bench decode --prompts` (token ids of one free-text
stream, of the batched sweep's story prompts, and of the agent turns, with Tessera's reply
lengths) and Tessera's `--json` report. llama-server runs with `-np` = the most streams and
`-t THREADS`, greedy (temperature 0), prompts as token ids through `/completion`, streamed:
every token's arrival is stamped, and rates are computed exactly as Tessera's bench computes
them (decode: tokens after the first over the time since the first; batched: the aggregate
while every stream decodes). Then once more with llama-server's own n-gram speculation
(`--spec-type ngram-simple`) where the build has it, for the single stream and the agent turns.
"""

import argparse
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args, slots, extra):
        self.port = free_port()
        env = {"LD_LIBRARY_PATH": args.llama_bin}
        cmd = [f"{args.llama_bin}/llama-server", "-m", args.model, "-t", str(args.threads),
               "-np", str(slots), "-c", str(slots * 2048), "--host", "127.0.0.1",
               "--port", str(self.port), "--no-webui"] + extra
        self.log = open(f"{args.json}.server-{self.port}.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"llama-server exited at start (log: {self.log.name})")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        sys.exit("llama-server did not become healthy in 300 s")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()

    def complete(self, prompt, n_predict, ignore_eos):
        """Stream one completion; returns each token chunk's arrival time."""
        body = json.dumps({"prompt": prompt, "n_predict": n_predict, "temperature": 0.0, "top_k": 1,
                           "stream": True, "ignore_eos": ignore_eos, "cache_prompt": True,
                           "return_tokens": True}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", data=body,
                                         headers={"Content-Type": "application/json"})
        arrivals = []
        with urllib.request.urlopen(request, timeout=3600) as response:
            for line in response:
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                event = json.loads(line[6:])
                now = time.monotonic()
                count = len(event.get("tokens") or []) or (1 if event.get("content") else 0)
                arrivals.extend([now] * count)
                if event.get("stop"):
                    break
        return arrivals


def decode_rate(arrivals):
    if len(arrivals) < 2 or arrivals[-1] <= arrivals[0]:
        return 0.0
    return (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])


def aggregate_rate(timelines):
    timelines = [t for t in timelines if t]
    if not timelines:
        return 0.0
    start, end = max(t[0] for t in timelines), min(t[-1] for t in timelines)
    if end <= start:
        return 0.0
    inside = sum(sum(1 for x in t if start < x <= end) for t in timelines)
    return inside / (end - start)


def together(server, prompts, n_predict, ignore_eos=True):
    results = [None] * len(prompts)

    def run(i):
        results[i] = server.complete(prompts[i], n_predict, ignore_eos)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def replay(server, requests, batched):
    single = requests["single"]
    out = {"single": decode_rate(server.complete(single["prompt"], single["max_tokens"], True))}
    if batched:
        stories, n = requests["stories"], requests["tokens_per_stream"]
        out["batched"] = [{"streams": s, "aggregate_tok_s": aggregate_rate(together(server, stories[:s], n))}
                          for s in requests["streams"]]
    out["agent"] = []
    for turn in requests["agent"]:
        arrivals = server.complete(turn["prompt"], turn["tokens"], False)
        out["agent"].append({"turn": turn["name"], "tokens": len(arrivals), "decode_tok_s": decode_rate(arrivals)})
    return out


def has_ngram_speculation(llama_bin):
    help_text = subprocess.run([f"{llama_bin}/llama-server", "--help"], capture_output=True, text=True,
                               env={"LD_LIBRARY_PATH": llama_bin}).stdout
    return "ngram-simple" in help_text


def main():
    parser = argparse.ArgumentParser()
    for name in ["--llama-bin", "--model", "--requests", "--tessera", "--json"]:
        parser.add_argument(name, required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    requests = json.load(open(args.requests))
    tessera = json.load(open(args.tessera))
    slots = max(requests["streams"])
    results = {}
    server = Server(args, slots, [])
    try:
        results["plain"] = replay(server, requests, batched=True)
    finally:
        server.stop()
    if has_ngram_speculation(args.llama_bin):
        server = Server(args, 1, ["--spec-type", "ngram-simple"])
        try:
            results["ngram"] = replay(server, requests, batched=False)
        finally:
            server.stop()
    json.dump(results, open(args.json, "w"), indent=2)
    print_side_by_side(tessera, results)


def print_side_by_side(tessera, llama):
    settings = {s["setting"]: s for s in tessera["settings"]}
    spec, plain = settings.get("speculation"), settings.get("plain")
    ngram = llama.get("ngram")
    print("\ndecode tok/s, same GGUF, same machine, one run")
    print(f"{'':>22}{'Tessera spec':>14}{'Tessera plain':>15}{'llama-server':>14}{'llama ngram':>13}{'ratio':>8}")
    single = [spec["single"]["decode_tok_s"], plain["single"]["decode_tok_s"], llama["plain"]["single"],
              ngram["single"] if ngram else float("nan")]
    print(f"{'one stream':>22}{single[0]:>14.2f}{single[1]:>15.2f}{single[2]:>14.2f}{single[3]:>13.2f}"
          f"{single[0] / max(single[2], 1e-9):>8.2f}")
    for i, row in enumerate(llama["plain"].get("batched", [])):
        ours = spec["batched"][i]["aggregate_tok_s"]
        ours_plain = plain["batched"][i]["aggregate_tok_s"]
        print(f"{str(row['streams']) + ' streams (aggregate)':>22}{ours:>14.2f}{ours_plain:>15.2f}"
              f"{row['aggregate_tok_s']:>14.2f}{'':>13}{ours / max(row['aggregate_tok_s'], 1e-9):>8.2f}")
    for i, row in enumerate(llama["plain"]["agent"]):
        ours = spec["agent"][i]["result"]["decode_tok_s"]
        ours_plain = plain["agent"][i]["result"]["decode_tok_s"]
        theirs_ngram = ngram["agent"][i]["decode_tok_s"] if ngram else float("nan")
        print(f"{'agent ' + row['turn']:>22}{ours:>14.2f}{ours_plain:>15.2f}{row['decode_tok_s']:>14.2f}"
              f"{theirs_ngram:>13.2f}{ours / max(row['decode_tok_s'], 1e-9):>8.2f}")
    print("ratio = Tessera with speculation / llama-server plain. llama-server's agent replies are its own "
          "(unconstrained, as many tokens as Tessera's at most).")


if __name__ == "__main__":
    main()
