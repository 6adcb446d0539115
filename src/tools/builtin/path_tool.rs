//! The file tools (`read_file`, `write_file`, `edit_file`, `list_files`,
//! `search_files`) act on one path argument. Each says which argument and
//! how it is resolved ([`PathArg`]) and how it runs; the `Tool` impl,
//! the policy target included, is written once here.

use std::future::Future;
use std::sync::LazyLock;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::args::Args;
use crate::core::ToolSpec;
use crate::tools::paths::{self, Access};
use crate::tools::{Target, Tool, ToolCtx, ToolError, ToolOutput};

/// How a path argument is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// A path to read (file or directory).
    Read,
    /// A path to write: the tool changes files.
    Write,
    /// An existing directory.
    Dir,
}

/// The argument naming what a file tool acts on, in the tool's spec.
#[derive(Debug, Clone, Copy)]
pub(super) struct PathArg {
    pub spec: &'static LazyLock<ToolSpec>,
    pub name: &'static str,
    /// The value when the argument is optional.
    pub default: Option<&'static str>,
    pub reach: Reach,
    /// The tool needs the path to exist: when it does not, the error
    /// names the nearest existing paths (see `super::missing`).
    pub must_exist: bool,
}

impl PathArg {
    /// The required argument `path`.
    pub const fn path(spec: &'static LazyLock<ToolSpec>, reach: Reach) -> Self {
        Self {
            spec,
            name: "path",
            default: None,
            reach,
            must_exist: !matches!(reach, Reach::Write),
        }
    }

    /// The argument `path`, the workdir (`.`) when omitted.
    pub const fn path_or_workdir(spec: &'static LazyLock<ToolSpec>, reach: Reach) -> Self {
        Self {
            spec,
            name: "path",
            default: Some("."),
            reach,
            must_exist: !matches!(reach, Reach::Write),
        }
    }

    /// The same argument, which must name something that exists (a
    /// path to change in place).
    pub const fn existing(self) -> Self {
        Self {
            must_exist: true,
            ..self
        }
    }
}

/// A built-in tool acting on one path argument.
pub(super) trait PathTool: Send + Sync {
    /// Its spec and path argument; a tool that writes it is mutating.
    const PATH: PathArg;

    /// Runs the call.
    fn run(
        args: Value,
        ctx: &ToolCtx,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send + '_;
}

/// The policy target of a call: its path argument, resolved as
/// `path.reach` says.
pub(super) fn path_target(args: &Value, ctx: &ToolCtx, path: PathArg) -> Result<Target, ToolError> {
    let args = Args::new(args, path.spec)?;
    let raw = match path.default {
        Some(default) => args.opt_string(path.name)?.unwrap_or(default),
        None => args.string(path.name)?,
    };
    let resolved = match path.reach {
        Reach::Read => paths::resolve(ctx, raw, Access::Read)?,
        Reach::Write => paths::resolve(ctx, raw, Access::Write)?,
        Reach::Dir => {
            // A directory that is not there is the call's error (which
            // names what is there instead), decided after the policy.
            let resolved = paths::resolve(ctx, raw, Access::Read)?;
            if resolved.kind.is_some() {
                paths::resolve_dir(ctx, raw)?
            } else {
                resolved
            }
        }
    };
    Ok(Target {
        path: Some(resolved.display),
        command: None,
    })
}

impl<T: PathTool> Tool for T {
    fn spec(&self) -> &ToolSpec {
        T::PATH.spec
    }

    fn is_mutating(&self) -> bool {
        T::PATH.reach == Reach::Write
    }

    fn target(&self, args: &Value, ctx: &ToolCtx) -> Result<Target, ToolError> {
        path_target(args, ctx, T::PATH)
    }

    fn call<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolCtx,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            // A glob, or a path that names nothing the tool can act on:
            // an error that says what exists instead.
            if let Some(error) = super::missing::explain(&args, ctx, T::PATH).await {
                return Err(error);
            }
            T::run(args, ctx).await
        })
    }
}
