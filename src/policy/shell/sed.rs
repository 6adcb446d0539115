//! sed scripts, parsed (GNU syntax) well enough to find every command that
//! runs a program (`e`, the `s///e` flag) or reads or writes a file other
//! than the operands (`r`, `R`, `w`, `W`, the `s///w` flag). A script that
//! does not parse, or one read from a file (`-f`), is a hazard too: what
//! policy cannot read is never auto-allowed.

use super::HazardKind;
use super::SimpleCommand;
use super::execs::abbreviates;
use super::runners::Analysis;

/// What is wrong with a script, for the hazard text.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Finding {
    /// `e` or `s///e`: runs a command.
    Runs,
    /// `r`, `R`, `w`, `W`, `s///w`: touches a file.
    File,
    /// Not understood.
    Unparseable,
}

/// `sed [options] script [file…]`, `sed -e s1 -e s2`, `--expression=`,
/// `-f file`; every option spelling GNU accepts (`-ne`, `-es/a/b/`,
/// `--expr=`, `-i.bak`, options after operands).
pub(super) fn sed(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let Some(script) = script_of(&cmd.argv, analysis) else {
        return;
    };
    let what = match scan(&script) {
        None => return,
        Some(Finding::Runs) => "runs a command",
        Some(Finding::File) => "reads or writes a file",
        Some(Finding::Unparseable) => "not understood",
    };
    analysis.hazard(HazardKind::InlineCode, &format!("sed {script} ({what})"));
}

/// The script sed runs: GNU joins the scripts of several `-e` with
/// newlines; without `-e` it is the first operand. `None` when a script
/// comes from a file (the hazard is said).
fn script_of(argv: &[String], analysis: &mut Analysis) -> Option<String> {
    let mut line = CommandLine {
        argv,
        index: 1,
        scripts: Vec::new(),
        from_option: false,
    };
    let mut operand = None;
    let mut only_operands = false;
    while let Some(word) = argv.get(line.index) {
        line.index += 1;
        if only_operands || !word.starts_with('-') || word == "-" {
            operand.get_or_insert(word.as_str());
        } else if word == "--" {
            only_operands = true;
        } else if word.starts_with("--") {
            line.long(word, analysis)?;
        } else {
            line.cluster(word, analysis)?;
        }
    }
    if !line.from_option {
        line.scripts.extend(operand);
    }
    Some(line.scripts.join("\n"))
}

/// sed's command line, read up to `index`.
struct CommandLine<'a> {
    argv: &'a [String],
    index: usize,
    /// The scripts of `-e` and `--expression`.
    scripts: Vec<&'a str>,
    /// A script came from an option: the operands are all files.
    from_option: bool,
}

impl<'a> CommandLine<'a> {
    /// The word after the option, taken as its value.
    fn value(&mut self) -> Option<&'a str> {
        let value = self.argv.get(self.index).map(String::as_str);
        self.index += 1;
        value
    }

    /// A long option (`--expression=…`, `--file …`); `None` when the
    /// script cannot be read (the hazard is said).
    fn long(&mut self, word: &'a str, analysis: &mut Analysis) -> Option<()> {
        let value = word[2..].split_once('=').map(|(_, v)| v);
        if abbreviates(word, "--expression", 3) {
            self.from_option = true;
            match value {
                Some(script) => self.scripts.push(script),
                None => {
                    let script = self.value();
                    self.scripts.extend(script);
                }
            }
        } else if abbreviates(word, "--file", 4) {
            let file = value.or_else(|| self.argv.get(self.index).map(String::as_str));
            if file.is_some_and(super::programs::is_stdin_path) {
                analysis.hazard(
                    HazardKind::StdinProgram,
                    "sed --file - (a script from stdin)",
                );
            }
            analysis.hazard(
                HazardKind::InlineCode,
                "sed --file (a script policy cannot read)",
            );
            return None;
        } else if abbreviates(word, "--line-length", 3) && value.is_none() {
            self.index += 1;
        } else if word.len() == 3 && "--f".starts_with(word) {
            // `--f` is ambiguous to sed; refuse rather than guess.
            analysis.hazard(HazardKind::InlineCode, "sed --f");
            return None;
        }
        Some(())
    }

    /// A cluster: `-n`, `-ne SCRIPT`, `-es/a/b/`, `-i.bak`, `-l 80`;
    /// `None` when the script cannot be read (the hazard is said).
    fn cluster(&mut self, word: &'a str, analysis: &mut Analysis) -> Option<()> {
        let letters = &word[1..];
        for (at, letter) in letters.char_indices() {
            let rest = &letters[at + letter.len_utf8()..];
            match letter {
                'e' => {
                    self.from_option = true;
                    if rest.is_empty() {
                        let script = self.value();
                        self.scripts.extend(script);
                    } else {
                        self.scripts.push(rest);
                    }
                    break;
                }
                'f' => {
                    let file = if rest.is_empty() {
                        self.argv.get(self.index).map(String::as_str)
                    } else {
                        Some(rest)
                    };
                    if file.is_some_and(super::programs::is_stdin_path) {
                        analysis.hazard(HazardKind::StdinProgram, "sed -f - (a script from stdin)");
                    }
                    analysis.hazard(
                        HazardKind::InlineCode,
                        "sed -f (a script policy cannot read)",
                    );
                    return None;
                }
                'l' => {
                    if rest.is_empty() {
                        self.index += 1;
                    }
                    break;
                }
                // `-i[SUFFIX]`: the rest of the cluster is the suffix.
                'i' => break,
                _ => {}
            }
        }
        Some(())
    }
}

/// The first thing in `script` that runs, touches a file, or does not parse.
pub(super) fn scan(script: &str) -> Option<Finding> {
    let mut parser = Parser {
        chars: script.chars().collect(),
        at: 0,
    };
    parser.script().err()
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek();
        self.at += usize::from(c.is_some());
        c
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.at += 1;
        }
    }

    fn skip_digits(&mut self) -> bool {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        self.at > start
    }

    fn script(&mut self) -> Result<(), Finding> {
        loop {
            // Separators between commands.
            while self.peek().is_some_and(|c| c.is_whitespace() || c == ';') {
                self.at += 1;
            }
            match self.peek() {
                None => return Ok(()),
                Some('#') => {
                    self.rest_of_line();
                    continue;
                }
                Some(_) => {}
            }
            if self.address()? {
                self.skip_blanks();
                if self.peek() == Some(',') {
                    self.at += 1;
                    self.skip_blanks();
                    if matches!(self.peek(), Some('+' | '~')) {
                        self.at += 1;
                        if !self.skip_digits() {
                            return Err(Finding::Unparseable);
                        }
                    } else if !self.address()? {
                        return Err(Finding::Unparseable);
                    }
                }
            }
            self.skip_blanks();
            while self.peek() == Some('!') {
                self.at += 1;
                self.skip_blanks();
            }
            self.command()?;
        }
    }

    /// An address, if one starts here.
    fn address(&mut self) -> Result<bool, Finding> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                self.skip_digits();
                if self.peek() == Some('~') {
                    self.at += 1;
                    self.skip_digits();
                }
                Ok(true)
            }
            Some('$') => {
                self.at += 1;
                Ok(true)
            }
            Some('/') => {
                self.at += 1;
                self.delimited('/')?;
                self.regex_flags();
                Ok(true)
            }
            Some('\\') => {
                self.at += 1;
                let delimiter = self.next().ok_or(Finding::Unparseable)?;
                if delimiter == '\n' || delimiter == '\\' {
                    return Err(Finding::Unparseable);
                }
                self.delimited(delimiter)?;
                self.regex_flags();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// `I` and `M` after an address regex.
    fn regex_flags(&mut self) {
        while matches!(self.peek(), Some('I' | 'M')) {
            self.at += 1;
        }
    }

    /// Up to and past an unescaped `delimiter` (a backslash escapes any
    /// character, a newline included).
    fn delimited(&mut self, delimiter: char) -> Result<(), Finding> {
        loop {
            match self.next() {
                None => return Err(Finding::Unparseable),
                Some('\\') => {
                    self.next().ok_or(Finding::Unparseable)?;
                }
                Some(c) if c == delimiter => return Ok(()),
                Some('\n') if delimiter != '\n' => return Err(Finding::Unparseable),
                Some(_) => {}
            }
        }
    }

    fn rest_of_line(&mut self) {
        while self.next().is_some_and(|c| c != '\n') {}
    }

    /// A command ends at `;`, a newline, `}` or `#` (after blanks).
    fn end_of_command(&mut self) -> Result<(), Finding> {
        self.skip_blanks();
        match self.peek() {
            None | Some(';' | '\n' | '}' | '#') => Ok(()),
            Some(_) => Err(Finding::Unparseable),
        }
    }

    /// Text of `a`, `i`, `c`: to the end of the line, a trailing
    /// backslash continuing it.
    fn text(&mut self) {
        while let Some(c) = self.next() {
            match c {
                '\\' => {
                    self.next();
                }
                '\n' => return,
                _ => {}
            }
        }
    }

    /// A label (`b`, `t`, `T`, `:`): to `;` or the end of the line.
    fn label(&mut self) {
        while self.peek().is_some_and(|c| c != ';' && c != '\n') {
            self.at += 1;
        }
    }

    fn command(&mut self) -> Result<(), Finding> {
        let Some(command) = self.next() else {
            return Err(Finding::Unparseable);
        };
        match command {
            '{' | '}' => Ok(()),
            '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {
                self.end_of_command()
            }
            'l' | 'L' | 'q' | 'Q' => {
                self.skip_blanks();
                self.skip_digits();
                self.end_of_command()
            }
            'a' | 'i' | 'c' => {
                self.text();
                Ok(())
            }
            ':' | 'b' | 't' | 'T' => {
                self.label();
                Ok(())
            }
            'v' => {
                self.label();
                Ok(())
            }
            'e' => Err(Finding::Runs),
            'r' | 'R' | 'w' | 'W' => Err(Finding::File),
            's' => {
                let delimiter = self.next().ok_or(Finding::Unparseable)?;
                if delimiter == '\n' || delimiter == '\\' {
                    return Err(Finding::Unparseable);
                }
                self.delimited(delimiter)?;
                self.delimited(delimiter)?;
                self.substitute_flags()
            }
            'y' => {
                let delimiter = self.next().ok_or(Finding::Unparseable)?;
                if delimiter == '\n' || delimiter == '\\' {
                    return Err(Finding::Unparseable);
                }
                self.delimited(delimiter)?;
                self.delimited(delimiter)?;
                self.end_of_command()
            }
            _ => Err(Finding::Unparseable),
        }
    }

    fn substitute_flags(&mut self) -> Result<(), Finding> {
        loop {
            match self.peek() {
                Some('e') => return Err(Finding::Runs),
                Some('w') => return Err(Finding::File),
                Some('g' | 'p' | 'i' | 'I' | 'm' | 'M') => self.at += 1,
                Some(c) if c.is_ascii_digit() => self.at += 1,
                _ => return self.end_of_command(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Finding, scan};

    #[test]
    fn finds_e_and_files_in_every_spelling() {
        for script in [
            "e",
            "e id",
            "1e id",
            "1ecmd",
            "$e",
            "$e id",
            "1,3e id",
            "/a/,/b/e id",
            "/re/I e",
            "/re/Ie",
            "/x/M e",
            "/x/MI,+3 e",
            "\\%re%e",
            "\\,x,e",
            "\\%a\\%b%e id",
            "0~2e id",
            "2~3e",
            "1!e id",
            "1 ! e",
            "s/a/b/e",
            "s|a|b|e",
            "s/a/b/ge",
            "s/a/b/3e",
            "s/a\\/b/c/e",
            "s/a/b/;e",
            "s/a/b/ ; e",
            "y/abc/def/;e",
            "/x/{e id\n}",
            "/x/{\np\n}\ne",
            "a\\\nfoo\ne",
            "a foo\ne",
            "b end; e ; :end",
            "# comment\ne",
        ] {
            assert_eq!(scan(script), Some(Finding::Runs), "{script:?}");
        }
        for script in [
            "w /tmp/x",
            "1w /tmp/x",
            "s/a/b/w /tmp/x",
            "r /etc/passwd",
            "$R x",
            "/a/W y",
        ] {
            assert_eq!(scan(script), Some(Finding::File), "{script:?}");
        }
    }

    #[test]
    fn ordinary_scripts_pass() {
        for script in [
            "s/x/y/",
            "s/(a)e/\\1/",
            "s/a/b/g",
            "s/a/b/gI",
            "/start/,/end/p",
            "1d;$d",
            "a\\\ntext e",
            "a text with e",
            "i\\",
            "y/abc/efg/",
            "/e/d",
            "s/e/E/2",
            "1~2p",
            "/x/{p;d}",
            ":a;N;$!ba;s/\\n/ /g",
            "10q",
            "q 5",
            "=",
            "",
            "  ;  ",
            "# e\np",
            "/x/,+3d",
            "s,e,f,",
        ] {
            assert_eq!(scan(script), None, "{script:?}");
        }
    }

    #[test]
    fn what_does_not_parse_is_a_finding() {
        for script in [
            "s/a/b",
            "k",
            "/unterminated",
            "1,",
            "s/a/b/ x",
            "y/a/",
            "\\",
        ] {
            assert_eq!(scan(script), Some(Finding::Unparseable), "{script:?}");
        }
    }
}
