//! Shared by the config test binaries (`mod common;`).

/// The errors `config::parse` reports for `text`: (line, field, message).
/// Panics, showing what parsed, when the text is accepted; checks that
/// the rendered form names file and line of every error that has one.
pub fn errors(text: &str) -> Vec<(Option<usize>, String, String)> {
    match config::parse(text, "test.yaml") {
        Ok(cfg) => panic!("expected errors for\n{text}\ngot {cfg:#?}"),
        Err(e) => {
            let shown = e.to_string();
            for err in &e.errors {
                if let Some(l) = err.line {
                    assert!(shown.contains(&format!("test.yaml:{l}:")), "{shown}");
                }
            }
            e.errors
                .into_iter()
                .map(|e| (e.line, e.field, e.message))
                .collect()
        }
    }
}

/// Exactly one error, at `line`, on `field`, its message containing `msg`.
#[allow(dead_code)] // not every test binary uses it
#[track_caller]
pub fn one_error(text: &str, line: usize, field: &str, msg: &str) {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    let (l, f, m) = &errs[0];
    assert_eq!(*l, Some(line), "line of {f}: {m}");
    assert_eq!(f, field, "field for: {m}");
    assert!(m.contains(msg), "message {m:?} should contain {msg:?}");
}
