#!/usr/bin/env python3
"""How soon a batch under --jobs starts, and how many worktrees it holds.

Makes N read-only tasks (commit: false) in a fresh git repository, serves
an OpenAI-style model on localhost that answers every request after a
short delay, runs `ybs run --jobs J` against it, and reports:

- the time from the process's start to the first model request (the
  first task's start);
- the peak number of worktrees on disk (counted at every request and
  sampled every 5 ms);
- the whole run's wall time.

Usage: tools/bench/batch-start.py [--ybs target/debug/ybs] [--jobs 20]
       [--delay 0.05] N [N ...]
"""

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def sse_answer():
    chunks = [
        {"id": "c", "choices": [{"index": 0, "delta": {"content": "looks fine"}, "finish_reason": None}]},
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "c", "choices": [], "usage": {"prompt_tokens": 130, "completion_tokens": 5, "total_tokens": 135}},
    ]
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return body.encode()


def worktrees(root):
    base = os.path.join(root, ".ybs-worktrees")
    count = 0
    if os.path.isdir(base):
        for run in os.listdir(base):
            path = os.path.join(base, run)
            if os.path.isdir(path):
                count += len(os.listdir(path))
    return count


def one(ybs, tasks, jobs, delay):
    root = tempfile.mkdtemp(prefix="ybs-batch-start-")
    git = lambda *args: subprocess.run(["git", "-C", root, *args], check=True, capture_output=True)
    os.makedirs(os.path.join(root, "src"))
    with open(os.path.join(root, "src", "lib.rs"), "w") as f:
        f.write("pub fn f() {}\n")
    with open(os.path.join(root, "t.yaml"), "w") as f:
        f.write("defaults:\n  model: m\n  policy:\n    default: allow\ntasks:\n")
        for n in range(tasks):
            f.write(f"  - id: r{n:04}\n    prompt: review\n    commit: false\n")
    git("init", "-q")
    git("-c", "user.name=b", "-c", "user.email=b@example.com", "add", ".")
    git("-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-qm", "start")
    state = {"first": None, "peak": 0, "requests": 0}
    lock = threading.Lock()
    answer = sse_answer()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                state["requests"] += 1
                if state["first"] is None:
                    state["first"] = time.monotonic()
                state["peak"] = max(state["peak"], worktrees(root))
            time.sleep(delay)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1"
    env = dict(os.environ, OPENAI_API_KEY="bench")
    began = time.monotonic()
    child = subprocess.Popen(
        [ybs, "run", "t.yaml", "--jobs", str(jobs), "--provider", "openai",
         "--endpoint", endpoint, "--model", "m", "--quiet"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    peak = 0
    while child.poll() is None:
        peak = max(peak, worktrees(root))
        time.sleep(0.005)
    took = time.monotonic() - began
    server.shutdown()
    stderr = child.stderr.read().decode(errors="replace")
    if child.returncode != 0:
        sys.exit(f"ybs exited {child.returncode} for {tasks} tasks:\n{stderr[-2000:]}")
    first = state["first"] - began if state["first"] else float("nan")
    subprocess.run(["rm", "-rf", root], check=False)
    return first, max(peak, state["peak"]), took, state["requests"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ybs", default="target/debug/ybs")
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("tasks", type=int, nargs="+")
    args = parser.parse_args()
    ybs = os.path.abspath(args.ybs)
    print("| tasks | --jobs | first task starts | peak worktrees | whole run |")
    print("|---:|---:|---:|---:|---:|")
    for tasks in args.tasks:
        first, peak, took, requests = one(ybs, tasks, args.jobs, args.delay)
        assert requests == tasks, f"{requests} requests for {tasks} tasks"
        print(f"| {tasks} | {args.jobs} | {first:.2f} s | {peak} | {took:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
