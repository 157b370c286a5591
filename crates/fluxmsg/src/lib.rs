//! Flux messages as flux-core's local connector puts them on a stream
//! socket (RFC 3, with flux-core's actual framing).  Pure codec: no IO, no
//! panics on any input, sizes bounded by the caller.
//!
//! # Wire layout
//!
//! After a one-byte handshake (not handled here: the server writes `0` to
//! accept), every message travels as:
//!
//! * an 8-byte **preamble**: the u32 [`PREAMBLE_MAGIC`] in the sender's
//!   native byte order, then a big-endian u32 giving the length of what
//!   follows (the preamble itself excluded);
//! * the message **frames**, each a length then the bytes: lengths under
//!   255 take one byte, longer ones `0xFF` followed by a big-endian u32;
//! * frames in order: route ids and an empty delimiter (only with
//!   [`flag::ROUTE`]), the topic (with [`flag::TOPIC`], no NUL), the
//!   payload (with [`flag::PAYLOAD`]; string and JSON payloads end with a
//!   NUL), and last the 20-byte **PROTO** frame:
//!   `8E 01 type flags | userid | rolemask | aux1 | aux2`, all big-endian.
//!
//! [`Message`] keeps the flags that describe frames (`TOPIC`, `PAYLOAD`,
//! `ROUTE`) implicit in its `Option` fields, so a decoded message always
//! re-encodes to an equivalent byte sequence.

use std::fmt;

/// First four bytes of every message on the socket, in native byte order.
pub const PREAMBLE_MAGIC: u32 = 0xffee_0012;
/// Size of the preamble (magic + length).
pub const PREAMBLE_SIZE: usize = 8;
/// Size of the PROTO frame.
pub const PROTO_SIZE: usize = 20;
/// First byte of the PROTO frame.
pub const PROTO_MAGIC: u8 = 0x8e;
/// Second byte of the PROTO frame.
pub const PROTO_VERSION: u8 = 1;
/// A message size limit suited to Roster's requests: 16 MiB of payload
/// (the HTTP listener's body limit) plus room for topic and routes.
pub const DEFAULT_MAX_MESSAGE: u32 = (16 << 20) + (64 << 10);

/// `nodeid` meaning "any rank" (what most clients send).
pub const NODEID_ANY: u32 = 0xffff_ffff;
/// `nodeid` meaning "upstream of the sender".
pub const NODEID_UPSTREAM: u32 = 0xffff_fffe;
/// `userid` before the server stamps the real one.
pub const USERID_UNKNOWN: u32 = 0xffff_ffff;
/// Matchtag of requests that expect no response.
pub const MATCHTAG_NONE: u32 = 0;

/// Message flag bits (PROTO byte 3).
pub mod flag {
    pub const TOPIC: u8 = 0x01;
    pub const PAYLOAD: u8 = 0x02;
    pub const NORESPONSE: u8 = 0x04;
    pub const ROUTE: u8 = 0x08;
    pub const UPSTREAM: u8 = 0x10;
    pub const PRIVATE: u8 = 0x20;
    pub const STREAMING: u8 = 0x40;
    pub const USER1: u8 = 0x80;
    /// The bits that describe which frames are present.
    pub const STRUCTURAL: u8 = TOPIC | PAYLOAD | ROUTE;
}

/// Rolemask bits.
pub mod role {
    pub const NONE: u32 = 0;
    pub const OWNER: u32 = 1;
    pub const USER: u32 = 2;
    pub const LOCAL: u32 = 4;
    pub const ADMIN: u32 = 8;
    pub const ALL: u32 = 0xffff_ffff;
}

/// Message type (PROTO byte 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgType {
    Request,
    Response,
    Event,
    Control,
}

impl MsgType {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            MsgType::Request => 1,
            MsgType::Response => 2,
            MsgType::Event => 4,
            MsgType::Control => 8,
        }
    }

    /// The type of a wire value, if it is one.
    pub fn from_code(code: u8) -> Option<MsgType> {
        match code {
            1 => Some(MsgType::Request),
            2 => Some(MsgType::Response),
            4 => Some(MsgType::Event),
            8 => Some(MsgType::Control),
            _ => None,
        }
    }
}

impl fmt::Display for MsgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MsgType::Request => "request",
            MsgType::Response => "response",
            MsgType::Event => "event",
            MsgType::Control => "control",
        })
    }
}

/// One Flux message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub msg_type: MsgType,
    /// Flag bits other than [`flag::STRUCTURAL`] ones (those follow from
    /// `routes`, `topic` and `payload`; they are ignored here on encode
    /// and never set after decode).  See [`Message::flags`].
    pub flags: u8,
    pub userid: u32,
    pub rolemask: u32,
    /// nodeid (request), errnum (response), sequence (event), type (control).
    pub aux1: u32,
    /// matchtag (request, response), status (control).
    pub aux2: u32,
    /// The route stack; `Some` iff the ROUTE flag is set (`Some(vec![])`:
    /// ROUTE set, no route ids, as clients send and expect).  Route ids
    /// must not be empty.
    pub routes: Option<Vec<Vec<u8>>>,
    /// The topic; `Some` iff the TOPIC flag is set.  Must not contain NUL.
    pub topic: Option<String>,
    /// The raw payload, NUL included for strings; `Some` iff PAYLOAD is set.
    pub payload: Option<Vec<u8>>,
}

/// Errors decoding bytes from the socket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("bad preamble magic {found:#010x} (expected {PREAMBLE_MAGIC:#010x})")]
    BadMagic { found: u32 },
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: u32, max: u32 },
    #[error("frame {index} is truncated: it needs {needed} bytes, {available} remain")]
    Truncated {
        index: usize,
        needed: u64,
        available: usize,
    },
    #[error("message has no frames")]
    Empty,
    #[error("PROTO frame is {0} bytes (expected {PROTO_SIZE})")]
    BadProtoSize(usize),
    #[error("bad PROTO magic {0:#04x} (expected {PROTO_MAGIC:#04x})")]
    BadProtoMagic(u8),
    #[error("unsupported PROTO version {0} (expected {PROTO_VERSION})")]
    BadProtoVersion(u8),
    #[error("unknown message type {0:#04x}")]
    BadType(u8),
    #[error("ROUTE flag set but no route delimiter frame")]
    MissingRouteDelimiter,
    #[error("TOPIC flag set but no topic frame")]
    MissingTopic,
    #[error("PAYLOAD flag set but no payload frame")]
    MissingPayload,
    #[error("{0} unexpected frame(s) before the PROTO frame")]
    TrailingFrames(usize),
    #[error("topic is not valid UTF-8")]
    TopicNotUtf8,
    #[error("topic contains a NUL byte")]
    TopicNul,
}

/// Errors encoding a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("route id {0} is empty")]
    EmptyRouteId(usize),
    #[error("topic contains a NUL byte")]
    TopicNul,
    #[error("encoded message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: u64, max: u32 },
}

/// Errors reading a payload as a string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("payload is not NUL-terminated")]
    NotTerminated,
    #[error("payload is not valid UTF-8")]
    NotUtf8,
}

/// Number of bytes a frame of `len` data bytes takes.
fn frame_size(len: usize) -> u64 {
    len as u64 + if len < 255 { 1 } else { 5 }
}

fn put_frame(out: &mut Vec<u8>, data: &[u8]) {
    // Callers have checked that the whole message fits in a u32.
    match u8::try_from(data.len()) {
        Ok(n) if n < 255 => out.push(n),
        _ => {
            out.push(0xff);
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        }
    }
    out.extend_from_slice(data);
}

impl Message {
    /// A request as libflux builds it: ROUTE set with no route ids, TOPIC,
    /// userid unknown, rolemask 0, nodeid ANY.
    pub fn request(topic: impl Into<String>, matchtag: u32) -> Message {
        Message {
            msg_type: MsgType::Request,
            flags: 0,
            userid: USERID_UNKNOWN,
            rolemask: role::NONE,
            aux1: NODEID_ANY,
            aux2: matchtag,
            routes: Some(Vec::new()),
            topic: Some(topic.into()),
            payload: None,
        }
    }

    /// A response to `req`: same topic, matchtag and routes, STREAMING if
    /// the request had it, no payload, errnum 0, and the request's userid
    /// and rolemask (the caller stamps its own if it wants).
    pub fn response_to(req: &Message) -> Message {
        Message {
            msg_type: MsgType::Response,
            flags: req.flags & flag::STREAMING,
            userid: req.userid,
            rolemask: req.rolemask,
            aux1: 0,
            aux2: req.aux2,
            routes: req.routes.clone(),
            topic: req.topic.clone(),
            payload: None,
        }
    }

    /// The complete flags byte as it goes on the wire.
    pub fn flags(&self) -> u8 {
        let mut f = self.flags & !flag::STRUCTURAL;
        if self.routes.is_some() {
            f |= flag::ROUTE;
        }
        if self.topic.is_some() {
            f |= flag::TOPIC;
        }
        if self.payload.is_some() {
            f |= flag::PAYLOAD;
        }
        f
    }

    /// Is this flag bit set (structural bits included)?
    pub fn has_flag(&self, bit: u8) -> bool {
        self.flags() & bit == bit
    }

    /// Request nodeid.
    pub fn nodeid(&self) -> u32 {
        self.aux1
    }

    /// Response errnum.
    pub fn errnum(&self) -> u32 {
        self.aux1
    }

    /// Request / response matchtag.
    pub fn matchtag(&self) -> u32 {
        self.aux2
    }

    /// Set a string (or JSON text) payload, adding the trailing NUL.
    pub fn set_payload_str(&mut self, s: &str) {
        let mut p = Vec::with_capacity(s.len() + 1);
        p.extend_from_slice(s.as_bytes());
        p.push(0);
        self.payload = Some(p);
    }

    /// The payload as a string without its NUL (`None`: no payload).
    /// Like libflux, a payload without the trailing NUL is an error.
    pub fn payload_str(&self) -> Result<Option<&str>, PayloadError> {
        let Some(p) = &self.payload else {
            return Ok(None);
        };
        match p.split_last() {
            Some((0, body)) => std::str::from_utf8(body)
                .map(Some)
                .map_err(|_| PayloadError::NotUtf8),
            _ => Err(PayloadError::NotTerminated),
        }
    }

    fn check(&self) -> Result<(), EncodeError> {
        if let Some(routes) = &self.routes {
            if let Some(i) = routes.iter().position(Vec::is_empty) {
                return Err(EncodeError::EmptyRouteId(i));
            }
        }
        if self.topic.as_deref().is_some_and(|t| t.contains('\0')) {
            return Err(EncodeError::TopicNul);
        }
        Ok(())
    }

    /// Size of the encoded frames (preamble excluded).
    pub fn frames_len(&self) -> u64 {
        let mut n = frame_size(PROTO_SIZE);
        if let Some(routes) = &self.routes {
            n += routes.iter().map(|r| frame_size(r.len())).sum::<u64>() + 1;
        }
        if let Some(t) = &self.topic {
            n += frame_size(t.len());
        }
        if let Some(p) = &self.payload {
            n += frame_size(p.len());
        }
        n
    }

    /// The PROTO frame's 20 bytes.
    pub fn proto(&self) -> [u8; PROTO_SIZE] {
        let mut p = [0u8; PROTO_SIZE];
        p[0] = PROTO_MAGIC;
        p[1] = PROTO_VERSION;
        p[2] = self.msg_type.code();
        p[3] = self.flags();
        p[4..8].copy_from_slice(&self.userid.to_be_bytes());
        p[8..12].copy_from_slice(&self.rolemask.to_be_bytes());
        p[12..16].copy_from_slice(&self.aux1.to_be_bytes());
        p[16..20].copy_from_slice(&self.aux2.to_be_bytes());
        p
    }

    /// Append the frames (no preamble) to `out`.  The frames may be at
    /// most `max` bytes long.
    pub fn encode_frames(&self, out: &mut Vec<u8>, max: u32) -> Result<(), EncodeError> {
        self.check()?;
        let len = self.frames_len();
        if len > u64::from(max) {
            return Err(EncodeError::TooLarge { len, max });
        }
        out.reserve(len as usize);
        if let Some(routes) = &self.routes {
            for r in routes {
                put_frame(out, r);
            }
            put_frame(out, &[]);
        }
        if let Some(t) = &self.topic {
            put_frame(out, t.as_bytes());
        }
        if let Some(p) = &self.payload {
            put_frame(out, p);
        }
        put_frame(out, &self.proto());
        Ok(())
    }

    /// The message as it goes on the socket: preamble, then frames of at
    /// most `max` bytes.
    pub fn encode(&self, max: u32) -> Result<Vec<u8>, EncodeError> {
        self.check()?;
        let len = self.frames_len();
        let Ok(len32) = u32::try_from(len) else {
            return Err(EncodeError::TooLarge { len, max });
        };
        let mut out = Vec::with_capacity(PREAMBLE_SIZE + len as usize);
        out.extend_from_slice(&PREAMBLE_MAGIC.to_ne_bytes());
        out.extend_from_slice(&len32.to_be_bytes());
        self.encode_frames(&mut out, max)?;
        Ok(out)
    }

    /// Decode the frames of one message (what follows the preamble, and
    /// exactly that).
    pub fn decode_frames(body: &[u8]) -> Result<Message, DecodeError> {
        let frames = split_frames(body)?;
        let Some((proto, rest)) = frames.split_last() else {
            return Err(DecodeError::Empty);
        };
        let proto: &[u8; PROTO_SIZE] = proto
            .as_ref()
            .try_into()
            .map_err(|_| DecodeError::BadProtoSize(proto.len()))?;
        if proto[0] != PROTO_MAGIC {
            return Err(DecodeError::BadProtoMagic(proto[0]));
        }
        if proto[1] != PROTO_VERSION {
            return Err(DecodeError::BadProtoVersion(proto[1]));
        }
        let msg_type = MsgType::from_code(proto[2]).ok_or(DecodeError::BadType(proto[2]))?;
        let flags = proto[3];
        let be =
            |i: usize| u32::from_be_bytes([proto[i], proto[i + 1], proto[i + 2], proto[i + 3]]);

        let mut rest = rest.iter();
        let routes = if flags & flag::ROUTE != 0 {
            let mut routes = Vec::new();
            loop {
                match rest.next() {
                    None => return Err(DecodeError::MissingRouteDelimiter),
                    Some([]) => break,
                    Some(f) => routes.push(f.to_vec()),
                }
            }
            Some(routes)
        } else {
            None
        };
        let topic = if flags & flag::TOPIC != 0 {
            let t = rest.next().ok_or(DecodeError::MissingTopic)?;
            if t.contains(&0) {
                return Err(DecodeError::TopicNul);
            }
            let t = std::str::from_utf8(t).map_err(|_| DecodeError::TopicNotUtf8)?;
            Some(t.to_string())
        } else {
            None
        };
        let payload = if flags & flag::PAYLOAD != 0 {
            Some(rest.next().ok_or(DecodeError::MissingPayload)?.to_vec())
        } else {
            None
        };
        let extra = rest.len();
        if extra != 0 {
            return Err(DecodeError::TrailingFrames(extra));
        }
        Ok(Message {
            msg_type,
            flags: flags & !flag::STRUCTURAL,
            userid: be(4),
            rolemask: be(8),
            aux1: be(12),
            aux2: be(16),
            routes,
            topic,
            payload,
        })
    }
}

/// Check a preamble and return the length of the frames that follow.
/// Fails on a wrong magic or a length above `max`.
pub fn decode_preamble(p: &[u8; PREAMBLE_SIZE], max: u32) -> Result<u32, DecodeError> {
    let magic = u32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
    if magic != PREAMBLE_MAGIC {
        return Err(DecodeError::BadMagic { found: magic });
    }
    let len = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
    if len > max {
        return Err(DecodeError::TooLarge { len, max });
    }
    Ok(len)
}

/// Decode one message from the start of `buf` (preamble included).
/// `Ok(None)`: `buf` holds only part of a message so far.  On success,
/// also returns how many bytes the message took.
pub fn decode(buf: &[u8], max: u32) -> Result<Option<(Message, usize)>, DecodeError> {
    let Some(pre) = buf.first_chunk::<PREAMBLE_SIZE>() else {
        // Reject a wrong magic as early as possible.
        let n = buf.len().min(4);
        if buf[..n] != PREAMBLE_MAGIC.to_ne_bytes()[..n] {
            let mut m = [0u8; 4];
            m[..n].copy_from_slice(&buf[..n]);
            return Err(DecodeError::BadMagic {
                found: u32::from_ne_bytes(m),
            });
        }
        return Ok(None);
    };
    let len = decode_preamble(pre, max)? as usize;
    let Some(body) = buf.get(PREAMBLE_SIZE..PREAMBLE_SIZE + len) else {
        return Ok(None);
    };
    let msg = Message::decode_frames(body)?;
    Ok(Some((msg, PREAMBLE_SIZE + len)))
}

/// Split `body` into frames.
fn split_frames(body: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
    let mut frames = Vec::new();
    let mut rest = body;
    while let Some((&first, after)) = rest.split_first() {
        let index = frames.len();
        let (len, after) = if first < 0xff {
            (u64::from(first), after)
        } else {
            let Some((len, after)) = after.split_first_chunk::<4>() else {
                return Err(DecodeError::Truncated {
                    index,
                    needed: 4,
                    available: after.len(),
                });
            };
            (u64::from(u32::from_be_bytes(*len)), after)
        };
        let Some((data, next)) = usize::try_from(len)
            .ok()
            .and_then(|n| after.split_at_checked(n))
        else {
            return Err(DecodeError::Truncated {
                index,
                needed: len,
                available: after.len(),
            });
        };
        frames.push(data);
        rest = next;
    }
    Ok(frames)
}

#[cfg(test)]
mod tests;
