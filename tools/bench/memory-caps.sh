#!/usr/bin/env bash
# Peak memory (max RSS, from /usr/bin/time -v) of ybs in the three cases
# where memory used to follow the input instead of the caps:
#
#   1. a model turn carrying a 300 MB write_file content (streamed SSE,
#      then one non-streamed JSON body), from a local HTTP server; and, for
#      comparison, a 7 MB one that fits under llm.max_response_bytes and is
#      written;
#   2. a run_shell command printing 1 GB on stdout;
#   3. list_files over a directory of 300 000 files.
#
# Usage: tools/bench/memory-caps.sh [path/to/ybs]   (default: target/release/ybs,
# else target/debug/ybs). Needs python3 and GNU time. Prints one line per
# case: the case, ybs's exit code and reason, and the peak RSS in MB.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
ybs=${1:-}
if [[ -z $ybs ]]; then
    if [[ -x $root/target/release/ybs ]]; then ybs=$root/target/release/ybs; else ybs=$root/target/debug/ybs; fi
fi
ybs=$(realpath "$ybs")
[[ -x /usr/bin/time ]] || { echo "memory-caps: needs GNU time at /usr/bin/time" >&2; exit 2; }
files=${YBS_BENCH_FILES:-300000}

work=$(mktemp -d)
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
[[ -n ${YBS_BENCH_KEEP:-} ]] && trap - EXIT && echo "work dir: $work"

# A local model server: every POST gets a turn whose write_file content
# is as many bytes of "x" as the request's model name says, streamed (SSE)
# or whole (JSON), generated on the fly; after a tool result, "done".
cat >"$work/server.py" <<'EOF'
import http.server, json, sys

PIECE = 64 * 1024

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        global SIZE
        SIZE = int(body["model"])
        try:
            if any(m["role"] == "tool" for m in body["messages"]):
                self.done(body.get("stream"))
            elif body.get("stream"):
                self.stream()
            else:
                self.whole()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def stream(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        def chunk(text):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(text), text))
        def send(data):
            chunk(("data: " + json.dumps(data) + "\n\n").encode())
        def call(fragment, first=False):
            function = {"arguments": fragment}
            delta = {"index": 0, "function": function}
            if first:
                delta.update(id="call_1", type="function")
                function["name"] = "write_file"
            send({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]})
        call('{"path": "big.txt", "content": "', first=True)
        piece = "x" * PIECE
        for _ in range(SIZE // PIECE):
            call(piece)
        call("x" * (SIZE % PIECE) + '"}')
        send({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def done(self, streaming):
        if streaming:
            delta = {"choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": "stop"}]}
            text = ("data: " + json.dumps(delta) + "\n\ndata: [DONE]\n\n").encode()
            kind = "text/event-stream"
        else:
            text = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": "done"}}]}).encode()
            kind = "application/json"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def whole(self):
        head = b'{"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": "{\\"path\\": \\"big.txt\\", \\"content\\": \\"'
        tail = b'\\"}"}}]}}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(head) + SIZE + len(tail)))
        self.end_headers()
        self.wfile.write(head)
        piece = b"x" * PIECE
        for _ in range(SIZE // PIECE):
            self.wfile.write(piece)
        self.wfile.write(b"x" * (SIZE % PIECE))
        self.wfile.write(tail)

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
EOF
python3 "$work/server.py" >"$work/port" &
server_pid=$!
for _ in $(seq 50); do [[ -s $work/port ]] && break; sleep 0.1; done
port=$(cat "$work/port")

# One scratch directory per case; peak RSS of one `ybs run`.
measure() {
    local name=$1 dir=$2
    shift 2
    local code=0
    (cd "$dir" && /usr/bin/time -v "$ybs" run t.yaml --no-commit "$@") \
        >"$dir/out.txt" 2>"$dir/time.txt" || code=$?
    local kb reason
    kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt")
    reason=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); print(t["status"], t["reason"])' \
        "$dir/ybs-out/t/transcript.json" 2>/dev/null || echo "?")
    printf '%-44s exit %d  %-28s peak RSS %4d MB\n' "$name" "$code" "$reason" $((kb / 1024))
}

task='prompt: go
policy:
  default: allow
'

for size in 300000000 7000000; do
    for streaming in true false; do
        dir=$work/response-$size-$streaming
        mkdir -p "$dir"
        printf '%s' "$task" >"$dir/t.yaml"
        printf '{"llm": {"stream": %s}, "agent": {"retry_attempts": 0}}' "$streaming" >"$dir/op.json"
        label="$((size / 1000000)) MB write_file turn (stream: $streaming)"
        OPENAI_API_KEY= measure "$label" "$dir" --config op.json \
            --provider openai --model "$size" --endpoint "http://127.0.0.1:$port/v1"
    done
done

dir=$work/shell
mkdir -p "$dir"
printf '%s' "$task" >"$dir/t.yaml"
cat >"$dir/t.cassette.json" <<'EOF'
{"version": 1, "interactions": [
 {"response": {"content": "", "tool_calls": [{"id": "c1", "name": "run_shell",
   "arguments": {"command": "head -c 1000000000 /dev/zero | tr '\\0' x", "timeout_seconds": 120}}]}},
 {"response": {"content": "done"}}]}
EOF
measure "run_shell printing 1 GB" "$dir"

dir=$work/tree
mkdir -p "$dir/big"
printf '%s' "$task" >"$dir/t.yaml"
(cd "$dir/big" && seq -f 'file-%09g.txt' 1 "$files" | xargs touch)
cat >"$dir/t.cassette.json" <<'EOF'
{"version": 1, "interactions": [
 {"response": {"content": "", "tool_calls": [{"id": "c1", "name": "list_files",
   "arguments": {"pattern": "*.txt", "max_results": 5000}}]}},
 {"response": {"content": "", "tool_calls": [{"id": "c2", "name": "search_files",
   "arguments": {"pattern": "never-there"}}]}},
 {"response": {"content": "done"}}]}
EOF
measure "list_files + search_files, $files files" "$dir"
