//! `gmprof run --rotate` refuses what it cannot run before the program starts, with the
//! reason: another mode, iteration replay beside it, or an N that is not one.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut all = vec!["run", "-o", out.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "true"]);
    let o = Command::new(env!("CARGO_BIN_EXE_gmprof")).args(&all).output().expect("run gmprof");
    (o.status.success(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_rotation_beside_another_mode_is_refused() {
    let (ok, err) = run(&["--rotate", "--mode", "trace"]);
    assert!(!ok);
    assert!(err.contains("--rotate measures per_kernel counters in rotation, not --mode trace"), "{err}");
}

#[test]
fn a_rotation_beside_iteration_replay_is_refused() {
    let (ok, err) = run(&["--rotate", "8", "--iteration-replay", "step *", "--iterations", "4"]);
    assert!(!ok);
    assert!(err.contains("--rotate and --iteration-replay both pick which step measures what"), "{err}");
}

#[test]
fn an_n_that_is_not_one_is_refused() {
    for bad in ["0", "every", "-3"] {
        let (ok, err) = run(&[&format!("--rotate={bad}")]);
        assert!(!ok, "{bad}");
        assert!(err.contains("use auto or a whole number of steps"), "{bad}: {err}");
    }
}
