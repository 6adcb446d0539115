#!/usr/bin/env python3
"""Eight simulated machines on this one (docs/performance.md, "Shards").

Each machine is one `ybs run --shard auto` process with its CI engine's
variables (GitLab from 1, CircleCI, Buildkite, a Kubernetes Indexed Job
with `--shard auto/8`, YBS_SHARD_* from 0), all at once, against a local
model server that answers each task after a delay drawn for that task
from a log-normal distribution (a few long tasks, many short ones). The
task's prompt names its delay; the server sleeps that long, then answers
"done".

Runs, in one scratch directory:
  1. one unsharded run of every task (`single`): the statuses to compare
     with, and the durations.json the duration split reads;
  2. eight machines split by hashing (the default), then `report merge`;
  3. eight machines split by `--shard-by durations --durations
     single/durations.json`, then `report merge`.

Checks, for 2 and 3: every task ran on exactly one machine, and the
merged set of (task id, status) equals the single run's. Prints, for
each split, the longest and the mean machine (wall time of its process,
and the sum of its tasks' durations) and the longest single task.

Usage: python3 tools/bench/shard-sim.py [--ybs PATH] [--tasks N]
       [--median-ms MS] [--sigma S] [--seed N] [--keep]
Exit 0 when every check held, 1 when one did not.
"""

import argparse
import http.server
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SHARDS = 8
ENGINE_VARIABLES = [
    "CI_NODE_INDEX", "CI_NODE_TOTAL", "CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL",
    "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT",
    "JOB_COMPLETION_INDEX", "YBS_SHARD_INDEX", "YBS_SHARD_TOTAL",
]

SHORT = {"GitLab CI": "GitLab", "a Kubernetes Indexed Job": "Kubernetes"}


def machine(k):
    """Machine k (1..8): its engine's variables and its --shard value."""
    if k <= 2:
        return "GitLab CI", {"CI_NODE_INDEX": k, "CI_NODE_TOTAL": SHARDS}, "auto"
    if k <= 4:
        return "CircleCI", {"CIRCLE_NODE_INDEX": k - 1, "CIRCLE_NODE_TOTAL": SHARDS}, "auto"
    if k <= 6:
        return ("Buildkite", {"BUILDKITE_PARALLEL_JOB": k - 1,
                              "BUILDKITE_PARALLEL_JOB_COUNT": SHARDS}, "auto")
    if k == 7:
        return "a Kubernetes Indexed Job", {"JOB_COMPLETION_INDEX": k - 1}, "auto/%d" % SHARDS
    return "ybs", {"YBS_SHARD_INDEX": k - 1, "YBS_SHARD_TOTAL": SHARDS}, "auto"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        found = re.search(r"delay-ms=(\d+)", text)
        time.sleep(int(found.group(1)) / 1000 if found else 0)
        if body.get("stream"):
            chunks = [
                {"choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 1,
                                          "total_tokens": 101}},
            ]
            data = "".join("data: %s\n\n" % json.dumps(c) for c in chunks) + "data: [DONE]\n\n"
            kind = "text/event-stream"
        else:
            data = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": "done"}}],
                               "usage": {"prompt_tokens": 100, "completion_tokens": 1,
                                         "total_tokens": 101}})
            kind = "application/json"
        data = data.encode()
        try:
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


def statuses(out):
    """{task id: status} of the task directories of an output directory."""
    found = {}
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name, "transcript.json")
        if os.path.isfile(path):
            with open(path) as f:
                found[name] = json.load(f)["status"]
    return found


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ybs", default=None)
    parser.add_argument("--tasks", type=int, default=96)
    parser.add_argument("--median-ms", type=float, default=250)
    parser.add_argument("--sigma", type=float, default=1.1)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    ybs = args.ybs
    if ybs is None:
        release = os.path.join(root, "target/release/ybs")
        ybs = release if os.access(release, os.X_OK) else os.path.join(root, "target/debug/ybs")
    ybs = os.path.abspath(ybs)

    rng = random.Random(args.seed)
    delays = {"job-%03d" % n: int(args.median_ms * math.exp(rng.gauss(0, args.sigma)))
              for n in range(args.tasks)}

    work = tempfile.mkdtemp(prefix="ybs-shard-sim-")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = "http://127.0.0.1:%d/v1" % server.server_address[1]
    try:
        os.makedirs(os.path.join(work, "tasks"))
        with open(os.path.join(work, "tasks/batch.yaml"), "w") as f:
            f.write("tasks:\n")
            for task, ms in delays.items():
                f.write("  - id: %s\n    prompt: \"answer done (delay-ms=%d)\"\n" % (task, ms))
        env = {k: v for k, v in os.environ.items()
               if k not in ENGINE_VARIABLES and not k.endswith("_API_KEY")
               and not k.startswith("GITHUB_")}
        env.update(HOME=work, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
        base = [ybs, "run", "tasks", "--provider", "openai", "--endpoint", endpoint,
                "--model", "sim", "--no-sandbox"]

        def run(out, extra, variables=None):
            e = dict(env)
            e.update({k: str(v) for k, v in (variables or {}).items()})
            return subprocess.Popen(base + extra + ["--out", out], cwd=work, env=e,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

        start = time.monotonic()
        single = run("single", ["--jobs", "16"])
        _, err = single.communicate()
        if single.returncode not in (0, 1):
            sys.exit("single run failed (%d): %s" % (single.returncode, err))
        print("single run of %d tasks (--jobs 16): %.1f s; task delays: median %d ms, "
              "mean %d ms, longest %d ms, sum %.1f s" % (
                  args.tasks, time.monotonic() - start, statistics.median(delays.values()),
                  statistics.mean(delays.values()), max(delays.values()),
                  sum(delays.values()) / 1000))
        expected = statuses(os.path.join(work, "single"))
        with open(os.path.join(work, "single/durations.json")) as f:
            measured = json.load(f)["tasks"]
        longest_task = max(measured.values())

        ok = True
        for split, extra in [("hash", []),
                             ("durations", ["--shard-by", "durations", "--durations",
                                            "single/durations.json"])]:
            procs = []
            for k in range(1, SHARDS + 1):
                engine, variables, flag = machine(k)
                procs.append((k, engine, time.monotonic(),
                              run("%s-%d" % (split, k), ["--jobs", "1", "--shard", flag] + extra,
                                  variables)))
            walls = {}
            for k, engine, began, proc in procs:
                _, err = proc.communicate()
                walls[k] = time.monotonic() - began
                if proc.returncode not in (0, 1):
                    sys.exit("%s machine %d (%s) failed (%d): %s" % (
                        split, k, engine, proc.returncode, err))
            ran = {}
            sums = {}
            for k in range(1, SHARDS + 1):
                out = os.path.join(work, "%s-%d" % (split, k))
                with open(os.path.join(out, "shard.json")) as f:
                    listed = json.load(f)
                engine = (listed.get("source") or {}).get("engine")
                if listed["shard"] != "%d/%d" % (k, SHARDS) or engine != machine(k)[0]:
                    print("FAIL: %s machine %d says shard %s from %s" % (
                        split, k, listed["shard"], engine))
                    ok = False
                tasks = statuses(out)
                sums[k] = sum(measured[t] for t in tasks) / 1000
                for task in tasks:
                    ran.setdefault(task, []).append(k)
            twice = {t: ks for t, ks in ran.items() if len(ks) != 1}
            missing = sorted(set(expected) - set(ran))
            merge = subprocess.run([ybs, "report", "merge"]
                                   + ["%s-%d" % (split, k) for k in range(1, SHARDS + 1)]
                                   + ["--out", "%s-merged" % split],
                                   cwd=work, env=env, capture_output=True, text=True)
            merged = statuses(os.path.join(work, "%s-merged" % split))
            same = merged == expected
            ok = ok and not twice and not missing and same and merge.returncode in (0, 1)
            wall = max(walls.values())
            mean_wall = statistics.mean(walls.values())
            summed = max(sums.values())
            mean_sum = statistics.mean(sums.values())
            bound = max(mean_sum, longest_task / 1000)
            print("%-9s: each task once: %s; merged ids and statuses = single run's: %s "
                  "(merge exit %d)" % (split, "yes" if not (twice or missing) else
                                       "NO (twice %s, missing %s)" % (twice, missing),
                                       "yes" if same else "NO", merge.returncode))
            print("           wall time per machine: longest %.2f s, mean %.2f s (%.2fx)"
                  % (wall, mean_wall, wall / mean_wall))
            print("           sum of task durations: longest %.2f s, mean %.2f s (%.2fx); "
                  "longest task %.2f s; longest / max(mean, longest task) = %.2f"
                  % (summed, mean_sum, summed / mean_sum, longest_task / 1000, summed / bound))
            print("           machines: " + ", ".join(
                "%d %s %.1fs" % (k, SHORT.get(machine(k)[0], machine(k)[0]), sums[k]) for k in range(1, SHARDS + 1)))
        return 0 if ok else 1
    finally:
        server.shutdown()
        if args.keep:
            print("work dir: " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
