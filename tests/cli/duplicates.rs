//! An entry given twice is refused before anything runs: a sweep's parameter in two `--set`s
//! or a value twice in one, a suite's scenario and parameters twice.

use crate::cli::util::assert_usage_error;

#[test]
fn a_sweep_parameter_set_twice_is_refused_naming_it() {
    assert_usage_error(
        &["sweep", "matmul", "--set", "size=100", "--set", "size=200"],
        "--set names 'size' twice: list its values in one --set (size=100,200)",
    );
    assert_usage_error(
        &["sweep", "matmul", "--set", "size=100,200,100"],
        "--set 'size' lists the value '100' twice",
    );
}

#[test]
fn a_suite_entry_given_twice_is_refused_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("twice.toml");
    std::fs::write(
        &suite,
        "[[run]]\nscenario = \"async\"\nparams = { iterations = 10 }\n\n\
         [[run]]\nscenario = \"async\"\nparams = { iterations = 10 }\n",
    )
    .unwrap();
    let shown = suite.display().to_string();
    assert_usage_error(
        &["run", &shown],
        &format!("{shown}:6: 'async' with these parameters repeats the entry at line 2"),
    );
}
