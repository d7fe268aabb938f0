//! RFC 3918 multicast procedure (placeholder; being written).
