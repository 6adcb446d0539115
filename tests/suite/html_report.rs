//! `OUT/report.html` (issue 37): one self-contained page written by every
//! run, resume and merge, and by `ybs report html`; opened in a real
//! headless Chromium, driven by its URL fragment, with hostile content
//! planted in model text, tool output, check names, file names and task
//! ids.
//!
//! The browser is `$YBS_CHROMIUM` (which `.ci/run` sets), else the first
//! of `chromium`, `chromium-browser`, `google-chrome` on `PATH`; with none,
//! the browser half prints a `SKIPPED:` line and the raw-HTML half still
//! runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use super::git::{Repo, for_task};
use crate::support::cassette::{answer, call};
use crate::support::{Run, Ybs};

/// Planted in model text: each part would act if it reached markup.
const PAYLOAD: &str = "## Done\n\n<script>document.title='pwned'</script>\
<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">\
[click](javascript:alert(1)) </script><script>document.title='pwned2'</script>\
 \u{202e}evil\u{202c} \u{7}bell";

const TASKS: &str = "\
defaults:
  model: test-model
  commit: false
tasks:
  - id: passes
    prompt: write the greeting
    commit: true
    policy:
      allow: [write_file, read_file, \"run_shell(echo *)\"]
  - id: fails
    prompt: fix the build
    policy:
      allow: [write_file]
    checks:
      - name: \"build <b>check</b>\"
        run: \"echo BROKEN-CHECK-OUTPUT '</script><img src=x onerror=alert(1)>'; exit 1\"
  - id: waits
    prompt: publish it
    policy:
      allow: [read_file]
      ask: [\"run_shell(npm publish*)\"]
      on_ask: pause
";

fn three_task_run(ybs: &Ybs) -> Run {
    ybs.file("notes.txt", "one\n");
    ybs.file("t.yaml", TASKS);
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task(
                "passes",
                call(
                    "write_file",
                    json!({"path": "greeting<img src=x onerror=alert(1)>.txt", "content": "hello from passes\n"}),
                ),
            ),
            for_task(
                "passes",
                call(
                    "run_shell",
                    json!({"command": "echo '<script>alert(1)</script>' TOOL-OUTPUT-MARK"}),
                ),
            ),
            for_task("passes", answer(PAYLOAD)),
            for_task(
                "fails",
                call(
                    "write_file",
                    json!({"path": "fix.txt", "content": "attempted fix\n"}),
                ),
            ),
            for_task("fails", answer("fixed, I think")),
            for_task(
                "waits",
                call("run_shell", json!({"command": "npm publish --tag next"})),
            ),
        ],
    );
    Repo::init(ybs, "");
    ybs.run(["run", "t.yaml", "--jobs", "3", "--no-sandbox"])
}

/// The raw file: one page, everything inline, a strict policy, and every
/// planted string only as escaped data.
fn check_raw(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..200]);
    assert!(
        html.contains(
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'sha256-"
        ),
        "no CSP"
    );
    assert!(html.contains("img-src 'none'"));
    // Nothing from outside: no URL-bearing attribute in the markup, no
    // URL in the style or the script.
    let markup = markup_only(html);
    for outside in [
        "src=", "href=", "http:", "https:", "@import", "url(", "<link", "<img",
    ] {
        assert!(!markup.contains(outside), "{outside} in the page: {markup}");
    }
    let script = html.rsplit("<script>").next().unwrap();
    for outside in [
        "http:",
        "https:",
        "fetch(",
        "XMLHttpRequest",
        "innerHTML",
        "eval(",
    ] {
        assert!(!script.contains(outside), "{outside} in the script");
    }
    // Our three script blocks per kind, and no other: a planted
    // `</script>` or `<script>` never appears raw.
    let opened = html.matches("<script").count();
    let closed = html.matches("</script>").count();
    assert_eq!(opened, closed);
    assert_eq!(
        opened,
        3 + html
            .matches("<script type=\"application/json\" class=\"ybs-task\">")
            .count()
    );
    for raw in ["<img", "onerror=\"", "\u{202e}", "\u{7}"] {
        assert!(!html.contains(raw), "{raw:?} raw in the page");
    }
}

/// The page without the contents of its script blocks (data and code).
fn markup_only(html: &str) -> String {
    let mut markup = String::new();
    let mut rest = html;
    while let Some(start) = rest.find("<script") {
        let open_end = start + rest[start..].find('>').unwrap() + 1;
        markup.push_str(&rest[..open_end]);
        let close = open_end + rest[open_end..].find("</script>").unwrap();
        rest = &rest[close..];
    }
    markup.push_str(rest);
    markup
}

fn browser() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("YBS_CHROMIUM").filter(|path| !path.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
    .find(|candidate| candidate.is_file())
}

/// The DOM after the page's scripts ran, opened at `fragment`.
fn dump_dom(chromium: &Path, page: &Path, fragment: &str) -> String {
    dump_dom_with(chromium, page, fragment, &[])
}

fn dump_dom_with(chromium: &Path, page: &Path, fragment: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}#{fragment}", page.display());
    let output = Command::new("timeout")
        .arg("120")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() && dom.contains("<body"),
        "chromium failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    dom
}

/// What every dumped DOM must show: the script ran (under the CSP, so
/// its hash is right), and nothing planted acted.
fn check_dom_safe(dom: &str) {
    assert!(
        dom.contains("data-rendered=\""),
        "the page's script did not run"
    );
    assert!(dom.contains("<title>ybs "), "title changed");
    // No planted element or attribute: in text, `<` is `&lt;`.
    for acted in [
        "data-pwned=\"",
        "<img",
        "href=\"javascript:",
        "<a href=\"http",
    ] {
        assert!(!dom.contains(acted), "{acted} in the DOM");
    }
    assert_eq!(
        dom.matches("<script").count(),
        dom.matches("</script>").count()
    );
}

#[test]
fn every_run_writes_a_self_contained_report_that_a_browser_renders_safely() {
    let ybs = Ybs::new();
    let run = three_task_run(&ybs);
    run.expect_code(1);
    let html = ybs.read("ybs-out/report.html");
    check_raw(&html);
    for id in ["passes", "fails", "waits"] {
        assert!(html.contains(&format!("\"id\":\"{id}\"")), "{id}");
    }
    // The planted text is there, as escaped data.
    assert!(html.contains("\\u003cscript\\u003edocument.title='pwned'\\u003c/script\\u003e"));
    assert!(html.contains("\\\\u{202e}evil"), "bidi made visible");

    // `ybs report merge` and `ybs resume` write the page too.
    ybs.run(["report", "merge", "ybs-out", "--out", "merged"])
        .expect_code(1);
    let merged = ybs.read("merged/report.html");
    check_raw(&merged);
    assert_eq!(merged.matches("class=\"ybs-task\"").count(), 3);
    ybs.cassette(
        "later.cassette.json",
        vec![for_task("waits", answer("not published"))],
    );
    let before = ybs.read("ybs-out/report.html");
    ybs.run([
        "resume",
        "ybs-out",
        "--no-sandbox",
        "--deny",
        "all",
        "--cassette",
        "later.cassette.json",
    ])
    .expect_code(0);
    let resumed = ybs.read("ybs-out/report.html");
    check_raw(&resumed);
    // Every task of the run, not only the resumed one.
    assert_eq!(resumed.matches("class=\"ybs-task\"").count(), 3);
    assert!(before.contains("\"status\":\"paused\""));
    assert!(!resumed.contains("\"status\":\"paused\"") && resumed.contains("not published"));
    std::fs::write(ybs.path().join("ybs-out/report.html"), before).unwrap();

    // A hostile task directory name and file name, through `report html`.
    let hostile = "x\u{202e}<img src=x onerror=alert(1)>";
    let out = ybs.path().join("ybs-out");
    std::fs::create_dir(out.join(hostile)).unwrap();
    std::fs::copy(
        out.join("passes/transcript.json"),
        out.join(hostile).join("transcript.json"),
    )
    .unwrap();
    let other = ybs.run(["report", "html", "ybs-out", "--to", "all.html"]);
    other.expect_code(0);
    assert!(
        other.stdout.contains("report of 4 tasks in all.html"),
        "{}",
        other.stdout
    );
    check_raw(&ybs.read("all.html"));
    // `--to` never writes through a planted link.
    let victim = ybs.outside().join("victim.txt");
    std::fs::write(&victim, "mine\n").unwrap();
    std::os::unix::fs::symlink(&victim, ybs.path().join("linked.html")).unwrap();
    ybs.run(["report", "html", "ybs-out", "--to", "linked.html"])
        .expect_code(0);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    check_raw(&ybs.read("linked.html"));

    let Some(chromium) = browser() else {
        println!("SKIPPED: no headless Chromium (set YBS_CHROMIUM, or install chromium)");
        return;
    };
    let page = out.join("report.html");
    // #open=all: every task and call expanded.
    let dom = dump_dom(&chromium, &page, "open=all");
    check_dom_safe(&dom);
    for (id, status) in [
        ("passes", "passed"),
        ("fails", "failed"),
        ("waits", "paused"),
    ] {
        assert!(
            dom.contains(&format!("data-task=\"{id}\""))
                && dom.contains(&format!("{id} — {status}")),
            "{id} {status}"
        );
    }
    // Keyboard: every control is a native one (a link, a select, the
    // search field, a button, a <details>' summary), none taken out of
    // the tab order; light and dark: the style follows the system's mode
    // and marks the focus.
    for control in [
        "<select data-filter=\"status\" id=\"filter-status\">",
        "<select data-filter=\"reason\" id=\"filter-reason\">",
        "<input type=\"search\" id=\"search\"",
        "<button type=\"button\" id=\"expand\">collapse all</button>",
        "<summary>passes — passed",
    ] {
        assert!(dom.contains(control), "{control}");
    }
    for bad in ["tabindex=", "onclick", "<div role=\"button\""] {
        assert!(!dom.contains(bad), "{bad}");
    }
    assert!(
        html.contains(":root{color-scheme:light dark;")
            && html.contains("@media (prefers-color-scheme:dark){:root{--bg:")
            && html.contains(":focus-visible{outline:2px solid var(--focus)"),
        "light and dark, and a visible focus"
    );
    // A tool call's command and its rule; the pending approval's command.
    assert!(dom.contains("TOOL-OUTPUT-MARK"), "tool output");
    assert!(dom.contains("run_shell(echo *)"), "the allowing rule");
    assert!(
        dom.contains("npm publish --tag next") && dom.contains("ask[0] run_shell(npm publish*)")
    );
    // The failing check's output, escaped; the patch of the passing task.
    assert!(
        dom.contains("BROKEN-CHECK-OUTPUT &lt;/script&gt;&lt;img"),
        "check output"
    );
    assert!(dom.contains("build &lt;b&gt;check&lt;/b&gt;"));
    // The passing task's commit (message, trailers, diff); the failing
    // task's changes.patch.
    assert!(dom.contains("+hello from passes"), "the diff");
    assert!(
        dom.contains("commit.patch") && dom.contains("Ybs-Task: passes"),
        "the commit"
    );
    assert!(dom.contains("+attempted fix"), "the patch");
    // The model's Markdown heading rendered as text, the payload as text.
    assert!(dom.contains("<strong>Done</strong>"));
    assert!(dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"));
    assert!(dom.contains("\\u{202e}evil"));
    assert!(dom.contains("href=\"passes/transcript.json\""));

    // #task=ID: that task alone, open.
    let dom = dump_dom(&chromium, &page, "task=fails");
    check_dom_safe(&dom);
    assert!(dom.contains("<details class=\"task\" open=\"\" data-task=\"fails\""));
    assert!(!dom.contains("<details class=\"task\" open=\"\" data-task=\"passes\""));
    assert!(dom.contains("BROKEN-CHECK-OUTPUT"));

    // Filters through the fragment: by status, and a text search.
    let dom = dump_dom(&chromium, &page, "status=failed");
    assert!(dom.contains("<tr data-task=\"fails\""));
    assert!(!dom.contains("<tr data-task=\"passes\"") && dom.contains("1 of 3 tasks shown"));
    let dom = dump_dom(&chromium, &page, "q=npm%20publish");
    assert!(dom.contains("1 of 3 tasks shown") && dom.contains("<tr data-task=\"waits\""));
    // The filters are part of every link the page makes: following one
    // keeps the view; a filter with a task selects it among those shown.
    let dom = dump_dom(&chromium, &page, "status=failed&q=fix&task=fails");
    check_dom_safe(&dom);
    assert!(
        dom.contains("1 of 3 tasks shown"),
        "filters from the fragment"
    );
    assert!(
        dom.contains("<a href=\"#status=failed&amp;q=fix&amp;task=fails\">fails</a>"),
        "a task's link keeps the filters"
    );
    assert!(
        dom.contains("<option value=\"failed\" selected"),
        "the status filter"
    );
    assert!(dom.contains("<details class=\"task\" open=\"\" data-task=\"fails\""));
    // Not a filter of ours, or a status no task has: nothing is thrown away
    // silently, and no task matches.
    let dom = dump_dom(&chromium, &page, "status=skipped");
    assert!(dom.contains("0 of 3 tasks shown"), "an unmatched filter");
    assert!(dom.contains("<option value=\"skipped\" selected"), "{dom}");
    // Changing the filters writes them back to the fragment: a driver page
    // (its own, not the report's, script; file access between the two
    // allowed for it alone) opens the report in a frame at #status=failed,
    // clears the status, types a search, presses "expand all", and
    // notes the report's fragment after each.
    ybs.file(
        "driver.html",
        "<!DOCTYPE html><html><body><iframe id=\"f\" src=\"ybs-out/report.html#status=failed&task=fails\"></iframe>\
         <script>var f = document.getElementById('f'); var seen = [];\
         f.addEventListener('load', function () {\
           var d = f.contentDocument, w = f.contentWindow;\
           seen.push(w.location.hash);\
           var status = d.getElementById('filter-status'); status.value = ''; status.dispatchEvent(new Event('change'));\
           seen.push(w.location.hash);\
           var q = d.getElementById('search'); q.value = 'npm publish'; q.dispatchEvent(new Event('input'));\
           seen.push(w.location.hash + ' ' + d.body.textContent.match(/\\d+ of \\d+ tasks shown/)[0]);\
           d.getElementById('expand').click();\
           seen.push(w.location.hash);\
           document.body.setAttribute('data-seen', seen.join('|'));\
         });</script></body></html>",
    );
    let dom = dump_dom_with(
        &chromium,
        &ybs.path().join("driver.html"),
        "",
        &["--allow-file-access-from-files"],
    );
    assert!(
        dom.contains(
            "data-seen=\"#status=failed&amp;task=fails|#task=fails|#q=npm%20publish&amp;task=fails 1 of 3 tasks shown|\
             #q=npm%20publish&amp;task=fails&amp;open=all\""
        ),
        "{dom}"
    );

    // The hostile task id renders as text, and its link stays relative.
    let dom = dump_dom(&chromium, &ybs.path().join("all.html"), "open=all");
    check_dom_safe(&dom);
    assert!(
        dom.contains("x\\u{202e}&lt;img src=x onerror=alert(1)&gt;"),
        "hostile id"
    );
    assert!(
        dom.contains("href=\"x%E2%80%AE%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E/transcript.json\"")
    );
}

/// The DOM of `page` at `fragment` in Chromium, or `None` (said) when
/// no browser can be had.
fn dom_or_skip(page: &Path, fragment: &str) -> Option<String> {
    let Some(chromium) = browser() else {
        println!("SKIPPED: no headless Chromium (set YBS_CHROMIUM, or install chromium)");
        return None;
    };
    let dom = dump_dom(&chromium, page, fragment);
    check_dom_safe(&dom);
    Some(dom)
}

/// The `<tr>` of the page's table row marked `attribute="value"`.
fn row<'a>(dom: &'a str, attribute: &str, value: &str) -> &'a str {
    let start = dom
        .find(&format!("<tr {attribute}=\"{value}\""))
        .unwrap_or_else(|| panic!("no row {attribute}={value}"));
    let end = start + dom[start..].find("</tr>").unwrap();
    &dom[start..end]
}

/// `--models alpha,beta --repeat 2`: the overview's pass rates (flaky
/// when the runs are mixed) and the task × model matrix, in the browser.
#[test]
fn the_overview_shows_pass_rates_and_the_model_matrix() {
    use crate::support::server::Server;
    use crate::support::wire;

    let ybs = Ybs::new();
    // `shaky`'s check passes the first time only, of all its four runs.
    let flag = ybs.path().join("flag");
    ybs.file(
        "t.yaml",
        &format!(
            "defaults:\n  policy:\n    default: allow\ntasks:\n  - id: steady\n    prompt: do steady\n  \
             - id: shaky\n    prompt: do shaky\n    checks:\n      - name: once\n        run: mkdir {}\n",
            flag.display()
        ),
    );
    let server = Server::start((0..8).map(|_| wire::openai_sse_answer("done")).collect());
    let endpoint = format!("{}/v1", server.url);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--no-sandbox",
        "--models",
        "alpha,beta",
        "--repeat",
        "2",
        "--jobs",
        "1",
    ]);
    run.expect_code(1);
    let html = ybs.read("ybs-out/report.html");
    check_raw(&html);
    let Some(dom) = dom_or_skip(&ybs.path().join("ybs-out/report.html"), "") else {
        return;
    };
    assert!(dom.contains("<h2>Pass rates</h2>") && dom.contains("<h2>Models</h2>"));
    for model in ["alpha", "beta"] {
        let steady = row(&dom, "data-rate", &format!("steady@{model}"));
        assert!(
            steady.contains("2/2 (100%)") && steady.contains(">passed<"),
            "{steady}"
        );
        assert!(steady.contains(&format!("href=\"#task=steady%40{model}%232\"")));
    }
    // Exactly one of shaky's four runs passed: its model is flaky (1/2),
    // the other failed (0/2).
    let rates: Vec<&str> = ["alpha", "beta"]
        .iter()
        .map(|model| row(&dom, "data-rate", &format!("shaky@{model}")))
        .collect();
    let flaky = rates
        .iter()
        .filter(|rate| rate.contains("1/2 (50%)") && rate.contains(">flaky<"))
        .count();
    let failed = rates
        .iter()
        .filter(|rate| rate.contains("0/2 (0%)") && rate.contains(">failed<"))
        .count();
    assert_eq!((flaky, failed), (1, 1), "{rates:?}");
    // The matrix: a row per task, a column per model, each cell the
    // verdict of that task with that model.
    assert!(dom.contains("<th>task</th><th>alpha</th><th>beta</th>"));
    let steady = row(&dom, "data-matrix", "steady");
    assert_eq!(steady.matches(">passed</a>").count(), 2, "{steady}");
    let shaky = row(&dom, "data-matrix", "shaky");
    assert!(
        shaky.contains(">flaky</a><span class=\"kv\"> 1/2 (50%)</span>")
            && shaky.contains(">failed</a><span class=\"kv\"> 0/2 (0%)</span>"),
        "{shaky}"
    );
    assert!(shaky.contains("data-model=\"alpha\"") && shaky.contains("data-model=\"beta\""));
    // No shard here: no shard table.
    assert!(!dom.contains("<h2>Shards</h2>"));
}

/// Three `--shard auto` machines (YBS_SHARD_* from 0), merged: the merged
/// page names each shard, its engine and split, and its tasks, each task
/// once.
#[test]
fn a_merged_report_shows_each_shard_and_its_tasks() {
    const IDS: [&str; 6] = ["s1", "s2", "s3", "s4", "s5", "s6"];
    let ybs = Ybs::new();
    let mut yaml = String::from("tasks:\n");
    for id in IDS {
        yaml.push_str(&format!("  - id: {id}\n    prompt: do {id}\n"));
    }
    ybs.file("tasks/batch.yaml", &yaml);
    ybs.cassette(
        "tasks/batch.cassette.json",
        IDS.iter()
            .map(|id| for_task(id, answer(&format!("{id} done"))))
            .collect(),
    );
    for k in 0..3 {
        let output = ybs
            .command()
            .env("YBS_SHARD_INDEX", k.to_string())
            .env("YBS_SHARD_TOTAL", "3")
            .args([
                "run",
                "tasks",
                "--shard",
                "auto",
                "--out",
                &format!("out-{k}"),
            ])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
    }
    ybs.run([
        "report", "merge", "out-0", "out-1", "out-2", "--out", "merged",
    ])
    .expect_code(0);
    check_raw(&ybs.read("merged/report.html"));
    let Some(dom) = dom_or_skip(&ybs.path().join("merged/report.html"), "") else {
        return;
    };
    assert!(dom.contains("<h2>Shards</h2>"));
    let mut seen = Vec::new();
    for k in 1..=3 {
        let shard = format!("{k}/3");
        let listed = ybs.json(&format!("out-{}/shard.json", k - 1));
        let line = row(&dom, "data-shard", &shard);
        assert!(
            line.contains("<td>ybs</td><td>hash</td>"),
            "engine and split: {line}"
        );
        // The row lists the tasks the shard ran, as its shard.json does.
        for task in listed["tasks"].as_array().unwrap() {
            let id = task.as_str().unwrap();
            assert!(
                line.contains(&format!("<a href=\"#task={id}\">{id}</a>")),
                "{id} in {line}"
            );
            seen.push(id.to_owned());
        }
        assert_eq!(
            line.matches("<a ").count(),
            listed["tasks"].as_array().unwrap().len()
        );
    }
    seen.sort_unstable();
    assert_eq!(seen, IDS, "each task in exactly one shard's row");
    // A single shard's own page shows its one shard.
    let Some(dom) = dom_or_skip(&ybs.path().join("out-0/report.html"), "") else {
        return;
    };
    assert!(dom.contains("<tr data-shard=\"1/3\"") && !dom.contains("data-shard=\"2/3\""));
}
