//! lab (under construction)
