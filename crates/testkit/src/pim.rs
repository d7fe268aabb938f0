//! FRR pimd for tests (placeholder; being written).
