"use strict";
(function () {
  // Every text below is data: it reaches the page through textContent
  // only (never parsed as markup), and no link is made from it.
  var run = JSON.parse(document.getElementById("ybs-run").textContent);
  var tasks = Array.prototype.map.call(
    document.querySelectorAll("script.ybs-task"),
    function (node) { return JSON.parse(node.textContent); }
  );
  var groups = JSON.parse(document.getElementById("ybs-groups").textContent);
  var state = { status: "", reason: "", q: "" };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function pre(text) { return el("pre", null, text); }
  function ms(value) {
    if (value === null || value === undefined) return "";
    return value >= 1000 ? (value / 1000).toFixed(1) + " s" : value + " ms";
  }
  function cost(value) { return value === null || value === undefined ? "unknown" : "$" + value.toFixed(4); }
  function fragment() {
    var params = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) {
        try { params[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1)); } catch (e) { /* not ours */ }
      }
    });
    return params;
  }
  // The fragment for the filters in `state` plus `extra` (task, open):
  // a link to it reproduces the view.
  function hashOf(extra) {
    var parts = [];
    ["status", "reason", "q"].forEach(function (key) {
      if (state[key]) parts.push(key + "=" + encodeURIComponent(state[key]));
    });
    Object.keys(extra).forEach(function (key) {
      if (extra[key]) parts.push(key + "=" + encodeURIComponent(extra[key]));
    });
    return "#" + parts.join("&");
  }
  function hrefFor(id) { return hashOf({ task: id }); }
  // A filter changed: the fragment follows without a new history entry,
  // keeping the selected task and open=all.
  function writeFragment() {
    var params = fragment();
    var hash = hashOf({ task: params.task, open: params.open });
    if (hash !== location.hash && !(hash === "#" && !location.hash)) history.replaceState(null, "", hash);
  }

  // A small Markdown subset, built as DOM nodes: paragraphs, headings as
  // bold lines, lists, fenced code and inline code. No links, no images,
  // no HTML.
  function markdown(text) {
    var box = el("div", "md");
    var lines = String(text || "").split("\n");
    var list = null, para = null, fence = null;
    function inline(parent, line) {
      line.split(/(`[^`]+`)/).forEach(function (part) {
        if (/^`[^`]+`$/.test(part)) add(parent, el("code", null, part.slice(1, -1)));
        else if (part) parent.appendChild(document.createTextNode(part));
      });
    }
    lines.forEach(function (line) {
      if (fence !== null) {
        if (/^\s*```/.test(line)) { add(box, pre(fence.join("\n"))); fence = null; } else fence.push(line);
        return;
      }
      if (/^\s*```/.test(line)) { fence = []; list = para = null; return; }
      var item = /^\s*[-*] (.*)$/.exec(line);
      if (item) {
        if (!list) list = add(box, el("ul")).lastChild;
        inline(add(list, el("li")).lastChild, item[1]);
        para = null;
        return;
      }
      list = null;
      if (!line.trim()) { para = null; return; }
      var head = /^#{1,6} (.*)$/.exec(line);
      if (head) { add(box, add(el("p"), el("strong", null, head[1]))); para = null; return; }
      if (!para) para = add(box, el("p")).lastChild; else para.appendChild(document.createTextNode(" "));
      inline(para, line);
    });
    if (fence !== null) add(box, pre(fence.join("\n")));
    return box;
  }

  function matches(task) {
    if (state.status && task.status !== state.status) return false;
    if (state.reason && (task.reason || "") !== state.reason) return false;
    if (state.q) {
      var q = state.q.toLowerCase();
      if (task.id.toLowerCase().indexOf(q) < 0 && JSON.stringify(task).toLowerCase().indexOf(q) < 0) return false;
    }
    return true;
  }

  function select(label, values, key) {
    var box = el("label", null, label + " ");
    var sel = add(box, el("select")).lastChild;
    sel.setAttribute("data-filter", key);
    sel.id = "filter-" + key;
    // A value from the fragment that no task has is still shown.
    if (state[key] && values.indexOf(state[key]) < 0) values = values.concat([state[key]]);
    [""].concat(values).forEach(function (value) {
      var option = add(sel, el("option", null, value || "all")).lastChild;
      option.value = value;
      // As an attribute too, so that the page's markup shows the view.
      option.defaultSelected = value === state[key];
    });
    sel.value = state[key];
    sel.addEventListener("change", function () { state[key] = sel.value; writeFragment(); render(); });
    return box;
  }
  function unique(key) {
    var seen = {};
    tasks.forEach(function (task) { if (task[key]) seen[task[key]] = true; });
    return Object.keys(seen).sort();
  }

  function overview(selected) {
    var box = el("section");
    box.setAttribute("aria-label", "tasks");
    var table = add(box, el("table")).lastChild;
    var head = add(table, el("thead")).lastChild.appendChild(el("tr"));
    ["task", "status", "reason", "duration", "steps", "tokens", "cost", "cache"].forEach(function (name) {
      add(head, el("th", null, name));
    });
    var body = add(table, el("tbody")).lastChild;
    var shown = 0;
    tasks.forEach(function (task) {
      if (!matches(task)) return;
      shown++;
      var row = add(body, el("tr", task.id === selected ? "selected" : null)).lastChild;
      row.setAttribute("data-task", task.id);
      var link = el("a", null, task.name);
      link.href = hrefFor(task.id);
      add(row, add(el("td"), link));
      add(row, el("td", "status s-" + task.status, task.status));
      add(row, el("td", null, task.reason || ""));
      add(row, el("td", "num", ms(task.duration_ms)));
      add(row, el("td", "num", task.steps));
      add(row, el("td", "num", (task.input_tokens || 0) + " in / " + (task.output_tokens || 0) + " out"));
      add(row, el("td", "num", cost(task.cost_usd)));
      var share = task.cache_read_tokens && task.input_tokens ? Math.round(100 * task.cache_read_tokens / task.input_tokens) + "%" : "";
      add(row, el("td", "num", share));
    });
    add(box, el("p", "kv", shown + " of " + tasks.length + " tasks shown"));
    return box;
  }

  function taskLink(id) {
    var link = el("a", null, id);
    link.href = hrefFor(id);
    return link;
  }
  function table(title, label, columns) {
    var box = add(el("section"), el("h2", null, title));
    box.setAttribute("aria-label", label);
    var grid = add(box, el("table", label)).lastChild;
    var head = add(grid, el("thead")).lastChild.appendChild(el("tr"));
    columns.forEach(function (name) { add(head, el("th", null, name)); });
    return { box: box, body: add(grid, el("tbody")).lastChild };
  }

  // --repeat N: each task's runs, passed over run, flaky when mixed.
  function ratesView() {
    if (!groups.rates.length) return null;
    var view = table("Pass rates", "rates", ["task", "passed", "verdict", "runs"]);
    groups.rates.forEach(function (rate) {
      var row = add(view.body, el("tr")).lastChild;
      row.setAttribute("data-rate", rate.key);
      add(row, el("td", null, rate.key), el("td", "num", rate.describe), el("td", "status s-" + rate.verdict, rate.verdict));
      var runs = add(row, el("td")).lastChild;
      rate.ids.forEach(function (id, index) {
        if (index) runs.appendChild(document.createTextNode(" "));
        add(runs, taskLink(id));
      });
    });
    return view.box;
  }

  // --models: a task per row, a model per column, each cell its verdict
  // (and pass rate under --repeat).
  function matrixView() {
    var matrix = groups.matrix;
    if (!matrix) return null;
    var view = table("Models", "matrix", ["task"].concat(matrix.models));
    matrix.rows.forEach(function (line) {
      var row = add(view.body, el("tr")).lastChild;
      row.setAttribute("data-matrix", line.task);
      add(row, el("td", null, line.task));
      line.cells.forEach(function (cell, index) {
        var td = add(row, el("td", cell ? "status s-" + cell.verdict : "kv")).lastChild;
        td.setAttribute("data-model", matrix.models[index]);
        if (!cell) { td.textContent = "—"; return; }
        var link = el("a", null, cell.verdict);
        link.href = hrefFor(cell.ids[0]);
        add(td, link);
        if (cell.runs > 1) add(td, el("span", "kv", " " + cell.describe));
      });
    });
    return view.box;
  }

  // --shard: each shard K/N, the engine it came from, how it was split,
  // its tasks and their time.
  function shardsView() {
    if (!groups.shards.length) return null;
    var view = table("Shards", "shards", ["shard", "engine", "split", "time", "tasks"]);
    groups.shards.forEach(function (shard) {
      var row = add(view.body, el("tr")).lastChild;
      row.setAttribute("data-shard", shard.shard);
      add(row, el("td", null, shard.shard), el("td", null, shard.engine || "--shard K/N"), el("td", null, shard.split),
        el("td", "num", ms(shard.duration_ms)));
      var list = add(row, el("td")).lastChild;
      shard.tasks.forEach(function (id, index) {
        if (index) list.appendChild(document.createTextNode(" "));
        add(list, taskLink(id));
      });
    });
    return view.box;
  }

  function pendingList() {
    var waiting = tasks.filter(function (task) { return task.pending && task.pending.length; });
    if (!waiting.length) return null;
    var box = add(el("section"), el("h2", null, "Pending approvals and calls"));
    var list = add(box, el("ul")).lastChild;
    waiting.forEach(function (task) {
      task.pending.forEach(function (call) {
        var item = add(list, el("li")).lastChild;
        var link = el("a", null, task.name);
        link.href = hrefFor(task.id);
        add(item, link, el("span", null, ": " + call.kind + " of " + call.name + " (rule " + call.rule + ")"), pre(call.arguments));
      });
    });
    return box;
  }

  function section(title, open, child) {
    var box = el("details");
    box.open = open;
    add(box, el("summary", null, title));
    Array.prototype.slice.call(arguments, 2).forEach(function (node) { if (node) box.appendChild(node); });
    return box;
  }

  function callView(call, open) {
    var verdict = call.verdict || "undecided";
    var title = call.name + " — " + verdict + (call.rule ? " by " + call.rule : "") +
      (call.duration_ms !== null && call.duration_ms !== undefined ? " — " + ms(call.duration_ms) : "") +
      (call.ok === false ? " — failed" : "");
    var box = section(title, open, el("div", "kv", "arguments"), pre(call.arguments));
    box.className = "call";
    box.firstChild.className = verdict;
    if (call.detail) add(box, el("div", "kv", "decision: " + call.detail));
    if (call.output !== null && call.output !== undefined) add(box, el("div", "kv", call.ran ? "result" : "result (not run)"), pre(call.output));
    return box;
  }

  function taskView(task, open) {
    var box = el("details", "task");
    box.open = open;
    box.setAttribute("data-task", task.id);
    add(box, el("summary", null, task.name + " — " + task.status + (task.reason ? " (" + task.reason + ")" : "")));
    var facts = [task.file, task.model && "model " + task.model, ms(task.duration_ms), task.steps + " tool calls", "cost " + cost(task.cost_usd)];
    add(box, el("p", "kv", facts.filter(Boolean).join(" · ")));
    if (task.message) add(box, el("p", null, task.message));
    if (task.pending && task.pending.length) {
      add(box, el("h3", null, "Waiting on"));
      task.pending.forEach(function (call) { add(box, el("p", "ask", call.kind + ": " + call.name + " (rule " + call.rule + ")"), pre(call.arguments)); });
    }
    if (task.turns && task.turns.length) {
      add(box, el("h3", null, "Timeline"));
      task.turns.forEach(function (turn, index) {
        var div = add(box, el("div", "turn " + turn.role)).lastChild;
        add(div, el("div", "role", (turn.role === "model" ? "model" : turn.role === "user" ? (index === 0 ? "prompt" : "user / nudge") : "tool commands")));
        if (turn.text) add(div, turn.role === "model" ? markdown(turn.text) : pre(turn.text));
        turn.calls.forEach(function (call) { add(div, callView(call, open)); });
      });
    }
    if (task.notes && task.notes.length) {
      add(box, el("h3", null, "Notes"));
      var notes = add(box, el("ul")).lastChild;
      task.notes.forEach(function (note) { add(notes, el("li", null, note)); });
    }
    if (task.checks && task.checks.length) {
      add(box, el("h3", null, "Checks"));
      task.checks.forEach(function (check) {
        var result = check.passed ? "passed" : (check.timed_out ? "timed out" : "failed, exit " + check.exit_code);
        var view = section(check.name + " — " + result + " — " + ms(check.duration_ms), open || !check.passed,
          el("div", "kv", "$ " + check.command + (check.attempt > 1 ? " (attempt " + check.attempt + ")" : "")),
          pre(check.output));
        view.className = "check " + (check.passed ? "s-passed" : "s-failed");
        (check.locations || []).forEach(function (loc) { add(view, el("div", "kv", loc)); });
        add(box, view);
      });
    }
    if (task.output) add(box, section("output.md", open, markdown(task.output)));
    if (task.output_json) add(box, section("output.json", open, pre(task.output_json)));
    if (task.git) {
      var git = task.git;
      var lines = [git.note, git.commit && "commit " + git.commit, git.branch && "branch " + git.branch,
        git.salvage_ref && "salvaged to " + git.salvage_ref];
      add(box, el("h3", null, "Git"), el("p", null, lines.filter(Boolean).join(" · ")));
      if (git.files && git.files.length) add(box, pre(git.files.join("\n")));
    }
    if (task.commit_patch) add(box, section("the commit: message, trailers and diff (commit.patch)", open, pre(task.commit_patch)));
    if (task.patch) add(box, section("changes.patch", open, pre(task.patch)));
    var link = el("a", null, "transcript: " + task.transcript);
    link.href = encodeURIComponent(task.id) + "/transcript.json";
    add(box, add(el("p"), link));
    return box;
  }

  var root = el("main");
  // The page is built anew on each change: the control that had the
  // keyboard's focus (a filter, the search, the expand button) gets it
  // back, the caret at the end of the search.
  function render() {
    var focused = document.activeElement && document.activeElement.id;
    draw();
    var again = focused && document.getElementById(focused);
    if (again) {
      again.focus();
      if (again.type === "search") again.setSelectionRange(again.value.length, again.value.length);
    }
  }
  function draw() {
    var params = fragment();
    var all = params.open === "all";
    var selected = params.task || "";
    while (root.firstChild) root.removeChild(root.firstChild);
    var counts = {};
    tasks.forEach(function (task) { counts[task.status] = (counts[task.status] || 0) + 1; });
    add(root, el("h1", null, run.title),
      el("p", "kv", "ybs " + run.ybs_version + " · " + Object.keys(counts).sort().map(function (s) { return counts[s] + " " + s; }).join(", ") +
        (run.shard ? " · shard " + run.shard : "") + (run.merged_from.length ? " · merged from " + run.merged_from.join(", ") : "")));
    run.warnings.forEach(function (warning) { add(root, el("p", "warn", "warning: " + warning)); });
    var bar = add(root, el("div", "bar")).lastChild;
    bar.setAttribute("role", "search");
    add(bar, select("status", unique("status"), "status"), select("reason", unique("reason"), "reason"));
    var label = add(bar, el("label", null, "search ")).lastChild;
    var input = add(label, el("input")).lastChild;
    input.type = "search";
    input.id = "search";
    input.placeholder = "id or text (press /)";
    input.value = state.q;
    input.addEventListener("input", function () { state.q = input.value; writeFragment(); render(); });
    var all_button = add(bar, el("button", null, all ? "collapse all" : "expand all")).lastChild;
    all_button.type = "button";
    all_button.id = "expand";
    all_button.addEventListener("click", function () { location.hash = hashOf({ task: params.task, open: all ? "" : "all" }); });
    add(root, overview(selected), ratesView(), matrixView(), shardsView(), pendingList());
    add(root, el("h2", null, "Tasks"));
    tasks.forEach(function (task) {
      if (!matches(task) && task.id !== selected) return;
      if (selected && !all && task.id !== selected) return;
      add(root, taskView(task, all || task.id === selected));
    });
    document.body.setAttribute("data-rendered", String(tasks.length));
  }
  // The fragment holds the filters too: #status=failed, #reason=…, #q=….
  function fromFragment() {
    var params = fragment();
    ["status", "reason", "q"].forEach(function (key) { state[key] = params[key] || ""; });
    render();
  }
  document.body.insertBefore(root, document.body.firstChild);
  // Following a task's link moves the focus to that task.
  window.addEventListener("hashchange", function () {
    fromFragment();
    var task = fragment().task;
    if (!task || document.activeElement.id === "expand") return;
    var opened = Array.prototype.filter.call(document.querySelectorAll("details.task"), function (node) {
      return node.getAttribute("data-task") === task;
    })[0];
    if (opened) opened.firstChild.focus();
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "/" && document.activeElement && document.activeElement.tagName !== "INPUT") {
      event.preventDefault();
      document.getElementById("search").focus();
    }
  });
  fromFragment();
})();
