//! Where a failing check points: `file:line[:col]` locations read from
//! its output in the formats of the usual compilers, linters and test
//! runners (docs/ci.md#annotations-on-the-failing-line), and the GitHub
//! workflow command that annotates each.
//!
//! [`scan`] only reads text; which of the paths it finds are inside the
//! repository is decided by the runner, which knows the check's working
//! directory and the repository's root.

use super::log::{escape_data, escape_property, neutralize};

/// The most locations kept per check.
pub const MAX_PER_CHECK: usize = 10;
/// The most characters of a location's message.
const MESSAGE_CHARS: usize = 300;

/// A location as a tool printed it: the path is as written, relative to
/// the check's working directory or absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: String,
    pub line: u32,
    pub column: Option<u32>,
    pub message: String,
}

/// Every error location in `output`, in order, each once. Formats:
///
/// - rustc/cargo: `error[E0308]: mismatched types` then ` --> src/lib.rs:3:5`,
///   and a test's `panicked at src/lib.rs:10:5:` then its message;
/// - gcc/clang: `file.c:3:5: error: msg` (also `fatal error:`);
/// - tsc: `file.ts(3,5): error TS2322: msg`;
/// - eslint (stylish): a line with the file's path, then `  3:5  error  msg  rule`;
/// - pytest: `path.py:3: AssertionError`, `path.py:3: in test_x`;
/// - go vet: `./x.go:3:5: msg`;
/// - mypy: `x.py:3: error: msg`.
///
/// Warnings and notes are left out.
pub fn scan(output: &str) -> Vec<Found> {
    let lines: Vec<&str> = output.lines().collect();
    let mut found: Vec<Found> = Vec::new();
    // rustc: the header line above ` --> `.
    let mut rust_header: Option<&str> = None;
    // eslint stylish: the file whose entries follow.
    let mut eslint_file: Option<&str> = None;
    for (index, raw) in lines.iter().enumerate() {
        let line = raw.trim_end();
        let location = if let Some(header) = rust_error_header(line) {
            rust_header = Some(header);
            eslint_file = None;
            None
        } else if let Some(rest) = line.trim_start().strip_prefix("--> ") {
            rust_header
                .take()
                .and_then(|header| path_line_col(rest.trim(), header))
        } else if let Some(found) = rust_panic(line, lines.get(index + 1).copied()) {
            Some(found)
        } else if let Some(found) = tsc(line) {
            Some(found)
        } else if let Some(found) = eslint_file.and_then(|file| eslint_entry(line, file)) {
            Some(found)
        } else if let Some(found) = colon_form(line) {
            eslint_file = None;
            Some(found)
        } else {
            if line.starts_with("warning") {
                rust_header = None;
            }
            if is_eslint_header(line) {
                eslint_file = Some(line);
            } else if line.is_empty() || !line.starts_with(char::is_whitespace) {
                eslint_file = eslint_file.filter(|_| line.is_empty());
            }
            None
        };
        if let Some(location) = location
            && !found.iter().any(|other| {
                other.path == location.path
                    && other.line == location.line
                    && other.column == location.column
            })
        {
            found.push(location);
        }
    }
    found
}

/// `error[E0308]: mismatched types` or `error: …`: the line, the
/// message of the ` --> ` below it; `warning: …` is none.
fn rust_error_header(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("error")?;
    let rest = match rest.strip_prefix('[') {
        Some(code) => code.get(code.find(']')? + 1..)?,
        None => rest,
    };
    rest.starts_with(": ").then_some(line)
}

/// `thread 't' panicked at src/lib.rs:10:5:` and the message on the next line.
fn rust_panic(line: &str, next: Option<&str>) -> Option<Found> {
    let (_, rest) = line.split_once("panicked at ")?;
    let location = rest.trim_end().strip_suffix(':').unwrap_or(rest.trim_end());
    let message = next.map_or("panicked", str::trim);
    path_line_col(location, &format!("panicked: {message}"))
}

/// `file.ts(3,5): error TS2322: msg`.
fn tsc(line: &str) -> Option<Found> {
    let (head, message) = line.split_once("): ")?;
    if !message.starts_with("error") {
        return None;
    }
    let (path, numbers) = head.rsplit_once('(')?;
    let (line_no, column) = numbers.split_once(',')?;
    let path = path.trim();
    if !looks_like_path(path) {
        return None;
    }
    Some(Found {
        path: path.to_owned(),
        line: number(line_no)?,
        column: Some(number(column)?),
        message: clip(message),
    })
}

/// A stylish header: a path alone on its line, with an extension.
fn is_eslint_header(line: &str) -> bool {
    !line.is_empty()
        && !line.starts_with(char::is_whitespace)
        && !line.contains(' ')
        && !line.contains(':')
        && looks_like_path(line)
        || line.starts_with('/') && !line.contains(": ") && looks_like_path(line)
}

/// `  3:5  error  msg  rule` under the file `file`.
fn eslint_entry(line: &str, file: &str) -> Option<Found> {
    if !line.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = line.trim_start();
    let (position, rest) = rest.split_once(char::is_whitespace)?;
    let (line_no, column) = position.split_once(':')?;
    let rest = rest.trim_start();
    let message = rest.strip_prefix("error")?;
    if !message.starts_with(char::is_whitespace) {
        return None;
    }
    Some(Found {
        path: file.to_owned(),
        line: number(line_no)?,
        column: Some(number(column)?),
        message: clip(message.trim()),
    })
}

/// `path:line[:col]: message` — gcc/clang, go vet, mypy, pytest — with
/// warnings and notes left out.
fn colon_form(line: &str) -> Option<Found> {
    if line.starts_with(char::is_whitespace) {
        return None;
    }
    let (location, message) = line.split_once(": ")?;
    let message = message.trim();
    let lower = message.to_ascii_lowercase();
    if ["warning", "note", "info", "hint", "remark"]
        .iter()
        .any(|word| lower.starts_with(word))
    {
        return None;
    }
    let message = message
        .strip_prefix("fatal error: ")
        .or_else(|| message.strip_prefix("error: "))
        .unwrap_or(message);
    path_line_col(location, message)
}

/// `src/lib.rs:3:5` or `src/lib.rs:3`, with `message`.
fn path_line_col(text: &str, message: &str) -> Option<Found> {
    let mut parts = text.rsplitn(3, ':');
    let last = parts.next()?;
    let middle = parts.next()?;
    let (path, line_no, column) = match parts.next() {
        Some(path) if number(middle).is_some() => (path, middle, Some(last)),
        Some(_) => return None,
        None => (middle, last, None),
    };
    if !looks_like_path(path) {
        return None;
    }
    Some(Found {
        path: path.to_owned(),
        line: number(line_no)?,
        column: match column {
            Some(column) => Some(number(column)?),
            None => None,
        },
        message: clip(message),
    })
}

/// A file name with an extension, no blank, no URL scheme.
fn looks_like_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    !path.is_empty()
        && !path.contains("://")
        && !path.contains(char::is_whitespace)
        && !path.starts_with('<')
        && name.rsplit_once('.').is_some_and(|(stem, extension)| {
            !stem.is_empty()
                && !extension.is_empty()
                && extension.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

/// A line or column number: 1 or more.
fn number(text: &str) -> Option<u32> {
    text.trim().parse().ok().filter(|n| *n > 0)
}

fn clip(message: &str) -> String {
    let message = message.trim();
    match message.char_indices().nth(MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None => message.to_owned(),
    }
}

/// `::error file=…,line=…,col=…,title=…::message`: the path, title and
/// message neutralized, then escaped as GitHub expects (the message:
/// `%`, `\r`, `\n`; the properties also `:` and `,`). One line.
pub fn workflow_command(
    file: &str,
    line: u32,
    column: Option<u32>,
    title: &str,
    message: &str,
) -> String {
    let column = column
        .map(|column| format!(",col={column}"))
        .unwrap_or_default();
    format!(
        "::error file={},line={line}{column},title={}::{}",
        escape_property(&neutralize(file)),
        escape_property(&neutralize(title)),
        escape_data(&neutralize(message))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str, line: u32, column: Option<u32>, message: &str) -> Found {
        Found {
            path: path.to_owned(),
            line,
            column,
            message: message.to_owned(),
        }
    }

    #[test]
    fn rustc_and_cargo() {
        let output = "   Compiling demo v0.1.0\n\
            warning: unused variable: `x`\n --> src/main.rs:1:5\n\
            error[E0308]: mismatched types\n --> src/lib.rs:3:5\n  |\n3 |     \"x\"\n  |     ^^^ expected `u32`\n\n\
            error: could not compile `demo`\n";
        assert_eq!(
            scan(output),
            [at(
                "src/lib.rs",
                3,
                Some(5),
                "error[E0308]: mismatched types"
            )]
        );
        let panic = "test tests::adds ... FAILED\n\nthread 'tests::adds' panicked at src/lib.rs:10:5:\nassertion `left == right` failed\n";
        assert_eq!(
            scan(panic),
            [at(
                "src/lib.rs",
                10,
                Some(5),
                "panicked: assertion `left == right` failed"
            )]
        );
    }

    #[test]
    fn gcc_and_clang() {
        let output = "hello.c: In function 'main':\nhello.c:3:5: error: expected ';' before 'return'\nhello.c:2:1: warning: unused\nhello.c:4:1: note: here\nsrc/x.h:9:2: fatal error: y.h: No such file or directory\n";
        assert_eq!(
            scan(output),
            [
                at("hello.c", 3, Some(5), "expected ';' before 'return'"),
                at("src/x.h", 9, Some(2), "y.h: No such file or directory"),
            ]
        );
    }

    #[test]
    fn tsc() {
        let output =
            "src/app.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.\n";
        assert_eq!(
            scan(output),
            [at(
                "src/app.ts",
                3,
                Some(5),
                "error TS2322: Type 'string' is not assignable to type 'number'."
            )]
        );
    }

    #[test]
    fn eslint_stylish() {
        let output = "\n/home/runner/work/app/src/a.js\n  3:5   error    'x' is assigned a value but never used  no-unused-vars\n  7:1   warning  Unexpected console statement            no-console\n\nsrc/b.js\n  1:10  error  Missing semicolon  semi\n\n✖ 3 problems (2 errors, 1 warning)\n";
        assert_eq!(
            scan(output),
            [
                at(
                    "/home/runner/work/app/src/a.js",
                    3,
                    Some(5),
                    "'x' is assigned a value but never used  no-unused-vars"
                ),
                at("src/b.js", 1, Some(10), "Missing semicolon  semi"),
            ]
        );
    }

    #[test]
    fn pytest() {
        let output = "    def test_add():\n>       assert add(1, 2) == 4\nE       assert 3 == 4\n\ntests/test_add.py:3: AssertionError\n____ test_y ____\ntests/test_y.py:8: in test_y\n    helper()\n";
        assert_eq!(
            scan(output),
            [
                at("tests/test_add.py", 3, None, "AssertionError"),
                at("tests/test_y.py", 8, None, "in test_y"),
            ]
        );
    }

    #[test]
    fn go_vet() {
        let output =
            "# example.com/x\n./x.go:3:5: fmt.Printf format %d has arg s of wrong type string\n";
        assert_eq!(
            scan(output),
            [at(
                "./x.go",
                3,
                Some(5),
                "fmt.Printf format %d has arg s of wrong type string"
            )]
        );
    }

    #[test]
    fn mypy() {
        let output = "x.py:3: error: Incompatible return value type (got \"str\", expected \"int\")  [return-value]\nx.py:4: note: See docs\nFound 1 error in 1 file (checked 1 source file)\n";
        assert_eq!(
            scan(output),
            [at(
                "x.py",
                3,
                None,
                "Incompatible return value type (got \"str\", expected \"int\")  [return-value]"
            )]
        );
    }

    #[test]
    fn not_locations() {
        for text in [
            "error: could not compile `demo` (lib) due to 1 previous error",
            "Listening on http://localhost:8080: ok",
            "at 12:30:05: the clock",
            "FAILED tests/test_add.py::test_add - assert 3 == 4",
            "src/lib.rs:0:1: error: line zero",
        ] {
            assert_eq!(scan(text), [], "{text}");
        }
        let repeated = "a.c:1:1: error: x\na.c:1:1: error: x\n";
        assert_eq!(scan(repeated).len(), 1);
    }

    #[test]
    fn the_workflow_command_is_escaped() {
        assert_eq!(
            workflow_command("src/a,b:c.rs", 3, Some(5), "t/check", "50% done\nnext"),
            "::error file=src/a%2Cb%3Ac.rs,line=3,col=5,title=t/check::50%25 done%0Anext"
        );
        assert_eq!(
            workflow_command("x.py", 3, None, "t/a::b", "::add-mask::s"),
            "::error file=x.py,line=3,title=t/a%3A%3Ab::| ::add-mask::s"
        );
    }
}
