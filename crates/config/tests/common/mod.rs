//! Shared by the config test binaries (`mod common;`).

/// The errors `config::parse` reports for `text`: (line, field, message).
/// Panics, showing what parsed, when the text is accepted.
pub fn errors(text: &str) -> Vec<(Option<usize>, String, String)> {
    match config::parse(text, "test.yaml") {
        Ok(cfg) => panic!("expected errors for\n{text}\ngot {cfg:#?}"),
        Err(e) => e
            .errors
            .into_iter()
            .map(|e| (e.line, e.field, e.message))
            .collect(),
    }
}
