//! Errno values and the RPC error type, shared with every transport
//! (re-exported from `roster-rpc`).

pub use rpc::errno::*;
pub use rpc::RpcError;
