//! PTX text → a [`Module`] of top-level items, and back.
//!
//! The parser is statement-level, not a full grammar: it knows what the probe engine needs
//! (header directives, global/const/shared declarations, `.entry`/`.func` with their
//! parameters, and each body statement: label, declaration, instruction or `{`/`}` scope)
//! and keeps everything else as text. Comments are dropped; `.loc`/`.file` line info and
//! `.section` debug blocks are kept as parsed but [`Module::to_ptx`] leaves them out (pruning
//! removes the functions they point into).

use std::fmt::Write as _;

use thiserror::Error;

/// A PTX parse error, with the 1-based line it was found on.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("PTX line {line}: {message}")]
pub struct ParseError {
    /// 1-based line in the input.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

/// One PTX module.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    /// `.version`, `.target`, `.address_size`, in order, as text (e.g. `.version 9.0`).
    pub header: Vec<String>,
    /// Every other top-level item, in order.
    pub items: Vec<Item>,
}

/// A top-level item.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A variable declaration (`.global`, `.const`, `.shared`, `.extern ...`), ending in `;`.
    Variable(Variable),
    /// A function: an `.entry` kernel or a `.func`, with or without a body.
    Function(Function),
    /// `.file`, `.section ... { }` and other top-level text that is kept but not interpreted.
    Other(String),
}

/// A module-scope variable.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// Its name (`g_scale`, `global_smem`).
    pub name: String,
    /// State space: `global`, `const`, `shared`, `local`, `tex`...
    pub space: String,
    /// The whole declaration without the final `;`.
    pub text: String,
}

/// Whether a function is a kernel or a device function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    /// `.entry`: a kernel.
    Entry,
    /// `.func`: a device function.
    Func,
}

/// A function declaration or definition.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// Kernel or device function.
    pub kind: FunctionKind,
    /// The (mangled) name.
    pub name: String,
    /// Linkage and other words before `.entry`/`.func` (`.visible`, `.weak`, `.extern`).
    pub linkage: String,
    /// A `.func`'s return parameter list, without parentheses, or empty.
    pub returns: String,
    /// Each parameter's declaration (`.param .u64 name`), in order.
    pub params: Vec<Param>,
    /// Performance directives between the parameter list and the body (`.maxntid 128, 1, 1`).
    pub directives: String,
    /// The body, `None` for a prototype.
    pub body: Option<Vec<Stmt>>,
}

/// A parameter declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The parameter's name.
    pub name: String,
    /// The declaration as written (`.param .u64 .ptr .global .align 1 name`).
    pub text: String,
}

/// A statement of a function body.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `name:`.
    Label(String),
    /// A declaration or directive inside the body (`.reg .b64 %rd<9>`, `.shared ...`,
    /// `.pragma ...`, `.loc ...`), without the `;`.
    Directive(String),
    /// An instruction.
    Instr(Instr),
    /// `{`: a nested scope opens.
    Open,
    /// `}`: it closes.
    Close,
}

/// An instruction: optional guard predicate, opcode with its modifiers, operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instr {
    /// The guard without `@` (`%p1`, `!%p2`), if any.
    pub pred: Option<String>,
    /// Opcode with modifiers (`ld.global.v4.f32`).
    pub opcode: String,
    /// Operands as written, split at top-level commas.
    pub operands: Vec<String>,
}

impl Instr {
    /// The opcode's first word (`ld` for `ld.global.v4.f32`).
    pub fn base(&self) -> &str {
        self.opcode.split('.').next().unwrap_or("")
    }

    /// Whether the opcode has modifier `m` (`global` in `ld.global.f32`).
    pub fn has(&self, m: &str) -> bool {
        self.opcode.split('.').skip(1).any(|x| x == m)
    }

    /// PTX text of the instruction, without indentation.
    pub fn text(&self) -> String {
        let mut s = String::new();
        if let Some(p) = &self.pred {
            let _ = write!(s, "@{p} ");
        }
        s.push_str(&self.opcode);
        if !self.operands.is_empty() {
            s.push('\t');
            s.push_str(&self.operands.join(", "));
        }
        s.push(';');
        s
    }
}

/// Removes `//` and `/* */` comments, keeping quoted strings and line breaks.
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut start = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += 1;
                }
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                out.push_str(&src[start..i]);
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                start = i;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                out.push_str(&src[start..i]);
                let end = src[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                out.extend(src[i..end].chars().filter(|&c| c == '\n'));
                i = end;
                start = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&src[start.min(src.len())..]);
    out
}

/// A cursor over comment-free PTX.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
    /// A position and the line breaks before it, so that [`Cursor::line`] counts from there:
    /// counting from the start at every function made parsing quadratic.
    counted: std::cell::Cell<(usize, usize)>,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Cursor<'a> {
        Cursor { s, pos: 0, counted: std::cell::Cell::new((0, 0)) }
    }
    fn line(&self) -> usize {
        let pos = self.pos.min(self.s.len());
        let (from, before) = match self.counted.get() {
            (at, n) if at <= pos => (at, n),
            _ => (0, 0),
        };
        let n = before + self.s.as_bytes()[from..pos].iter().filter(|&&b| b == b'\n').count();
        self.counted.set((pos, n));
        n + 1
    }
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError { line: self.line(), message: message.into() }
    }
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s.as_bytes()[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }
    /// Text up to the end of the line.
    fn take_line(&mut self) -> &'a str {
        let end = self.rest().find('\n').map_or(self.s.len(), |e| self.pos + e);
        let t = &self.s[self.pos..end];
        self.pos = end;
        t.trim()
    }
    /// Text up to `stop` at bracket depth 0 (`()`, `[]`, `{}`), not consuming `stop`.
    fn take_until(&mut self, stops: &[u8]) -> Result<&'a str, ParseError> {
        let start = self.pos;
        let b = self.s.as_bytes();
        let mut depth = 0i32;
        while self.pos < b.len() {
            let c = b[self.pos];
            if depth == 0 && stops.contains(&c) {
                return Ok(&self.s[start..self.pos]);
            }
            match c {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b'"' => {
                    self.pos += 1;
                    while self.pos < b.len() && b[self.pos] != b'"' {
                        self.pos += 1;
                    }
                    // An unterminated string runs to the end of the input, not past it.
                    if self.pos == b.len() {
                        break;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        Err(self.err(format!("expected one of {:?} before the end of the input", stops_text(stops))))
    }
    /// A balanced `{ ... }` block starting at the cursor, returned with its braces.
    fn take_block(&mut self) -> Result<&'a str, ParseError> {
        let start = self.pos;
        self.pos += 1;
        self.take_until(b"}")?;
        self.pos += 1;
        Ok(&self.s[start..self.pos])
    }
}

fn stops_text(stops: &[u8]) -> String {
    stops.iter().map(|&c| c as char).collect()
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%' | '.')
}

/// The identifiers (names, registers) in `text`, in order, `.`-directives excluded.
pub fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%')))
        .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
}

/// The declared name in a declaration: the last identifier before an initializer or array
/// bounds (`.global .align 4 .b8 tile[1024] = {...}` → `tile`).
fn declared_name(decl: &str) -> String {
    let head = decl.split('=').next().unwrap_or(decl);
    let head = head.split('[').next().unwrap_or(head);
    let head = head.split('<').next().unwrap_or(head);
    head.split_whitespace().rev().find(|w| !w.starts_with('.')).unwrap_or("").trim_end_matches(',').to_string()
}

/// Splits `text` at top-level commas, trimming each part.
pub fn split_top(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in text.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        parts.push(cur.trim().to_string());
    }
    parts
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Module {
    /// Parses a PTX module.
    pub fn parse(src: &str) -> Result<Module, ParseError> {
        let clean = strip_comments(src);
        let mut c = Cursor::new(&clean);
        let mut module = Module::default();
        loop {
            c.skip_ws();
            let Some(first) = c.peek() else { break };
            if first != b'.' {
                return Err(c.err(format!("unexpected text at top level: {:?}", first_words(c.rest()))));
            }
            let word: String = c.rest().chars().take_while(|&ch| is_ident_char(ch)).collect();
            match word.as_str() {
                ".version" | ".target" | ".address_size" => module.header.push(collapse(c.take_line())),
                ".file" => module.items.push(Item::Other(collapse(c.take_line()))),
                ".section" => {
                    let head = c.take_until(b"{")?;
                    let block = c.take_block()?;
                    module.items.push(Item::Other(format!("{} {block}", head.trim())));
                }
                _ => {
                    let text = c.take_until(b";{")?;
                    let words: Vec<&str> = text.split_whitespace().collect();
                    let is_fn = words.iter().any(|w| *w == ".entry" || *w == ".func" || w.starts_with(".func("));
                    if is_fn {
                        let body = if c.peek() == Some(b'{') {
                            let block = c.take_block()?;
                            Some(parse_body(&block[1..block.len() - 1], c.line())?)
                        } else {
                            c.pos += 1;
                            None
                        };
                        module.items.push(Item::Function(parse_function_head(text, body).map_err(|m| c.err(m))?));
                    } else {
                        let mut text = text.trim().to_string();
                        if c.peek() == Some(b'{') {
                            // An initializer list: `.global .u32 t[2] = {1, 2};`.
                            text.push_str(c.take_block()?);
                            c.take_until(b";")?;
                        }
                        c.pos += 1;
                        let space = text
                            .split_whitespace()
                            .find(|w| matches!(*w, ".global" | ".const" | ".shared" | ".local" | ".tex" | ".param"))
                            .unwrap_or("")
                            .trim_start_matches('.')
                            .to_string();
                        let name = declared_name(&text);
                        module.items.push(Item::Variable(Variable { name, space, text: collapse(&text) }));
                    }
                }
            }
        }
        Ok(module)
    }

    /// The functions, in order.
    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.items.iter().filter_map(|i| if let Item::Function(f) = i { Some(f) } else { None })
    }

    /// The kernels (`.entry` with a body), in order.
    pub fn kernels(&self) -> impl Iterator<Item = &Function> {
        self.functions().filter(|f| f.kind == FunctionKind::Entry && f.body.is_some())
    }

    /// The module as PTX text (comments, line info and debug sections left out).
    pub fn to_ptx(&self) -> String {
        let mut out = String::new();
        for h in &self.header {
            out.push_str(h);
            out.push('\n');
        }
        out.push('\n');
        for item in &self.items {
            match item {
                Item::Variable(v) => {
                    let _ = writeln!(out, "{};", v.text);
                }
                Item::Function(f) => f.write(&mut out),
                Item::Other(_) => {}
            }
        }
        out
    }
}

fn first_words(s: &str) -> String {
    s.split_whitespace().take(4).collect::<Vec<_>>().join(" ")
}

fn parse_function_head(text: &str, body: Option<Vec<Stmt>>) -> Result<Function, String> {
    let (kind, at) = if let Some(at) = text.find(".entry") {
        (FunctionKind::Entry, at)
    } else if let Some(at) = text.find(".func") {
        (FunctionKind::Func, at)
    } else {
        return Err("a function without .entry or .func".into());
    };
    let linkage = collapse(&text[..at]);
    let mut rest = text[at + if kind == FunctionKind::Entry { 6 } else { 5 }..].trim_start();
    let mut returns = String::new();
    if kind == FunctionKind::Func && rest.starts_with('(') {
        let close = matching_paren(rest).ok_or("unbalanced return parameter list")?;
        returns = collapse(&rest[1..close]);
        rest = rest[close + 1..].trim_start();
    }
    let name_end = rest.find(|c: char| c == '(' || c.is_whitespace()).unwrap_or(rest.len());
    let name = rest[..name_end].to_string();
    if name.is_empty() {
        return Err("a function without a name".into());
    }
    rest = rest[name_end..].trim_start();
    let mut params = Vec::new();
    if rest.starts_with('(') {
        let close = matching_paren(rest).ok_or("unbalanced parameter list")?;
        for p in split_top(&rest[1..close]) {
            params.push(Param { name: declared_name(&p), text: collapse(&p) });
        }
        rest = &rest[close + 1..];
    }
    Ok(Function { kind, name, linkage, returns, params, directives: collapse(rest), body })
}

fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Parses the statements of a body (without its outer braces).
pub(crate) fn parse_body(body: &str, end_line: usize) -> Result<Vec<Stmt>, ParseError> {
    let first_line = end_line.saturating_sub(body.matches('\n').count());
    let mut c = Cursor::new(body);
    let mut out = Vec::new();
    loop {
        c.skip_ws();
        let Some(ch) = c.peek() else { break };
        let line_err = |c: &Cursor<'_>, m: String| ParseError { line: first_line + c.line() - 1, message: m };
        match ch {
            b'{' => {
                c.pos += 1;
                out.push(Stmt::Open);
            }
            b'}' => {
                c.pos += 1;
                out.push(Stmt::Close);
            }
            _ => {
                if c.rest().starts_with(".loc") || c.rest().starts_with(".file") {
                    c.take_line();
                    continue;
                }
                // A label: an identifier directly followed by ':' (not `::`, which qualifies an
                // instruction: `createpolicy.fractional.L2::evict_last.b64`).
                let word: String = c.rest().chars().take_while(|&x| is_ident_char(x)).collect();
                let after = c.rest()[word.len()..].trim_start();
                if !word.is_empty() && after.starts_with(':') && !after.starts_with("::") && !word.contains('.') {
                    c.pos += word.len();
                    c.skip_ws();
                    c.pos += 1;
                    out.push(Stmt::Label(word));
                    continue;
                }
                let text = c.take_until(b";").map_err(|e| line_err(&c, e.message))?;
                c.pos += 1;
                let text = collapse(text);
                if text.starts_with('.') {
                    out.push(Stmt::Directive(text));
                } else {
                    out.push(Stmt::Instr(parse_instr(&text).map_err(|m| line_err(&c, m))?));
                }
            }
        }
    }
    Ok(out)
}

/// Parses one instruction's text (without `;`).
pub fn parse_instr(text: &str) -> Result<Instr, String> {
    let mut rest = text.trim();
    let mut pred = None;
    if let Some(r) = rest.strip_prefix('@') {
        let end = r.find(char::is_whitespace).ok_or_else(|| format!("a guard without an instruction: {text}"))?;
        pred = Some(r[..end].to_string());
        rest = r[end..].trim_start();
    }
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let opcode = rest[..end].to_string();
    if opcode.is_empty() || !opcode.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!("not an instruction: {text}"));
    }
    Ok(Instr { pred, opcode, operands: split_top(&rest[end..]) })
}

impl Function {
    /// The PTX text of the function.
    pub fn write(&self, out: &mut String) {
        if !self.linkage.is_empty() {
            out.push_str(&self.linkage);
            out.push(' ');
        }
        out.push_str(if self.kind == FunctionKind::Entry { ".entry " } else { ".func " });
        if !self.returns.is_empty() {
            let _ = write!(out, "({}) ", self.returns);
        }
        out.push_str(&self.name);
        out.push_str("(\n");
        let params: Vec<String> = self.params.iter().map(|p| format!("\t{}", p.text)).collect();
        out.push_str(&params.join(",\n"));
        out.push_str("\n)");
        if !self.directives.is_empty() {
            let _ = write!(out, "\n{}", self.directives);
        }
        let Some(body) = &self.body else {
            out.push_str(";\n\n");
            return;
        };
        out.push_str("\n{\n");
        let mut depth = 1usize;
        for s in body {
            if matches!(s, Stmt::Close) {
                depth = depth.saturating_sub(1);
            }
            let indent = "\t".repeat(depth);
            match s {
                Stmt::Label(l) => {
                    let _ = writeln!(out, "{l}:");
                }
                Stmt::Directive(d) => {
                    let _ = writeln!(out, "{indent}{d};");
                }
                Stmt::Instr(i) => {
                    let _ = writeln!(out, "{indent}{}", i.text());
                }
                Stmt::Open => {
                    let _ = writeln!(out, "{indent}{{");
                    depth += 1;
                }
                Stmt::Close => {
                    let _ = writeln!(out, "{indent}}}");
                }
            }
        }
        out.push_str("}\n\n");
    }

    /// Every identifier the function's body and parameters name.
    pub fn referenced(&self) -> Vec<&str> {
        let mut names = Vec::new();
        for s in self.body.iter().flatten() {
            match s {
                Stmt::Instr(i) => {
                    for op in &i.operands {
                        names.extend(identifiers(op));
                    }
                }
                Stmt::Directive(d) => names.extend(identifiers(d.split('=').nth(1).unwrap_or(""))),
                _ => {}
            }
        }
        names
    }
}
