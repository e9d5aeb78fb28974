//! The AeroStream native protocol: frame types shared by the gateway's
//! native front end (port 9091, TCP and QUIC streams) and the Rust client.
//!
//! Today this crate holds the framing layer every native message rides on:
//! a 7-byte header `0xAE 0x01 <op:u8> <len:u32 BE>` followed by `len` bytes
//! of body. The operation bodies and the client arrive with the native
//! protocol work; they attach to [`frame::FrameHeader::op`].
//!
//! ```
//! use sdk::frame::{FrameHeader, HEADER_LEN};
//!
//! let header = FrameHeader { op: 3, len: 42 };
//! let bytes = header.encode();
//! assert_eq!(bytes.len(), HEADER_LEN);
//! let decoded = FrameHeader::decode(&bytes, 1024).expect("valid header");
//! assert_eq!(decoded, header);
//! ```

pub mod frame;
