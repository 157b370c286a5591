//! RFC 18 eventlogs and crash-safe files (being written).
