//! Rough edges a new user hit (issue 40): each said plainly.

use serde_json::json;

use crate::support::Ybs;

#[test]
fn a_cassette_recorded_under_another_task_id_names_the_ids() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "id: t\nprompt: hi\ncommit: false\n");
    let answer = |task: &str| json!({"task": task, "response": {"content": "done", "usage": {"input_tokens": 1, "output_tokens": 1}}});
    ybs.cassette("t.cassette.json", vec![answer("old-id"), answer("old-id")]);
    let run = ybs.run(["run", "t.yaml", "--provider", "replay"]);
    run.expect_code(4);
    let printed = format!("{}{}", run.stdout, run.stderr);
    assert!(
        printed
            .contains("nothing was recorded for task `t`; the cassette holds the tasks `old-id`"),
        "{printed}"
    );
}
