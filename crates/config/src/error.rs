//! Configuration errors, reported gcc style: `FILE:LINE:COL: FIELD: MESSAGE`.

use std::fmt;

/// A semantic problem: field path and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// e.g. `ports[2].vlan`
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// One problem found in a configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// File name as given to [`super::parse`] / [`super::load`].
    pub file: String,
    /// 1-based line, if known.
    pub line: Option<usize>,
    /// 1-based column, if known.
    pub column: Option<usize>,
    /// Path of the offending field, e.g. `ports[2].vlan`; empty when the
    /// problem is not about one field (YAML syntax, unreadable file).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// All problems found in a configuration file (never empty when returned
/// as an error), in file order for semantic errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The errors.
    pub errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// Number of errors.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.errors.iter()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors { errors: vec![e] }
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

/// One error per line, no trailing newline.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}
