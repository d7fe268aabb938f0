//! The one error type of the crate.

use core::fmt;

/// Why bytes could not be read as (or written into) a packet format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header or a length field says it is.
    Truncated,
    /// A field has a value the format does not allow; the text names it.
    Malformed(&'static str),
    /// A checksum does not verify.
    Checksum,
    /// Well-formed, but a variant this crate does not represent
    /// (e.g. ARP for a non-Ethernet hardware type).
    Unsupported(&'static str),
}

/// `Result` with [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => write!(f, "truncated packet"),
            Error::Malformed(what) => write!(f, "malformed packet: {what}"),
            Error::Checksum => write!(f, "checksum mismatch"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

impl std::error::Error for Error {}
