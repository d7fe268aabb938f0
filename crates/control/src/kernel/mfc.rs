//! The kernel's multicast forwarding cache (placeholder; being written).
