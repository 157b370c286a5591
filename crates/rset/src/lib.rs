//! RFC 20 resource set R (being written).
