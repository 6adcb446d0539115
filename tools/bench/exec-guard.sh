#!/usr/bin/env bash
# What the sandbox's exec guard costs per exec (docs/sandbox.md, "Cost"):
# one `ybs run` whose model (the replay provider) runs a loop of N execs
# of /bin/true under `run_shell`, with deny rules on run_shell (the guard
# answers every exec) and without (no guard), ROUNDS times each; prints
# the microseconds per exec of each.
#
#   bash tools/bench/exec-guard.sh [N] [ROUNDS]     # default 2000 3
#   YBS=/path/to/ybs bash tools/bench/exec-guard.sh
set -euo pipefail
n=${1:-2000}
rounds=${2:-3}
here=$(cd "$(dirname "$0")/../.." && pwd)
ybs=${YBS:-$here/target/debug/ybs}
[ -x "$ybs" ] || (cd "$here" && cargo build -q)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
git init -q && git -c user.name=b -c user.email=b@b commit -q --allow-empty -m init
printf 'prompt: loop\ncommit: false\nprovider: replay\npolicy:\n  allow: ["run_shell(*)"]\n' > free.yaml
cp free.yaml guarded.yaml
printf '  deny: ["run_shell(curl*)", "run_shell(git push*)", "run_shell(rm -rf*)"]\n' >> guarded.yaml
command="s=\$(date +%s%N); for i in \$(seq $n); do /bin/true; done; e=\$(date +%s%N); echo \$(( (e - s) / 1000 ))"
python3 - "$command" <<'PY'
import json, sys
cassette = {"version": 1, "interactions": [
    {"response": {"content": "", "tool_calls": [{"id": "c1", "name": "run_shell",
        "arguments": {"command": sys.argv[1], "timeout_seconds": 600}}]}},
    {"response": {"content": "done"}}]}
for name in ("free", "guarded"):
    json.dump(cassette, open(f"{name}.cassette.json", "w"))
PY
for round in $(seq "$rounds"); do
    for name in free guarded; do
        "$ybs" run "$name.yaml" -q >/dev/null 2>&1 || true
        micros=$(python3 -c '
import json, sys
out = json.load(open(sys.argv[1]))["tool_calls"][0]["result"]["output"]
print(json.loads(out)["stdout"].strip())' "ybs-out/$name/transcript.json")
        echo "round $round, $name: $((micros / n)) us per exec"
    done
done
