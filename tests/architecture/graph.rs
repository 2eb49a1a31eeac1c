//! The file-level import graph of `src/`: which source file names an item that another file
//! defines, read from the source text alone (std only, no parser crate).
//!
//! How a name is followed:
//! - the module tree comes from the files' places (`a/mod.rs`, `a.rs` beside `a/`, `a/b.rs`)
//!   and `#[path]` attributes on `mod` declarations;
//! - `use` trees and the paths in code (`crate::`, `super::`, `self::`, a child module's or an
//!   imported module's name, then `::`) are resolved module by module;
//! - a name that a module re-exports (`pub use`) or imports (`use`) is followed to the file
//!   that defines it, so a `mod.rs` that only re-exports is no hub of false circles;
//! - a path that ends in a module (`use crate::report::csv;`) adds no edge by itself; its later
//!   uses (`csv::write_file`) do;
//! - a glob (`use super::*`) is an edge to the module's own file;
//! - names of other crates, macros and items that the reader cannot place are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from the crate root, e.g. `["report", "csv"]`.
pub type ModPath = Vec<String>;

/// One source file's module and what it says.
#[derive(Debug, Default)]
struct FileInfo {
    /// Items defined in this file, by the module they live in (inline modules included).
    items: BTreeMap<ModPath, BTreeSet<String>>,
    /// `use` imports by the module they are in: local name → absolute or relative target.
    imports: BTreeMap<ModPath, BTreeMap<String, Target>>,
    /// Glob imports by module.
    globs: BTreeMap<ModPath, Vec<Target>>,
    /// Paths named in code, with the module they are named in.
    uses: Vec<(ModPath, Vec<String>)>,
}

/// A path as written, with the module it was written in.
#[derive(Debug, Clone)]
struct Target {
    at: ModPath,
    path: Vec<String>,
}

/// A circle of imports: `path` goes from a file back to it; `others` are the files that
/// further circles through the same files join.
pub struct Cycle {
    pub path: Vec<PathBuf>,
    pub others: Vec<PathBuf>,
}

/// The crate's files and modules.
pub struct Graph {
    /// Module path → the file that holds it (inline modules map to their file too).
    modules: BTreeMap<ModPath, PathBuf>,
    files: BTreeMap<PathBuf, FileInfo>,
    /// Edges between files (relative to `src/`).
    pub edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Source text with comments, strings and char literals blanked out (lines kept).
pub fn strip(source: &str) -> String {
    let b: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && b.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
            continue;
        }
        // Raw strings: r"..", r#".."#, br#".."#.
        let prev_ident = i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_');
        if !prev_ident && (c == 'r' || (c == 'b' && b.get(i + 1) == Some(&'r'))) {
            let mut j = if c == 'b' { i + 2 } else { i + 1 };
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) == Some(&'"') {
                j += 1;
                loop {
                    if j >= b.len() {
                        break;
                    }
                    if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                        j += 1 + hashes;
                        break;
                    }
                    if b[j] == '\n' {
                        out.push('\n');
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if i < b.len() && b[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        if c == '\'' {
            // A char literal ('a', '\n', '\u{..}'), not a lifetime ('a).
            if b.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
                continue;
            }
            if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(&'static str),
}

fn tokens(code: &str) -> Vec<Tok> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            let word: String = b[start..i].iter().collect();
            // `r#type` raw identifiers.
            let word = word.strip_prefix("r#").map(str::to_string).unwrap_or(word);
            out.push(Tok::Ident(word));
            continue;
        }
        if c == ':' && b.get(i + 1) == Some(&':') {
            out.push(Tok::Punct("::"));
            i += 2;
            continue;
        }
        let p = match c {
            '{' => "{",
            '}' => "}",
            ',' => ",",
            ';' => ";",
            '*' => "*",
            '#' => "#",
            '[' => "[",
            ']' => "]",
            '(' => "(",
            ')' => ")",
            '=' => "=",
            '!' => "!",
            '\'' => "'",
            _ => {
                i += 1;
                continue;
            }
        };
        out.push(Tok::Punct(p));
        i += 1;
    }
    out
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

const ITEM_KEYWORDS: [&str; 8] = ["fn", "struct", "enum", "trait", "type", "const", "static", "union"];

/// Expands a `use` tree starting at `toks[i]` into (local name, path) pairs and globs.
/// Returns the index after the tree.
fn use_tree(
    toks: &[Tok],
    mut i: usize,
    prefix: &[String],
    named: &mut Vec<(String, Vec<String>)>,
    globs: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i) {
            Some(Tok::Punct("::")) => i += 1,
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::Punct("::")) {
                    continue;
                }
                let mut local = path.last().unwrap().clone();
                if ident(toks.get(i)) == Some("as") {
                    if let Some(alias) = ident(toks.get(i + 1)) {
                        local = alias.to_string();
                    }
                    i += 2;
                }
                if local == "self" {
                    path.pop();
                    local = path.last().cloned().unwrap_or_default();
                }
                if local != "_" {
                    named.push((local, path));
                }
                return i;
            }
            Some(Tok::Punct("*")) => {
                globs.push(path);
                return i + 1;
            }
            Some(Tok::Punct("{")) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some(Tok::Punct("}")) => return i + 1,
                        Some(Tok::Punct(",")) => i += 1,
                        None => return i,
                        _ => i = use_tree(toks, i, &path, named, globs),
                    }
                }
            }
            _ => return i,
        }
    }
}

impl FileInfo {
    fn read(code: &str, module: &ModPath) -> FileInfo {
        let toks = tokens(code);
        let mut info = FileInfo::default();
        // The inline-module stack: (module path, brace depth at which it closes).
        let mut scopes: Vec<(ModPath, usize)> = vec![(module.clone(), 0)];
        let mut depth = 0usize;
        let mut i = 0;
        while i < toks.len() {
            let here = scopes.last().unwrap().0.clone();
            match &toks[i] {
                Tok::Punct("{") => {
                    depth += 1;
                    i += 1;
                }
                Tok::Punct("}") => {
                    if scopes.len() > 1 && scopes.last().unwrap().1 == depth {
                        scopes.pop();
                    }
                    depth = depth.saturating_sub(1);
                    i += 1;
                }
                Tok::Ident(w) if w == "use" && !matches!(toks.get(i.wrapping_sub(1)), Some(Tok::Punct("::"))) => {
                    let mut named = Vec::new();
                    let mut globs = Vec::new();
                    i = use_tree(&toks, i + 1, &[], &mut named, &mut globs);
                    for (local, path) in named {
                        info.imports
                            .entry(here.clone())
                            .or_default()
                            .insert(local, Target { at: here.clone(), path: path.clone() });
                        info.uses.push((here.clone(), path));
                    }
                    for path in globs {
                        info.globs.entry(here.clone()).or_default().push(Target { at: here.clone(), path });
                    }
                }
                Tok::Ident(w) if w == "mod" => {
                    if let (Some(name), Some(Tok::Punct("{"))) = (ident(toks.get(i + 1)), toks.get(i + 2)) {
                        let mut inner = here.clone();
                        inner.push(name.to_string());
                        depth += 1;
                        scopes.push((inner, depth));
                        i += 3;
                    } else {
                        i += 1;
                    }
                }
                Tok::Ident(w) if ITEM_KEYWORDS.contains(&w.as_str()) => {
                    if let Some(name) = ident(toks.get(i + 1)) {
                        info.items.entry(here.clone()).or_default().insert(name.to_string());
                    }
                    i += 1;
                }
                Tok::Ident(w) if w == "macro_rules" => {
                    if let Some(name) = ident(toks.get(i + 2)) {
                        info.items.entry(here.clone()).or_default().insert(name.to_string());
                    }
                    i += 1;
                }
                Tok::Ident(first) => {
                    // A path in code: ident (:: ident)+, not preceded by `::`.
                    if matches!(toks.get(i.wrapping_sub(1)), Some(Tok::Punct("::"))) {
                        i += 1;
                        continue;
                    }
                    let mut path = vec![first.clone()];
                    let mut j = i + 1;
                    while toks.get(j) == Some(&Tok::Punct("::")) {
                        match ident(toks.get(j + 1)) {
                            Some(s) => {
                                path.push(s.to_string());
                                j += 2;
                            }
                            None => break,
                        }
                    }
                    if path.len() > 1 {
                        info.uses.push((here.clone(), path));
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
        info
    }
}

/// The module path of a file under `src/`, from its place.
fn module_of(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_str().unwrap().to_string()).collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "lib.rs" | "mod.rs" => {}
        other => parts.push(other.trim_end_matches(".rs").to_string()),
    }
    parts
}

impl Graph {
    /// Reads every `.rs` file under `src` except those for which `skip` says so.
    pub fn read(src: &Path, skip: impl Fn(&Path) -> bool) -> Graph {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let mut modules = BTreeMap::new();
        let mut infos = BTreeMap::new();
        // `#[path = "x.rs"] mod name;` in file F: module F::name lives in F's folder's x.rs.
        let mut path_attrs: BTreeMap<PathBuf, ModPath> = BTreeMap::new();
        for file in &files {
            let rel = file.strip_prefix(src).unwrap().to_path_buf();
            let text = std::fs::read_to_string(file).unwrap();
            let mut rest = text.as_str();
            while let Some(at) = rest.find("#[path = \"") {
                let value = &rest[at + 10..];
                let value = &value[..value.find('"').unwrap()];
                let after = &rest[at..];
                if let Some(m) = after.find("mod ") {
                    let name: String =
                        after[m + 4..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    let mut module = module_of(&rel);
                    module.push(name);
                    path_attrs.insert(rel.parent().unwrap().join(value), module);
                }
                rest = &rest[at + 10..];
            }
        }
        for file in &files {
            let rel = file.strip_prefix(src).unwrap().to_path_buf();
            if skip(&rel) {
                continue;
            }
            let module = path_attrs.get(&rel).cloned().unwrap_or_else(|| module_of(&rel));
            let text = std::fs::read_to_string(file).unwrap();
            let info = FileInfo::read(&strip(&text), &module);
            for m in info.items.keys().chain(info.imports.keys()) {
                modules.entry(m.clone()).or_insert_with(|| rel.clone());
            }
            modules.insert(module, rel.clone());
            infos.insert(rel, info);
        }
        let mut graph = Graph { modules, files: infos, edges: BTreeMap::new() };
        graph.link();
        graph
    }

    fn is_module(&self, m: &ModPath) -> bool {
        self.modules.contains_key(m)
    }

    /// Turns a path written in module `at` into an absolute one, or None (another crate).
    fn absolute(&self, at: &ModPath, path: &[String], depth: usize) -> Option<ModPath> {
        let first = path.first()?;
        let mut base: ModPath = match first.as_str() {
            "crate" => Vec::new(),
            "self" => at.clone(),
            "super" => {
                let mut m = at.clone();
                m.pop();
                m
            }
            _ => {
                let mut child = at.clone();
                child.push(first.clone());
                if self.is_module(&child) {
                    let mut out = child;
                    out.extend(path[1..].iter().cloned());
                    return Some(out);
                }
                // A name this module imported: substitute its target.
                let file = self.modules.get(at).and_then(|f| self.files.get(f))?;
                let target = file.imports.get(at).and_then(|m| m.get(first))?;
                if depth > 16 || target.path.first() == Some(first) && target.at == *at {
                    return None;
                }
                let mut out = self.absolute(&target.at, &target.path, depth + 1)?;
                out.extend(path[1..].iter().cloned());
                return Some(out);
            }
        };
        let mut rest = &path[1..];
        while rest.first().map(String::as_str) == Some("super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file that defines what an absolute path names, if the reader can place it.
    /// `None` for a path that ends in a module (no edge by itself).
    fn place(&self, path: &ModPath, depth: usize) -> Option<PathBuf> {
        if depth > 16 {
            return None;
        }
        let mut module: ModPath = Vec::new();
        for (k, seg) in path.iter().enumerate() {
            let mut child = module.clone();
            child.push(seg.clone());
            if self.is_module(&child) {
                module = child;
                continue;
            }
            let file_path = self.modules.get(&module)?;
            let file = self.files.get(file_path)?;
            if file.items.get(&module).is_some_and(|s| s.contains(seg)) {
                return Some(file_path.clone());
            }
            if let Some(target) = file.imports.get(&module).and_then(|m| m.get(seg)) {
                if let Some(mut abs) = self.absolute(&target.at, &target.path, depth + 1) {
                    abs.extend(path[k + 1..].iter().cloned());
                    if abs != *path {
                        return self.place(&abs, depth + 1).or(Some(file_path.clone()));
                    }
                }
                return None; // another crate's name, re-exported
            }
            // Through a glob import of this module.
            for g in file.globs.get(&module).into_iter().flatten() {
                if let Some(mut abs) = self.absolute(&g.at, &g.path, depth + 1) {
                    abs.push(seg.clone());
                    if abs != path[..=k] && self.place(&abs, depth + 1).is_some() {
                        abs.extend(path[k + 1..].iter().cloned());
                        return self.place(&abs, depth + 1);
                    }
                }
            }
            // An associated item, an enum variant, a macro: the module's own file.
            return if k == 0 { None } else { Some(file_path.clone()) };
        }
        None
    }

    fn link(&mut self) {
        let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (file, info) in &self.files {
            let out = edges.entry(file.clone()).or_default();
            for (at, path) in &info.uses {
                if let Some(abs) = self.absolute(at, path, 0) {
                    if let Some(to) = self.place(&abs, 0) {
                        out.insert(to);
                    }
                }
            }
            for target in info.globs.values().flatten() {
                if let Some(abs) = self.absolute(&target.at, &target.path, 0) {
                    if let Some(to) = self.modules.get(&abs) {
                        out.insert(to.clone());
                    }
                }
            }
            out.remove(file);
        }
        self.edges = edges;
    }

    /// The strongly connected components of more than one file, each as one concrete circle
    /// (`a.rs → b.rs → a.rs`) and the other files that circles through it join.
    pub fn cycles(&self) -> Vec<Cycle> {
        let nodes: Vec<&PathBuf> = self.edges.keys().collect();
        let index: BTreeMap<&PathBuf, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let adj: Vec<Vec<usize>> =
            nodes.iter().map(|n| self.edges[*n].iter().filter_map(|t| index.get(t).copied()).collect()).collect();
        let comps = tarjan(&adj);
        let mut out = Vec::new();
        for comp in comps.into_iter().filter(|c| c.len() > 1) {
            let set: BTreeSet<usize> = comp.iter().copied().collect();
            let start = *comp.iter().min().unwrap();
            // Shortest way back to `start` within the component (BFS).
            let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut found = None;
            'bfs: while let Some(n) = queue.pop_front() {
                for &m in &adj[n] {
                    if !set.contains(&m) {
                        continue;
                    }
                    if m == start {
                        found = Some(n);
                        break 'bfs;
                    }
                    if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(m) {
                        e.insert(n);
                        queue.push_back(m);
                    }
                }
            }
            let mut chain = vec![start];
            let mut at = found.unwrap();
            let mut back = vec![];
            while at != start {
                back.push(at);
                at = prev[&at];
            }
            back.reverse();
            chain.extend(back);
            chain.push(start);
            let path: Vec<PathBuf> = chain.iter().map(|i| nodes[*i].clone()).collect();
            // The other files that circles through these join (a strongly connected component).
            let mut others: Vec<PathBuf> =
                comp.iter().filter(|i| !chain.contains(i)).map(|i| nodes[*i].clone()).collect();
            others.sort();
            out.push(Cycle { path, others });
        }
        out
    }
}

/// Tarjan's strongly connected components, iterative.
fn tarjan(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adj.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut comps = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if *k == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if *k < adj[v].len() {
                let w = adj[v][*k];
                *k += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = stack.pop().unwrap();
                    on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                comps.push(comp);
            }
        }
    }
    comps
}
