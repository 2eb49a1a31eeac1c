//! Several processes' outputs: finding them, and (`gmprof merge`) one summary across them.
//!
//! Layer 3, beside the other exporters. Each profiled process writes its own directory
//! (`crate::ways_in::layout` names it); [`result_dirs`] finds them under an output root.

use std::path::{Path, PathBuf};

/// How deep below the root process directories are looked for (`out/%h/%p` is two).
pub const SCAN_DEPTH: usize = 3;

/// `root` and its subdirectories (to [`SCAN_DEPTH`]) that hold any of `files`, sorted.
pub fn result_dirs(root: &Path, files: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, files: &[&str], out: &mut Vec<PathBuf>) {
        if files.iter().any(|f| dir.join(f).is_file()) {
            out.push(dir.to_owned());
        }
        if depth == 0 {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut subdirs: Vec<PathBuf> =
            entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir() && !p.is_symlink()).collect();
        subdirs.sort();
        for sub in subdirs {
            walk(&sub, depth - 1, files, out);
        }
    }
    let mut out = Vec::new();
    walk(root, SCAN_DEPTH, files, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_dirs_finds_the_root_and_nested_process_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert!(result_dirs(&root.join("missing"), &["report.json"]).is_empty());
        for (dir, file) in
            [("", "report.json"), ("h-1", "report.json"), ("h-0", "injection.json"), ("h/7", "report.json")]
        {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join(file), "{}").unwrap();
        }
        std::fs::create_dir_all(root.join("empty/a/b/c/d")).unwrap();
        std::fs::write(root.join("empty/a/b/c/d/report.json"), "{}").unwrap();
        let found = result_dirs(root, &["report.json", "injection.json"]);
        let rel: Vec<_> = found.iter().map(|p| p.strip_prefix(root).unwrap().to_owned()).collect();
        assert_eq!(rel, ["", "h/7", "h-0", "h-1"].map(PathBuf::from), "too deep is not looked at");
        assert_eq!(result_dirs(root, &["injection.json"]), [root.join("h-0")]);
    }
}
