//! Output hygiene for CI logs (docs/security.md S8).
//!
//! Text from the model or from tools is attacker-controlled. Before it is
//! printed to a CI log it goes through [`neutralize`], so it cannot forge
//! GitHub workflow commands (`::set-output`, `::add-mask::`, `##[group]`),
//! move the cursor or recolour the terminal, or reorder what a reader sees
//! with bidi controls. [`github_annotation`] builds ybs's own `::error`
//! lines with GitHub's escaping.

use std::fmt::Write as _;

/// Makes `text` safe to print to a CI log.
///
/// - ANSI escape sequences (CSI, OSC, two-byte escapes) are removed;
/// - every other C0/C1 control character except `\n` and `\t` is shown as
///   a visible escape (`\x07`, `\u{9b}`); `\r\n` becomes `\n`;
/// - bidi embeddings, overrides and isolates (U+202A–U+202E,
///   U+2066–U+2069), U+2028/U+2029 and the noncharacters U+FFFE/U+FFFF are
///   shown as `\u{…}`;
/// - a line whose first visible characters are `::` or `##[` is prefixed
///   with `| `, and every `##[` becomes `# #[` (the runner's legacy command
///   parser finds `##[` anywhere in a line).
pub fn neutralize(text: &str) -> String {
    let clean = neutralize_chars(text);
    let mut out = String::with_capacity(clean.len() + 8);
    for (index, line) in clean.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        if is_workflow_command(line) {
            out.push_str(COMMAND_PREFIX);
        }
        out.push_str(&line.replace("##[", "# #["));
    }
    out
}

/// The prefix that defuses a line that would be a workflow command.
pub const COMMAND_PREFIX: &str = "| ";

/// The character-level half of [`neutralize`]: strips ANSI sequences and
/// escapes control, bidi and non-characters, leaving lines as they are.
/// Used for files (JUnit, Markdown) where workflow commands are inert.
pub fn neutralize_chars(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\x1b' => {
                if !skip_escape_sequence(&mut chars) {
                    push_escaped(&mut out, c);
                }
            }
            c if needs_escape(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// The kind of a GitHub annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnotationKind {
    Error,
    Warning,
    Notice,
}

impl AnnotationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Notice => "notice",
        }
    }
}

/// One GitHub workflow annotation line, e.g.
/// `::error title=task%3A refactor::check failed%0Aoutput`.
///
/// Title and message are neutralized first, then escaped as GitHub
/// expects: in the message `%`, `\r`, `\n`; in the title also `:` and `,`.
/// The result is a single line without a trailing newline.
pub fn github_annotation(kind: AnnotationKind, title: &str, message: &str) -> String {
    let title = escape_property(&neutralize(title));
    let message = escape_data(&neutralize(message));
    if title.is_empty() {
        format!("::{}::{message}", kind.as_str())
    } else {
        format!("::{} title={title}::{message}", kind.as_str())
    }
}

/// GitHub's escaping for the data part of a workflow command.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// GitHub's escaping for a property value of a workflow command.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// True if and only if `line` would be read as a workflow command: after
/// whitespace and invisible characters it starts with `::` or `##[`.
fn is_workflow_command(line: &str) -> bool {
    let visible = line.trim_start_matches(|c: char| c.is_whitespace() || is_invisible(c));
    visible.starts_with("::") || visible.starts_with("##[")
}

/// Zero-width characters that `char::is_whitespace` does not cover.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{FFFE}'
                | '\u{FFFF}'
        )
}

fn push_escaped(out: &mut String, c: char) {
    let code = u32::from(c);
    // Writing to a String cannot fail.
    let _ = if code < 0x80 {
        write!(out, "\\x{code:02x}")
    } else {
        write!(out, "\\u{{{code:x}}}")
    };
}

/// Consumes the rest of an escape sequence whose ESC was just read.
/// Returns false, consuming nothing, when what follows is not a complete
/// sequence; the ESC is then shown escaped and the rest printed as text.
fn skip_escape_sequence(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    let mut lookahead = chars.clone();
    let complete = match lookahead.next() {
        // CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E.
        Some('[') => loop {
            match lookahead.next() {
                Some('\x30'..='\x3f' | '\x20'..='\x2f') => {}
                Some('\x40'..='\x7e') => break true,
                _ => break false,
            }
        },
        // OSC: up to BEL or ST (ESC \), bounded so a lone ESC ] cannot
        // swallow the rest of the output.
        Some(']') => {
            let mut found = false;
            for _ in 0..4096 {
                match lookahead.next() {
                    Some('\x07') => {
                        found = true;
                        break;
                    }
                    Some('\x1b') => {
                        found = lookahead.next() == Some('\\');
                        break;
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            found
        }
        // nF / Fp / Fe / Fs escapes: intermediates, then one final byte.
        Some('\x20'..='\x2f') => loop {
            match lookahead.next() {
                Some('\x20'..='\x2f') => {}
                Some('\x30'..='\x7e') => break true,
                _ => break false,
            }
        },
        Some('\x30'..='\x7e') => true,
        _ => false,
    };
    if complete {
        *chars = lookahead;
    }
    complete
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defuses_workflow_commands_at_line_start() {
        assert_eq!(
            neutralize("::set-output name=x::y"),
            "| ::set-output name=x::y"
        );
        assert_eq!(
            neutralize("ok\n  ::add-mask::secret"),
            "ok\n|   ::add-mask::secret"
        );
        assert_eq!(
            neutralize("\u{a0}\u{200b}::error::x"),
            "| \u{a0}\u{200b}::error::x"
        );
        assert_eq!(neutralize("::stop-commands::tok"), "| ::stop-commands::tok");
        // Not at the start of a line: inert for the V2 parser.
        assert_eq!(neutralize("a ::b::c"), "a ::b::c");
    }

    #[test]
    fn defuses_legacy_commands_anywhere() {
        let out = neutralize("##[group]title\nsee ##[add-mask]x and ###[y]");
        assert_eq!(out, "| # #[group]title\nsee # #[add-mask]x and ## #[y]");
        assert!(!out.contains("##["));
    }

    #[test]
    fn a_carriage_return_cannot_start_a_hidden_line() {
        let out = neutralize("harmless\r::set-env name=A::b");
        assert_eq!(out, "harmless\\x0d::set-env name=A::b");
        assert_eq!(neutralize("a\r\nb\r\n"), "a\nb\n");
        // After CRLF normalisation a command line is still caught.
        assert_eq!(neutralize("a\r\n::warning::x"), "a\n| ::warning::x");
    }

    #[test]
    fn strips_ansi_and_escapes_other_controls() {
        assert_eq!(neutralize("\x1b[31mred\x1b[0m"), "red");
        assert_eq!(neutralize("\x1b[1;2;3Hx"), "x");
        assert_eq!(neutralize("\x1b]0;title\x07x"), "x");
        assert_eq!(
            neutralize("\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\"),
            "link"
        );
        assert_eq!(neutralize("\x1b(Bx"), "x");
        assert_eq!(
            neutralize("bell\x07 nul\x00 del\x7f"),
            "bell\\x07 nul\\x00 del\\x7f"
        );
        assert_eq!(neutralize("c1\u{9b}31m"), "c1\\u{9b}31m");
        // An unterminated sequence is shown, not swallowed.
        assert_eq!(neutralize("x\x1b[31"), "x\\x1b[31");
        assert_eq!(neutralize("x\x1b]no end"), "x\\x1b]no end");
        assert_eq!(neutralize("tab\tnew\nline"), "tab\tnew\nline");
        let out = neutralize("\x1b[2J\x1b[H::add-mask::x");
        assert!(out.starts_with("| ::add-mask::"), "{out}");
    }

    #[test]
    fn escapes_bidi_and_line_separators() {
        let out = neutralize("if admin \u{202E} }\u{2066}x\u{2069}\u{2028}::y");
        assert_eq!(out, "if admin \\u{202e} }\\u{2066}x\\u{2069}\\u{2028}::y");
        assert_eq!(neutralize("\u{fffe}"), "\\u{fffe}");
        assert_eq!(neutralize("héllo ✓ 日本"), "héllo ✓ 日本");
    }

    #[test]
    fn annotations_escape_data_and_properties() {
        assert_eq!(
            github_annotation(AnnotationKind::Error, "task: a,b", "50% done\nnext\r"),
            "::error title=task%3A a%2Cb::50%25 done%0Anext\\x0d"
        );
        assert_eq!(
            github_annotation(AnnotationKind::Warning, "", "x"),
            "::warning::x"
        );
        let line = github_annotation(
            AnnotationKind::Error,
            "t",
            "ok\n::add-mask::s\n\x1b[31m##[group]g",
        );
        assert!(!line.contains('\n'));
        assert!(!line.contains('\x1b'));
        assert!(!line.contains("##["));
        assert_eq!(
            line,
            "::error title=t::ok%0A| ::add-mask::s%0A| # #[group]g"
        );
        assert_eq!(escape_property("a%:,\n"), "a%25%3A%2C%0A");
    }
}
