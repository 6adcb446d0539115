#!/usr/bin/env bash
# The size of OUT/report.html and the peak memory of writing it
# (docs/performance.md, "The HTML report").
#
# Makes one real task (a cassette: one run_shell call, then an answer),
# then from its transcript an output directory of TASKS tasks of STEPS
# steps each, every model text and tool result BYTES bytes (far over the
# page's 4 KiB cut) with planted markup, and writes the page of it with
# `ybs report html` under GNU time. For comparison it does the same for
# one such task and for the one small task, and runs `ybs --version`: the
# difference between the many-task page and the one-task page is what the
# run's size adds to peak RSS (the writer holds one transcript at a time);
# over the small task, what one large transcript in memory adds too.
#
# Usage: tools/bench/html-report.sh [path/to/ybs]   (default:
# target/release/ybs, else target/debug/ybs). Env: TASKS (200), STEPS (30),
# BYTES (20000). Needs python3 and GNU time.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
ybs=${1:-}
if [[ -z $ybs ]]; then
    if [[ -x $root/target/release/ybs ]]; then ybs=$root/target/release/ybs; else ybs=$root/target/debug/ybs; fi
fi
ybs=$(realpath "$ybs")
[[ -x /usr/bin/time ]] || { echo "html-report: needs GNU time at /usr/bin/time" >&2; exit 2; }
tasks=${TASKS:-200}
steps=${STEPS:-30}
bytes=${BYTES:-20000}

work=$(mktemp -d)
[[ -n ${YBS_BENCH_KEEP:-} ]] && echo "work dir: $work" >&2 || trap 'rm -rf "$work"' EXIT
export HOME=$work GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
cd "$work"
printf 'prompt: go\npolicy:\n  default: allow\n' >t.yaml
cat >t.cassette.json <<'EOF'
{"version": 1, "interactions": [
 {"response": {"content": "", "tool_calls": [{"id": "c1", "name": "run_shell", "arguments": {"command": "echo hi"}}]}},
 {"response": {"content": "done"}}]}
EOF
"$ybs" run t.yaml --no-sandbox --quiet >/dev/null 2>&1 || "$ybs" run t.yaml --no-sandbox >/dev/null 2>&1

# TASKS task directories (hard links to one transcript) in many/, one in one/.
python3 - "$tasks" "$steps" "$bytes" <<'EOF'
import copy, json, os, sys
tasks, steps, size = (int(a) for a in sys.argv[1:])
t = json.load(open("ybs-out/t/transcript.json"))
user = t["messages"][0]
call = t["tool_calls"][0]
planted = "</script><img src=x onerror=alert(1)>"
messages, calls = [user], []
for step in range(steps):
    entry = copy.deepcopy(call)
    entry["id"] = "call_%d" % step
    entry["result"]["output"] = planted + "o" * size
    calls.append(entry)
    messages.append({"role": "assistant", "content": planted + "m" * size,
                     "tool_calls": [{"id": entry["id"], "name": entry["name"], "arguments": entry["arguments"]}]})
    messages.append({"role": "tool", "call_id": entry["id"], "name": entry["name"], "content": entry["result"]["output"]})
messages.append({"role": "assistant", "content": "done"})
t["messages"], t["tool_calls"] = messages, calls
os.makedirs("tiny/task-000")
os.link("ybs-out/t/transcript.json", "tiny/task-000/transcript.json")
json.dump(t, open("transcript.json", "w"))
for n in range(tasks):
    for name in ("many",) + (("quarter",) if n < tasks // 4 else ()):
        os.makedirs("%s/task-%03d" % (name, n))
        os.link("transcript.json", "%s/task-%03d/transcript.json" % (name, n))
os.makedirs("one/task-000")
os.link("transcript.json", "one/task-000/transcript.json")
EOF

peak() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }
/usr/bin/time -v "$ybs" --version >/dev/null 2>version.time
/usr/bin/time -v "$ybs" report html tiny --to tiny.html >/dev/null 2>tiny.time
/usr/bin/time -v "$ybs" report html one --to one.html >/dev/null 2>one.time
/usr/bin/time -v "$ybs" report html quarter --to quarter.html >/dev/null 2>quarter.time
/usr/bin/time -v "$ybs" report html many --to many.html >/dev/null 2>many.time
transcript=$(stat -c %s transcript.json)
one=$(stat -c %s one.html)
many=$(stat -c %s many.html)
printf 'binary: %s\n' "$ybs"
printf 'transcript: %d steps, %d bytes\n' "$steps" "$transcript"
printf '%-28s %10s %14s\n' "" "page bytes" "peak RSS (KB)"
printf '%-28s %10s %14d\n' "ybs --version" "-" "$(peak version.time)"
printf '%-28s %10d %14d\n' "report html, 1 small task" "$(stat -c %s tiny.html)" "$(peak tiny.time)"
printf '%-28s %10d %14d\n' "report html, 1 task" "$one" "$(peak one.time)"
printf '%-28s %10d %14d\n' "report html, $((tasks / 4)) tasks" "$(stat -c %s quarter.html)" "$(peak quarter.time)"
printf '%-28s %10d %14d\n' "report html, $tasks tasks" "$many" "$(peak many.time)"
printf 'added by %d tasks over 1: %d KB; over 1 small task: %d KB\n' "$tasks" \
    $(($(peak many.time) - $(peak one.time))) $(($(peak many.time) - $(peak tiny.time)))
