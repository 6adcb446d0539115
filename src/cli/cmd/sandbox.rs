//! `ybs sandbox check`: each layer of the kernel confinement, what is
//! missing and why, and the fix when AppArmor is the cause
//! (docs/sandbox.md, "Checking the machine"). Exit 0 when every layer
//! works, 4 (the machine, not the input) when one is missing.

use super::super::args::SandboxCheckArgs;
use crate::core::{Environ, exit};
use crate::report::Level;
use crate::runner::sandbox_check::{self, SandboxCheck};

pub fn check(args: &SandboxCheckArgs, environ: &Environ) -> u8 {
    let check = sandbox_check::check();
    let printer = super::common::printer(Level::Normal, false, environ);
    if args.json {
        let text = serde_json::to_string(&check).unwrap_or_default();
        printer.result(&text);
    } else {
        for line in lines(&check) {
            printer.result(&line);
        }
    }
    if check.ok {
        return exit::OK;
    }
    let names: Vec<&str> = check
        .layers
        .iter()
        .filter(|layer| !layer.ok)
        .map(|layer| layer.layer)
        .collect();
    printer.error(&format!(
        "error: kernel confinement is incomplete here: {} missing",
        names.join(", ")
    ));
    printer.error(if check.cause.is_some() {
        "hint: apply the fix above (the ybs GitHub Action does it on hosted runners), then run `ybs sandbox check` again"
    } else {
        "hint: tasks that run programs refuse to start here; run ybs where user namespaces, Landlock and seccomp work, accept Landlock and seccomp alone in operator config (safety.sandbox_require: landlock), or pass --no-sandbox to run unconfined (docs/sandbox.md)"
    });
    exit::INFRA
}

fn lines(check: &SandboxCheck) -> Vec<String> {
    let mut lines: Vec<String> = check
        .layers
        .iter()
        .chain(std::iter::once(&check.exec_guard))
        .map(|layer| {
            let state = if layer.ok { "ok" } else { "missing" };
            match &layer.detail {
                Some(detail) if layer.ok => format!("{:<11}{state} ({detail})", layer.layer),
                Some(detail) => format!("{:<11}{state}: {detail}", layer.layer),
                None => format!("{:<11}{state}", layer.layer),
            }
        })
        .collect();
    if let Some(cause) = &check.cause {
        lines.push(format!("cause: {cause}"));
        lines.push(
            "fix: let this one binary make user namespaces with a narrow AppArmor profile (as Ubuntu documents for bwrap); never turn the restriction off machine-wide:"
                .to_owned(),
        );
        lines.extend(check.fix.iter().map(|command| format!("  {command}")));
    }
    if !check.exec_guard.ok {
        lines.push(
            "note: without the exec guard (optional), code the policy cannot read does not run while deny rules on run_shell exist"
                .to_owned(),
        );
    }
    if check.ok {
        lines.push("ok: every layer works; tasks run fully confined".to_owned());
    }
    lines
}
